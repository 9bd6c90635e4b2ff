# Every record of the campaign into tables and figures for the report.
from cloudbench.report_outputs import REPORT_OUTPUTS, cli_options, rule_outputs


rule aggregate:
    input:
        aggregate_inputs,
    output:
        transfers=report(
            paths.table(RESULTS, "transfers"),
            caption="../report/transfers_tsv.rst",
            category="Tables",
        ),
        timeseries=paths.table(RESULTS, "timeseries"),
        steps=report(
            paths.table(RESULTS, "steps"),
            caption="../report/steps_tsv.rst",
            category="Tables",
        ),
        missing=paths.table(RESULTS, "missing"),
        clients=report(
            paths.table(RESULTS, "clients"),
            caption="../report/clients_tsv.rst",
            category="Tables",
        ),
        probes=report(
            paths.table(RESULTS, "probes"),
            caption="../report/probes_tsv.rst",
            category="Tables",
        ),
    log:
        paths.campaign_log(RESULTS, "aggregate"),
    conda:
        "../../envs/cloudbench.yaml"
    params:
        expected=expected_measurements(),
        results=lambda w, output: Path(output.transfers).parent,
    shell:
        "$CLOUDBENCH_PYTHON -m cloudbench aggregate --results {params.results} --expected {params.expected:q}"
        " --out {params.results} 2> {log}"


rule plots:
    input:
        rules.aggregate.output,
    output:
        **rule_outputs(RESULTS, report),
    log:
        paths.campaign_log(RESULTS, "plots"),
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
