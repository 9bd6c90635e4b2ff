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
import json
import sys
from collections.abc import Iterator, Mapping
from functools import cache
from pathlib import Path
from typing import Any, NoReturn

import yaml

SCHEMA_PATH = Path(__file__).resolve().parents[2] / "schemas" / "config.schema.yaml"


class SchemaError(ValueError):
    """The campaign file does not fit the schema; the message is one line naming the key."""


# libyaml's parser where PyYAML was built with it: the schema is read at every start of the
# workflow, and the pure-Python parser takes ~0.3 s for it
SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@cache
def load_schema() -> dict[str, Any]:
    with open(SCHEMA_PATH) as fh:
        return yaml.load(fh, Loader=SAFE_LOADER)


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
            # keys only site profiles set are no answer to a campaign file's typo
            known = ", ".join(k for k, v in props.items() if v.get("x-set-by") != "profile")
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
        raise SchemaError(f"{_path(err)}: {_message(err)}")
    return filled


_TYPE_WORDS = {"integer": "a whole number", "number": "a number"}


def _message(err: Any) -> str:
    """jsonschema's message, but a pattern error of a key that also takes numbers names
    every form it takes ("'sometimes' is not a whole number or text matching ^auto$")."""
    if err.validator != "pattern":
        return err.message
    types = err.schema.get("type")
    types = [types] if isinstance(types, str) else list(types or [])
    forms = [_TYPE_WORDS[t] for t in types if t in _TYPE_WORDS]
    return f"{err.instance!r} is not " + " or ".join(
        [*forms, f"text matching {err.validator_value}"]
    )


def stop(message: str) -> NoReturn:
    """End the run with one line a user can act on, before any job: no traceback frames
    (the mistake is in the campaign file or the environment, not in the workflow)."""
    print(f"cloudbench: {message}", file=sys.stderr, flush=True)
    raise SystemExit(1)


def validate_config(config: dict[str, Any]) -> None:
    """The Snakefile's check: fill ``config`` with the schema's defaults in place, or stop
    the run with one line naming the key (before any job or any data)."""
    try:
        filled = validate(config)
    except SchemaError as err:
        stop(f"config error: {err}")
    config.clear()
    config.update(filled)


def _rows(node: Mapping[str, Any], where: str, required: set[str]) -> Iterator[str]:
    for key, sub in node.get("properties", {}).items():
        name = f"{where}{key}"
        kinds = sub.get("type", "")
        kind = " or ".join(kinds) if isinstance(kinds, list) else kinds
        if "default" in sub:
            default = f"`{json_text(sub['default'])}`"
        else:
            default = "required" if key in required else "optional"
        text = " ".join(str(sub.get("description", "")).split()).replace("|", "\\|")
        yield f"| `{name}` | {kind} | {default} | {text} |"
        yield from _rows(sub, f"{name}.", set(sub.get("required", [])))
        extra = sub.get("additionalProperties")
        if isinstance(extra, Mapping):
            yield from _rows(extra, f"{name}.<name>.", set(extra.get("required", [])))


def json_text(value: Any) -> str:
    return json.dumps(value) if not isinstance(value, str) else value


CONFIG_DOC_HEAD = """# The campaign file

A campaign file is the whole campaign: `snakemake --configfile my-campaign.yaml` runs exactly
what it says, with the defaults below for what it leaves out, and nothing from
`config/config.yaml` (the demo, used only when no campaign file is given). A key that is not
listed here is refused, naming the nearest valid key. `--config key=value` applies on top
(site profiles set `site` and `required_env` that way).

`config/config.yaml` is the demo campaign; copy it to start your own. Sizes are exact: `3.8GiB`
= 3.8 × 2³⁰ bytes, `100MB` = 10⁸ bytes, or whole bytes; a bare `M` or `G` is refused
(rclone reads it as MiB, others as MB). Credentials never go here: rclone reads them from its
own config file or `RCLONE_CONFIG_<REMOTE>_*` variables, and a campaign file holding one is
refused.

This table is generated from `workflow/schemas/config.schema.yaml`
(`python -m cloudbench config-doc > config/README.md`); a test keeps them equal.

| key | type | default | meaning |
| --- | --- | --- | --- |
"""


def config_doc() -> str:
    """config/README.md: every key of the campaign file, from the schema (one place)."""
    schema = load_schema()
    rows = _rows(schema, "", set(schema.get("required", [])))
    return CONFIG_DOC_HEAD + "\n".join(rows) + "\n"
