# The latency probe: each remote as seen from a site, before and after its transfers.
# It holds the network resource so no measured transfer at the site overlaps it. "before"
# waits for the site's preflight; "after" is wired to the site's transfers in common.smk.
# (The lambdas are here only until they join the input functions in common.smk.)


rule probe:
    input:
        lambda w: [paths.preflight(RESULTS, w.site)] if w.when == "before" else [],
    output:
        paths.probe_record(RESULTS, W["site"], W["remote"], "{when}"),
    log:
        paths.job_log(RESULTS, W["site"], "probe", W["remote"], "{when}"),
    wildcard_constraints:
        when="before|after",
    conda:
        "../../envs/cloudbench.yaml"
    threads: 1
    resources:
        network=1,
        mem_mb=512,
    params:
        # name:bucket/campaign, the prefix the transfers use: the probe's objects go there
        url=lambda w: CAMPAIGN.remote_prefix(CAMPAIGN.remote_named(w.remote)),
        requests=config["probe"]["count"],
        size=config["probe"]["object_size"],
    shell:
        "$CLOUDBENCH_PYTHON -m cloudbench probe --remote-url {params.url:q}"
        " --count {params.requests} --object-size {params.size}"
        " --when {wildcards.when} --site {wildcards.site} --skip-non-s3 --out {output} 2> {log}"
