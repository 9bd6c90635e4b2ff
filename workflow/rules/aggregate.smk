# Every record of the campaign into tables and figures for the report: one job, so pandas
# is loaded once and the figures are drawn while the HTML tables are written. What the
# tables may hold is a file (plan.json): a large sweep's list would not fit on a command
# line (Linux takes at most 128 KiB in one argument, and the shell gets the whole command
# as one), nor read well in the report's job parameters.
from cloudbench.report.outputs import (
    REPORT_OUTPUTS,
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
        **rule_outputs(RESULTS, report),
    log:
        paths.campaign_log(RESULTS, "aggregate"),
    conda:
        "../../envs/cloudbench.yaml"
    threads: 2  # processes drawing the figures (at most the cores Snakemake may use)
    params:
        plan=paths.plan(RESULTS),
        results=lambda w, output: Path(output.transfers_tsv).parent,
        info=report_info(),
        figures=lambda w, output: cli_options(
            {name: getattr(output, name) for name in REPORT_OUTPUTS}
        ),
    shell:
        "$CLOUDBENCH_PYTHON -m cloudbench aggregate --results {params.results} --expected {params.plan}"
        " --out {params.results} --info {params.info:q} --jobs {threads} {params.figures} 2> {log}"
