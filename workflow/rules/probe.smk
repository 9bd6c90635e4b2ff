# The latency probe: each remote as seen from a site, before and after its transfers
# (probe_inputs in common.smk). It holds the network resource so no measured transfer at
# the site overlaps it; its priority puts "before" ahead of the transfers that are ready.


rule probe:
    input:
        probe_inputs,
    output:
        paths.probe_record(RESULTS, W["site"], W["remote"], "{when}"),
    log:
        paths.job_log(RESULTS, W["site"], "probe", W["remote"], "{when}"),
    wildcard_constraints:
        when="before|after",
    priority: 20
    conda:
        "../../envs/cloudbench.yaml"
    threads: 1
    resources:
        network=1,
        mem_mb=512,
    params:
        url=probe_url,
        requests=config["probe"]["count"],
        size=config["probe"]["object_size"],
    shell:
        "$CLOUDBENCH_PYTHON -m cloudbench probe --remote-url {params.url:q} --remote {wildcards.remote}"
        " --count {params.requests} --object-size {params.size}"
        " --when {wildcards.when} --site {wildcards.site} --skip-non-s3 --out {output} 2> {log}"
