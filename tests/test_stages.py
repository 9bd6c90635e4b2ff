"""The package's stages only look down: no module imports one of a higher stage.

The stages, lowest first (docs/architecture.md draws them): the small shared modules at the
package's root (records, sizes, intervals, processes, binaries), then data, campaign,
measure, then site and report (side by side), then steps, cli and __main__. A function-level
import counts like a module-level one: it runs back up the stages just the same when the
function is called.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import cloudbench
from tests.infra.package_source import parsed

pytestmark = pytest.mark.unit

PACKAGE = Path(cloudbench.__file__).parent
ROOT_MODULES = ("records", "sizes", "intervals", "processes", "binaries")
STAGES: dict[str, int] = {
    **dict.fromkeys(ROOT_MODULES, 1),
    "data": 2,
    "campaign": 3,
    "measure": 4,
    "site": 5,
    "report": 5,
    "steps": 6,
    "cli": 7,
    "__main__": 8,
}


def stage_of(module: str) -> str | None:
    """``cloudbench.measure.copy`` -> ``measure``; None outside the package."""
    parts = module.split(".")
    if parts[0] != "cloudbench" or len(parts) < 2:
        return None
    return parts[1]


def imported(tree: ast.AST) -> list[tuple[int, str]]:
    """Every ``cloudbench...`` module a file imports (line, module), at any depth."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module == "cloudbench":
                out += [(node.lineno, f"cloudbench.{a.name}") for a in node.names]
            elif node.module.startswith("cloudbench."):
                out.append((node.lineno, node.module))
        elif isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names if a.name.startswith("cloudbench.")]
    return out


def upward_imports(package: Path) -> list[str]:
    found = []
    for path in sorted(package.rglob("*.py")):
        rel = path.relative_to(package.parent)
        me = stage_of(".".join(rel.with_suffix("").parts))
        if me not in STAGES:
            continue
        for line, module in imported(parsed(path.read_text())):
            them = stage_of(module)
            if them in STAGES and STAGES[them] > STAGES[me]:
                found.append(f"{rel}:{line}: {me} imports {module}")
    return found


def test_every_top_level_module_and_folder_has_a_stage():
    names = {p.stem for p in PACKAGE.glob("*.py")} | {
        p.name for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").exists()
    }
    assert names - {"__init__"} <= set(STAGES), names - set(STAGES)


def test_no_import_runs_up_the_stages():
    assert upward_imports(PACKAGE) == []


def test_the_check_sees_an_upward_import(tmp_path):
    """The check itself: a campaign module that imports measure is found."""
    pkg = tmp_path / "cloudbench"
    (pkg / "campaign").mkdir(parents=True)
    (pkg / "campaign" / "model.py").write_text(
        "def f():\n    from cloudbench.measure import clients\n"
    )
    assert upward_imports(pkg) == [
        "cloudbench/campaign/model.py:2: campaign imports cloudbench.measure"
    ]


@pytest.mark.parametrize("module", ["cloudbench.records", "cloudbench.data.steps"])
def test_stage_of(module):
    assert stage_of(module) in STAGES


# --- no circles inside a stage either -------------------------------------------------------


def module_imports(package: Path) -> dict[str, set[str]]:
    """Each module of the package and the package's modules it imports, at any depth
    (``from cloudbench.report import stats`` names the module ``cloudbench.report.stats``)."""
    names = {
        ".".join(p.relative_to(package.parent).with_suffix("").parts).removesuffix(".__init__")
        for p in package.rglob("*.py")
    }
    graph: dict[str, set[str]] = {}
    for path in sorted(package.rglob("*.py")):
        me = ".".join(path.relative_to(package.parent).with_suffix("").parts)
        me = me.removesuffix(".__init__")
        edges = graph.setdefault(me, set())
        for node in ast.walk(parsed(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                for alias in node.names:
                    sub = f"{node.module}.{alias.name}"
                    edges.add(sub if sub in names else node.module)
            elif isinstance(node, ast.Import):
                edges.update(a.name for a in node.names)
        edges &= names
        edges.discard(me)
    return graph


def import_circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan's), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                out.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(out)


def test_no_modules_import_each_other_in_a_circle():
    """A circle inside one stage (model <-> tune, burst <-> stats, compare -> tables ->
    headline -> compare, until 2026-11-28) is worked round with function-level imports and
    means neither module can be read or tested without the other: lower the shared piece."""
    assert import_circles(module_imports(PACKAGE)) == []


def test_the_circle_check_sees_one_through_a_function_level_import(tmp_path):
    pkg = tmp_path / "cloudbench"
    (pkg / "report").mkdir(parents=True)
    for init in (pkg / "__init__.py", pkg / "report" / "__init__.py"):
        init.write_text("")
    (pkg / "report" / "stats.py").write_text("from cloudbench.report import burst\n")
    (pkg / "report" / "burst.py").write_text(
        "def f():\n    from cloudbench.report.stats import x\n"
    )
    (pkg / "report" / "tables.py").write_text("from cloudbench.report import stats\n")
    circles = import_circles(module_imports(pkg))
    assert circles == [["cloudbench.report.burst", "cloudbench.report.stats"]]
