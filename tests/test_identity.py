"""A measurement's identity is declared once (cloudbench.campaign.identity): its keys, the
views derived from them, and the record type and paths that must agree with it."""

from __future__ import annotations

import ast
from dataclasses import fields
from pathlib import Path

import pytest

from cloudbench.campaign import identity
from cloudbench.campaign.identity import KEYS, MeasurementId, keys_through, keys_without
from cloudbench.campaign.model import ConfigError, load_campaign
from cloudbench.measure.record import TransferRow
from tests.infra.package_source import parsed

pytestmark = pytest.mark.unit

ROW = {
    "site": "vega", "remote": "main", "direction": "download", "tool": "s5cmd",
    "strategy": "chunked", "layout": "chunked-2MiB", "setting": "s5cmd-2x8", "repeat": 3,
}  # fmt: skip


def test_the_keys_are_the_dataclass_fields_in_the_tables_order():
    assert KEYS == tuple(f.name for f in fields(MeasurementId))
    assert KEYS[:3] == tuple(identity.ROUTE)
    assert KEYS[-1] == "repeat"
    assert identity.NAMED == ("tool", "strategy")


def test_views_are_subsequences_of_the_keys():
    for view in (identity.LABELS, identity.LINK, identity.ROUTE, identity.MEASUREMENT):
        assert isinstance(view, list)  # pandas reads a tuple as one key
        assert view == [k for k in KEYS if k in view]
    assert identity.LINK == ["site", "remote"]
    assert identity.LABELS == ["site", "remote", "direction", "layout", "setting", "repeat"]
    assert identity.GROUP == ["site", "remote", "direction", "layout", "setting"]
    assert identity.MEASUREMENT == [*KEYS[:-1]]
    assert keys_without("strategy", "setting", "repeat") == [
        "site", "remote", "direction", "tool", "layout"
    ]  # fmt: skip
    assert keys_without("layout", of=identity.GROUP) == [
        "site", "remote", "direction", "setting"
    ]  # fmt: skip
    assert keys_through("site") == ["site"]


def test_a_view_returns_a_fresh_list():
    keys_without("repeat").append("x")
    assert "x" not in keys_without("repeat")


@pytest.mark.parametrize("call", [lambda: keys_without("sight"), lambda: keys_through("rate")])
def test_a_misspelt_key_fails_loudly(call):
    with pytest.raises(ValueError, match="not a key of a measurement's identity"):
        call()


def test_of_a_record_keeps_every_key_and_types_the_repeat():
    m = MeasurementId.of({**ROW, "repeat": "3", "status": "ok"})
    assert m == MeasurementId(**ROW)
    assert m.values() == tuple(ROW.values())
    assert m.values(identity.LINK) == ("vega", "main")


@pytest.mark.parametrize("blank", [None, "", float("nan")])
def test_of_labels_reads_tool_and_strategy_from_setting_and_layout(blank):
    labels = {k: ROW[k] for k in identity.LABELS}
    assert MeasurementId.of(labels) == MeasurementId(**ROW)
    # a table's empty cell (an older table without the column) is read from the label too
    assert MeasurementId.of(labels | {"tool": blank, "strategy": blank}) == MeasurementId(**ROW)


def test_of_something_else_fails_naming_what_is_missing():
    with pytest.raises(KeyError, match="no direction, setting"):
        MeasurementId.of({"site": "a", "remote": "b", "layout": "plain", "repeat": 1})
    with pytest.raises(ConfigError, match="unknown setting label"):
        MeasurementId.of({**ROW, "tool": None, "setting": "fast"})


def test_wildcards_are_snakemakes_pattern_with_a_fixed_direction():
    w = MeasurementId.wildcards("upload")
    assert w.site == "{site}" and w.repeat == "{repeat}" and w.direction == "upload"
    assert MeasurementId.wildcards().direction == "{direction}"


def test_a_campaign_measurement_names_the_same_identity_as_its_row(demo_config):
    campaign = load_campaign(demo_config)
    m = next(campaign.measurements())
    ident = m.identity
    assert (ident.site, ident.remote, ident.direction) == (m.site, m.remote, m.direction)
    assert (ident.layout, ident.setting, ident.repeat) == (
        m.layout.label, m.setting.label, m.repeat
    )  # fmt: skip
    assert MeasurementId.of({k: getattr(ident, k) for k in identity.LABELS}) == ident


def test_the_record_type_has_every_key_with_its_type():
    """TransferRow (transfers.tsv) holds the identity's columns: a key renamed or retyped in
    one and not the other fails here."""
    row = {f.name: f.type for f in fields(TransferRow)}
    assert {f.name: f.type for f in fields(MeasurementId)} == {k: row[k] for k in KEYS}


PACKAGE = Path(__file__).resolve().parents[1] / "workflow/cloudbench"
# Lists holding two of the keys that are no measurement's identity: a step record's columns
# (a step is no measurement), the failure rate's rows (per tool, then direction), the fields
# of a copy in the campaign's manifest
NOT_THE_IDENTITY = {"report/aggregate.py": 1, "report/latency.py": 2, "steps.py": 1}


def _key_lists(tree: ast.AST) -> int:
    """List, tuple and set literals holding two or more of the identity's keys."""
    return sum(
        isinstance(node, ast.List | ast.Tuple | ast.Set)
        and sum(isinstance(e, ast.Constant) and e.value in KEYS for e in node.elts) >= 2
        for node in ast.walk(tree)
    )


def test_no_module_spells_the_identitys_keys_as_a_list():
    """The keys are written once, as MeasurementId's fields: a module that lists two or more
    of them again (a group, a table's columns) fails here; it takes a view instead."""
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        if n := _key_lists(parsed(path.read_text())):
            found[path.relative_to(PACKAGE).as_posix()] = n
    over = {p: n for p, n in found.items() if n > NOT_THE_IDENTITY.get(p, 0)}
    assert not over, f"literal lists of the identity's keys (use campaign.identity): {over}"
