# The remote is the rendezvous: each site publishes its results there (the previous run
# moves to history/), and aggregation anywhere pulls the sites it did not measure itself.


rule publish:
    input:
        publish_inputs,
    output:
        paths.published(RESULTS, W["site"]),
    log:
        paths.campaign_log(RESULTS, "publish", W["site"]),
    conda:
        "../../envs/cloudbench.yaml"
    params:
        spec=exchange_spec(),
        local=lambda w, output: Path(output[0]).parent,
    shell:
        "$CLOUDBENCH_PYTHON -m cloudbench publish --site {wildcards.site} --spec {params.spec:q}"
        " --local {params.local} --out {output} 2> {log}"


rule pull:
    output:
        paths.pulled(RESULTS, W["site"]),
    log:
        paths.campaign_log(RESULTS, "pull", W["site"]),
    conda:
        "../../envs/cloudbench.yaml"
    params:
        spec=exchange_spec(),
        local=lambda w, output: Path(output[0]).parent,
    shell:
        "$CLOUDBENCH_PYTHON -m cloudbench pull --site {wildcards.site} --spec {params.spec:q}"
        " --local {params.local} --out {output} 2> {log}"
