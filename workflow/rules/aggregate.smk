# Every record of the campaign into tables and figures for the report: one job, so pandas
# is loaded once and the figures are drawn while the HTML tables are written.
from cloudbench.report.outputs import (
    REPORT_OUTPUTS,
    cli_options,
    code_digest,
    rule_outputs,
)


rule aggregate:
    input:
        aggregate_inputs,
    output:
        **rule_outputs(RESULTS, report),
    log:
        paths.campaign_log(RESULTS, "aggregate"),
    conda:
        "../../envs/cloudbench.yaml"
    threads: 2  # processes drawing the figures (at most the cores Snakemake may use)
    params:
        expected=expected_measurements(),
        results=lambda w, output: Path(output.transfers_tsv).parent,
        info=report_info(),
        code=code_digest(),
        figures=lambda w, output: cli_options(
            {name: getattr(output, name) for name in REPORT_OUTPUTS}
        ),
    shell:
        "$CLOUDBENCH_PYTHON -m cloudbench aggregate --results {params.results} --expected {params.expected:q}"
        " --out {params.results} --info {params.info:q} --jobs {threads} {params.figures} 2> {log}"
