# Every record of the campaign into tables and figures for the report.
from cloudbench.report_outputs import REPORT_OUTPUTS, cli_options


rule aggregate:
    input:
        aggregate_inputs,
    output:
        transfers=report(
            f"{RESULTS}/transfers.tsv",
            caption="../report/transfers_tsv.rst",
            category="Tables",
        ),
        timeseries=f"{RESULTS}/timeseries.tsv",
        steps=report(
            f"{RESULTS}/steps.tsv",
            caption="../report/steps_tsv.rst",
            category="Tables",
        ),
        missing=f"{RESULTS}/missing.tsv",
    log:
        f"{RESULTS}/logs/aggregate.log",
    conda:
        "../../envs/cloudbench.yaml"
    params:
        expected=expected_measurements(),
        results=lambda w, output: Path(output.transfers).parent,
    shell:
        "$CLOUDBENCH_PYTHON -m cloudbench aggregate --results {params.results} --expected {params.expected:q}"
        " --out {params.results} 2> {log}"


def report_files():
    """The plots rule's outputs, from the one table of the report's files."""
    files = {}
    for name, o in REPORT_OUTPUTS.items():
        path = f"{RESULTS}/{o.path}"
        caption = f"../report/{o.caption}.rst"
        files[name] = path if o.caption is None else report(path, caption, o.category)
    return files


rule plots:
    input:
        rules.aggregate.output,
    output:
        **report_files(),
    log:
        f"{RESULTS}/logs/plots.log",
    conda:
        "../../envs/cloudbench.yaml"
    threads: 4  # processes drawing the figures (at most the cores Snakemake may use)
    params:
        tables=lambda w, input: Path(input[0]).parent,
        info=report_info(),
        outputs=lambda w, output: cli_options(
            {name: getattr(output, name) for name in REPORT_OUTPUTS}
        ),
    shell:
        "$CLOUDBENCH_PYTHON -m cloudbench plots --tables {params.tables} --info {params.info:q}"
        " --jobs {threads} {params.outputs} 2> {log}"
