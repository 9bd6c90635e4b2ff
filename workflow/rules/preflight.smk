# First at every site: rclone, the remote and scratch are checked before any data moves.
# Last: the run ends non-zero, listing every measurement that is not ok.


rule preflight:
    output:
        paths.preflight(RESULTS, W["site"]),
    log:
        paths.job_log(RESULTS, W["site"], "preflight"),
    conda:
        "../../envs/cloudbench.yaml"
    params:
        spec=preflight_spec,
    shell:
        "$CLOUDBENCH_PYTHON -m cloudbench preflight --spec {params.spec:q} --out {output} 2> {log}"


rule status:
    input:
        f"{RESULTS}/transfers.tsv",
    output:
        f"{RESULTS}/status.txt",
    log:
        f"{RESULTS}/logs/status.log",
    conda:
        "../../envs/cloudbench.yaml"
    shell:
        "$CLOUDBENCH_PYTHON -m cloudbench status --transfers {input} --out {output} 2> {log}"


rule cleanup:
    log:
        f"{RESULTS}/logs/cleanup.log",
    conda:
        "../../envs/cloudbench.yaml"
    params:
        spec=cleanup_spec(),
    shell:
        "$CLOUDBENCH_PYTHON -m cloudbench cleanup --spec {params.spec:q} > {log} 2>&1"
