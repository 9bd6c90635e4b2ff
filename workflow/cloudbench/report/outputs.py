"""Every file of the report, once: the outputs of the ``aggregate`` rule (tables, HTML, the
front page) and of the ``figures`` rule (the figures but the front page's), their CLI options,
the tests.

Here and not in :mod:`cloudbench.report.build`, so the rules and the CLI can name the files without
importing matplotlib and pandas.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, NamedTuple


class ReportOutput(NamedTuple):
    """One output of the ``aggregate`` rule: where it goes and how the Snakemake report
    shows it."""

    path: str  # relative to the campaign's results directory
    caption: str | None  # workflow/report/<caption>.rst; None: not a report entry of its own
    category: str | None


# The campaign's tables by name (``<name>.tsv`` beside the campaign's records): what
# cloudbench.report.aggregate writes and the figures are drawn from.
TABLES: dict[str, ReportOutput] = {
    "transfers": ReportOutput("transfers.tsv", "transfers_tsv", "Tables"),
    "timeseries": ReportOutput("timeseries.tsv", None, None),
    "steps": ReportOutput("steps.tsv", "steps_tsv", "Tables"),
    "missing": ReportOutput("missing.tsv", None, None),
    "clients": ReportOutput("clients.tsv", "clients_tsv", "Tables"),
    "probes": ReportOutput("probes.tsv", "probes_tsv", "Tables"),
    "precision": ReportOutput("precision.tsv", "precision_tsv", "Tables"),
    "tuned": ReportOutput("tuned.tsv", "tuned_tsv", "Tables"),
}

# By name: the key of build_report's ``out`` and, with - for _, the figure CLI option.
REPORT_OUTPUTS: dict[str, ReportOutput] = {
    "rate_vs_time": ReportOutput("figures/rate_vs_time.png", "rate_vs_time", "Transfers"),
    "rate_by_strategy": ReportOutput(
        "figures/rate_by_strategy.png", "rate_by_strategy", "Transfers"
    ),
    # the front page's figure: the whole-transfer rate of its table
    "rate_whole": ReportOutput("figures/rate_whole.png", "rate_whole", "Transfers"),
    "speedup": ReportOutput("figures/speedup.png", "speedup", "Transfers"),
    "rate_vs_start": ReportOutput("figures/rate_vs_start.png", "rate_vs_start", "Transfers"),
    "drift_tsv": ReportOutput("drift.tsv", "drift_tsv", "Tables"),
    "rate_vs_distance": ReportOutput(
        "figures/rate_vs_distance.png", "rate_vs_distance", "Transfers"
    ),
    "steps": ReportOutput("figures/steps.png", "steps", "Where the time goes"),
    "table": ReportOutput("figures/transfers.html", "transfers_table", "Tables"),
    "summary_tsv": ReportOutput("summary.tsv", "summary_tsv", "Tables"),
    "summary_html": ReportOutput("figures/summary.html", "summary_table", "Tables"),
    "cost": ReportOutput("figures/cost.html", "cost", "Cost"),
    "campaign": ReportOutput("figures/campaign.html", "campaign", "Campaign"),
    "scaling": ReportOutput("figures/scaling.png", "scaling", "Scaling"),
    "scaling_html": ReportOutput("figures/scaling.html", "scaling_table", "Scaling"),
    "scaling_tsv": ReportOutput("scaling.tsv", "scaling_tsv", "Tables"),
    "tools": ReportOutput("figures/tools.png", "tools", "Tools"),
    "tools_html": ReportOutput("figures/tools.html", "tools_table", "Tools"),
    "tools_tsv": ReportOutput("tools.tsv", "tools_tsv", "Tables"),
    "latency": ReportOutput("figures/latency.png", "latency", "Latency"),
    "latency_html": ReportOutput("figures/latency.html", "latency_table", "Latency"),
    "latency_tsv": ReportOutput("latency.tsv", "latency_tsv", "Tables"),
    "compare_html": ReportOutput("figures/compare.html", "compare_table", "Comparison"),
    "compare_tsv": ReportOutput("compare.tsv", "compare_tsv", "Tables"),
    "precision_html": ReportOutput("figures/precision.html", "precision_table", "Repeats"),
    # what limits each route, its figures and the action (report.limits)
    "limits_tsv": ReportOutput("limits.tsv", "limits_tsv", "Tables"),
    # each route's best rate and state, for a centre's monitoring (report.routes)
    "routes_json": ReportOutput("routes.json", None, None),
    "routes_prom": ReportOutput("routes.prom", None, None),
    # the front page's text, with a place for its figure (aggregate's: report.headline)
    "headline": ReportOutput("figures/headline.html", None, None),
    # the report's front page (workflow/report/workflow.rst): the headline with its figure
    "front_page": ReportOutput("figures/front_page.html", None, None),
}


# The figures the ``figures`` rule draws from the tables, in a job of their own: most of the
# report's CPU time (matplotlib's import alone is a second), so that a run that wants the
# numbers only skips them (``snakemake --omit-from figures``), and a figure redrawn does not
# aggregate the records again. The front page (front_page) is written with them: it embeds
# one (rate_whole) in the headline that ``aggregate`` wrote.
FIGURES: tuple[str, ...] = (
    "rate_vs_time",
    "steps",
    "rate_by_strategy",
    "speedup",
    "rate_vs_distance",
    "rate_vs_start",
    "scaling",
    "tools",
    "latency",
    "rate_whole",
    "front_page",
)

# What ``aggregate`` writes beside its tables: every other output of the report.
AGGREGATE_OUTPUTS: dict[str, ReportOutput] = {
    name: o for name, o in REPORT_OUTPUTS.items() if name not in FIGURES
}


def cli_options(outputs: dict[str, str], names: Iterable[str]) -> str:
    """The output options of ``cloudbench aggregate`` or ``cloudbench figures`` (``names``:
    AGGREGATE_OUTPUTS or FIGURES) for ``outputs`` (name -> path)."""
    return " ".join(f"--{name.replace('_', '-')} {outputs[name]}" for name in names)


def rule_outputs(
    results: str, report: Callable[..., Any], names: Iterable[str], tables: bool = False
) -> dict[str, Any]:
    """The outputs ``names`` (of REPORT_OUTPUTS) under ``results``, with ``tables`` the
    campaign's tables first (``<table>_tsv``); ``report`` is Snakemake's ``report()``, applied
    to every file with a caption (captions are relative to workflow/rules/)."""
    outputs: dict[str, Any] = {}
    named = {f"{name}_tsv": o for name, o in TABLES.items()} if tables else {}
    if set(named) & set(REPORT_OUTPUTS):
        raise ValueError(f"a table and a figure share a name: {set(named) & set(REPORT_OUTPUTS)}")
    for name, o in (named | {name: REPORT_OUTPUTS[name] for name in names}).items():
        path = f"{results}/{o.path}"
        caption = f"../report/{o.caption}.rst"
        outputs[name] = path if o.caption is None else report(path, caption, o.category)
    return outputs


def report_code(package: Path = Path(__file__).parents[1]) -> list[str]:
    """The package's source files and the report's captions: inputs of the ``aggregate``
    and ``figures`` rules, so a new cloudbench (a file edited or pulled, hence newer than the
    report) redraws the report by Snakemake's own mtime rule. Snakemake's ``code`` rerun
    trigger is off (profiles/default): it would also measure every finished transfer again."""
    files = [*package.rglob("*.py"), *(package.parent / "report").glob("*.rst")]
    return sorted(str(path.resolve()) for path in files if "__pycache__" not in path.parts)
