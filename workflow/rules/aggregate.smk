# Every record of the campaign into tables, HTML tables and the front page's text (aggregate),
# then the figures from those tables and the front page with its figure (figures): a run that
# wants only the numbers skips the figures, most of the report's time, with `--omit-from
# figures`. What the tables may hold is a file (plan.json): a large sweep's list would not fit
# on a command line (Linux takes at most 128 KiB in one argument, and the shell gets the whole
# command as one), nor read well in the report's job parameters.
from cloudbench.report.outputs import (
    AGGREGATE_OUTPUTS,
    FIGURES,
    cli_options,
    report_code,
    rule_outputs,
)


rule plan:
    output:
        paths.plan(RESULTS),
    log:
        paths.campaign_log(RESULTS, "plan"),
    params:
        expected=expected_measurements(),
    run:
        jobs.write_text(output[0], params.expected, log[0])


rule aggregate:
    input:
        records=aggregate_inputs,
        code=report_code(),
    output:
        **rule_outputs(RESULTS, report, AGGREGATE_OUTPUTS, tables=True),
    log:
        paths.campaign_log(RESULTS, "aggregate"),
    conda:
        "../../envs/cloudbench.yaml"
    params:
        plan=paths.plan(RESULTS),
        results=lambda w, output: Path(output.transfers_tsv).parent,
        info=report_info(),
        outputs=lambda w, output: cli_options(
            {name: getattr(output, name) for name in AGGREGATE_OUTPUTS},
            AGGREGATE_OUTPUTS,
        ),
    shell:
        "$CLOUDBENCH_PYTHON -m cloudbench aggregate --results {params.results} --expected {params.plan}"
        " --out {params.results} --info {params.info:q} {params.outputs} 2> {log}"


rule figures:
    input:
        transfers=rules.aggregate.output.transfers_tsv,
        timeseries=rules.aggregate.output.timeseries_tsv,
        steps=rules.aggregate.output.steps_tsv,
        probes=rules.aggregate.output.probes_tsv,
        headline=rules.aggregate.output.headline,
        code=report_code(),
    output:
        **rule_outputs(RESULTS, report, FIGURES),
    log:
        paths.campaign_log(RESULTS, "figures"),
    conda:
        "../../envs/cloudbench.yaml"
    threads: 2  # processes drawing the figures (at most the cores Snakemake may use)
    params:
        tables=lambda w, input: Path(input.transfers).parent,
        info=report_info(),
        outputs=lambda w, output: cli_options(
            {name: getattr(output, name) for name in FIGURES}, FIGURES
        ),
    shell:
        "$CLOUDBENCH_PYTHON -m cloudbench figures --tables {params.tables} --info {params.info:q}"
        " --jobs {threads} --headline {input.headline} {params.outputs} 2> {log}"
