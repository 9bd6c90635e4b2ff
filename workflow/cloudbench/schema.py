"""The campaign file against its schema: unknown keys refused by name, defaults filled in.

The schema (``workflow/schemas/config.schema.yaml``) is the one place where keys, their
meaning and their defaults are written. This module reads it so that the workflow, the
launcher and the tests all see the same campaign, and turns every violation into one line
naming the key, because a misspelt ``repeat: 5`` that is silently ignored produces a
campaign the user never asked for.
"""

from __future__ import annotations

import copy
import difflib
from collections.abc import Iterator, Mapping
from functools import cache
from pathlib import Path
from typing import Any

import yaml

SCHEMA_PATH = Path(__file__).resolve().parents[1] / "schemas" / "config.schema.yaml"


class SchemaError(ValueError):
    """The campaign file does not fit the schema; the message is one line naming the key."""


@cache
def load_schema() -> dict[str, Any]:
    with open(SCHEMA_PATH) as fh:
        return yaml.safe_load(fh)


def _unknown(value: Any, schema: Mapping[str, Any], where: str) -> Iterator[str]:
    """Dotted names of keys in ``value`` that ``schema`` does not allow, with a suggestion."""
    if not isinstance(value, Mapping) or schema.get("type") != "object":
        return
    props = schema.get("properties", {})
    extra = schema.get("additionalProperties", True)
    for key, sub in value.items():
        name = f"{where}{key}"
        if key in props:
            yield from _unknown(sub, props[key], f"{name}.")
        elif isinstance(extra, Mapping):  # a map of named things (sites, remotes)
            yield from _unknown(sub, extra, f"{name}.")
        elif extra is False:
            near = difflib.get_close_matches(str(key), list(props), n=1, cutoff=0.6)
            hint = f" (did you mean '{where}{near[0]}'?)" if near else ""
            known = ", ".join(props)
            yield f"{name}: unknown key{hint}; known keys here: {known}"


def _fill_defaults(value: Any, schema: Mapping[str, Any]) -> None:
    """Set every absent key that has a ``default`` in ``schema``, recursively, in place."""
    if not isinstance(value, dict):
        return
    for key, sub in schema.get("properties", {}).items():
        if key not in value and "default" in sub:
            value[key] = copy.deepcopy(sub["default"])
        if key in value:
            _fill_defaults(value[key], sub)
    extra = schema.get("additionalProperties")
    if isinstance(extra, Mapping):
        for key, sub in value.items():
            if key not in schema.get("properties", {}):
                _fill_defaults(sub, extra)


def _path(error: Any) -> str:
    return ".".join(str(p) for p in error.absolute_path) or "(top level)"


def validate(config: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of ``config`` with the schema's defaults filled in; SchemaError if it does not fit.

    Unknown keys are reported first (with the nearest valid key), then the first shape
    error jsonschema finds, as ``<dotted.key>: <what is wrong>``.
    """
    import jsonschema  # snakemake's own dependency; imported here, only where configs are read

    schema = load_schema()
    unknown = list(_unknown(config, schema, ""))
    if unknown:
        raise SchemaError(unknown[0])
    filled = copy.deepcopy(dict(config))
    _fill_defaults(filled, schema)
    validator = jsonschema.Draft202012Validator(schema)
    errors = sorted(validator.iter_errors(filled), key=lambda e: list(e.absolute_path))
    if errors:
        err = errors[0]
        raise SchemaError(f"{_path(err)}: {err.message}")
    return filled


def validate_config(config: dict[str, Any]) -> None:
    """The Snakefile's check: fill ``config`` with the schema's defaults in place, or stop
    the run with one line naming the key (before any job or any data)."""
    try:
        filled = validate(config)
    except SchemaError as err:
        from snakemake.exceptions import WorkflowError

        raise WorkflowError(f"config error: {err}") from None
    config.clear()
    config.update(filled)
