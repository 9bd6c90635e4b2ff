# Every record of the campaign into tables and figures for the report.


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
            f"{RESULTS}/steps.tsv", caption="../report/steps_tsv.rst", category="Tables"
        ),
        missing=f"{RESULTS}/missing.tsv",
    log:
        f"{RESULTS}/logs/aggregate.log",
    params:
        expected=expected_measurements(),
        results=lambda w, output: Path(output.transfers).parent,
    conda:
        "../../envs/cloudbench.yaml"
    shell:
        "python -m cloudbench aggregate --results {params.results} --expected {params.expected:q}"
        " --out {params.results} 2> {log}"


rule plots:
    input:
        rules.aggregate.output,
    output:
        rate_vs_time=report(
            f"{RESULTS}/figures/rate_vs_time.png",
            caption="../report/rate_vs_time.rst",
            category="Transfers",
        ),
        rate_by_strategy=report(
            f"{RESULTS}/figures/rate_by_strategy.png",
            caption="../report/rate_by_strategy.rst",
            category="Transfers",
        ),
        steps=report(
            f"{RESULTS}/figures/steps.png",
            caption="../report/steps.rst",
            category="Where the time goes",
        ),
        table=report(
            f"{RESULTS}/figures/transfers.html",
            caption="../report/transfers_table.rst",
            category="Tables",
        ),
    log:
        f"{RESULTS}/logs/plots.log",
    params:
        tables=lambda w, input: Path(input[0]).parent,
    conda:
        "../../envs/cloudbench.yaml"
    shell:
        "python -m cloudbench plots --tables {params.tables} --rate-vs-time {output.rate_vs_time}"
        " --rate-by-strategy {output.rate_by_strategy} --steps {output.steps}"
        " --table {output.table} 2> {log}"
