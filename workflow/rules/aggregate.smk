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
            f"{RESULTS}/steps.tsv",
            caption="../report/steps_tsv.rst",
            category="Tables",
        ),
        missing=f"{RESULTS}/missing.tsv",
        clients=report(
            f"{RESULTS}/clients.tsv",
            caption="../report/clients_tsv.rst",
            category="Tables",
        ),
        probes=report(
            f"{RESULTS}/probes.tsv",
            caption="../report/probes_tsv.rst",
            category="Tables",
        ),
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
        speedup=report(
            f"{RESULTS}/figures/speedup.png",
            caption="../report/speedup.rst",
            category="Transfers",
        ),
        rate_vs_distance=report(
            f"{RESULTS}/figures/rate_vs_distance.png",
            caption="../report/rate_vs_distance.rst",
            category="Transfers",
        ),
        steps=report(
            f"{RESULTS}/figures/steps.png",
            caption="../report/steps.rst",
            category="Where the time goes",
        ),
        summary_html=report(
            f"{RESULTS}/figures/summary.html",
            caption="../report/summary_table.rst",
            category="Tables",
        ),
        summary_tsv=report(
            f"{RESULTS}/summary.tsv",
            caption="../report/summary_tsv.rst",
            category="Tables",
        ),
        table=report(
            f"{RESULTS}/figures/transfers.html",
            caption="../report/transfers_table.rst",
            category="Tables",
        ),
        cost=report(
            f"{RESULTS}/figures/cost.html",
            caption="../report/cost.rst",
            category="Cost",
        ),
        campaign=report(
            f"{RESULTS}/figures/campaign.html",
            caption="../report/campaign.rst",
            category="Campaign",
        ),
        scaling=report(
            f"{RESULTS}/figures/scaling.png",
            caption="../report/scaling.rst",
            category="Scaling",
        ),
        scaling_html=report(
            f"{RESULTS}/figures/scaling.html",
            caption="../report/scaling_table.rst",
            category="Scaling",
        ),
        tools=report(
            f"{RESULTS}/figures/tools.png",
            caption="../report/tools.rst",
            category="Tools",
        ),
        tools_html=report(
            f"{RESULTS}/figures/tools.html",
            caption="../report/tools_table.rst",
            category="Tools",
        ),
        latency=report(
            f"{RESULTS}/figures/latency.png",
            caption="../report/latency.rst",
            category="Latency",
        ),
        latency_html=report(
            f"{RESULTS}/figures/latency.html",
            caption="../report/latency_table.rst",
            category="Latency",
        ),
        headline=f"{RESULTS}/figures/headline.html",  # the report's front page shows it
    log:
        f"{RESULTS}/logs/plots.log",
    conda:
        "../../envs/cloudbench.yaml"
    params:
        tables=lambda w, input: Path(input[0]).parent,
        info=report_info(),
    shell:
        "$CLOUDBENCH_PYTHON -m cloudbench plots --tables {params.tables} --info {params.info:q}"
        " --rate-vs-time {output.rate_vs_time} --rate-by-strategy {output.rate_by_strategy}"
        " --speedup {output.speedup} --rate-vs-distance {output.rate_vs_distance}"
        " --steps {output.steps} --table {output.table} --summary-tsv {output.summary_tsv}"
        " --summary-html {output.summary_html} --cost {output.cost}"
        " --campaign {output.campaign} --headline {output.headline}"
        " --scaling {output.scaling} --scaling-html {output.scaling_html}"
        " --tools {output.tools} --tools-html {output.tools_html}"
        " --latency {output.latency} --latency-html {output.latency_html} 2> {log}"
