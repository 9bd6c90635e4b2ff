# repeats: auto. After each round a site decides, per measurement identity, whether its
# median is known well enough (cloudbench.campaign.precision); the next round measures only
# the identities that need more. A checkpoint, so the DAG grows by the rounds it needs.


checkpoint precision:
    input:
        unpack(precision_inputs),
    output:
        paths.precision_round(RESULTS, W["site"], "{round}"),
    log:
        paths.job_log(RESULTS, W["site"], "precision", "r{round}"),
    wildcard_constraints:
        round=r"[0-9]+",
    conda:
        "../../envs/cloudbench.yaml"
    params:
        target=precision_target(),
    shell:
        "$CLOUDBENCH_PYTHON -m cloudbench precision --target {params.target:q}"
        " --records {input.records} --previous {input.previous} --out {output} 2> {log}"


rule precision_final:
    input:
        final_precision,
    output:
        paths.precision_final(RESULTS, W["site"]),
    log:
        paths.job_log(RESULTS, W["site"], "precision", "final"),
    conda:
        "../../envs/cloudbench.yaml"
    shell:
        "cp {input} {output} 2> {log}"
