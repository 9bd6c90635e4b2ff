# First at every site: rclone, the remote and scratch are checked before any data moves.
# Last: the run ends non-zero, listing every measurement that is not ok.


rule preflight:
    output:
        paths.preflight(RESULTS, W["site"]),
    log:
        paths.job_log(RESULTS, W["site"], "preflight"),
    conda:
        "../../envs/cloudbench.yaml"
    resources:
        scratch_bytes=scratch_needed,
    params:
        spec=preflight_spec,
    shell:
        "$CLOUDBENCH_PYTHON -m cloudbench preflight --spec {params.spec:q}"
        ' --needed-bytes {resources.scratch_bytes} --run-spec "$CLOUDBENCH_RUN_SPEC" --out {output} 2> {log}'


rule preflight_gate:
    input:
        paths.preflight(RESULTS, W["site"]),  # the site's preflight checked the gates first
    output:
        paths.preflight_gate(RESULTS, W["site"], W["remote"], W["tool"]),
    log:
        paths.job_log(RESULTS, W["site"], "preflight", W["remote"], W["tool"]),
    conda:
        "../../envs/cloudbench.yaml"
    params:
        spec=gate_spec,
    shell:
        "$CLOUDBENCH_PYTHON -m cloudbench preflight --spec {params.spec:q} --site-preflight {input}"
        ' --run-spec "$CLOUDBENCH_RUN_SPEC" --out {output} 2> {log}'


rule status:
    input:
        paths.table(RESULTS, "transfers"),
    output:
        paths.status_file(RESULTS),
    log:
        paths.campaign_log(RESULTS, "status"),
    conda:
        "../../envs/cloudbench.yaml"
    shell:
        "$CLOUDBENCH_PYTHON -m cloudbench status --transfers {input} --out {output} 2> {log}"


rule cleanup:
    log:
        paths.campaign_log(RESULTS, "cleanup"),
    conda:
        "../../envs/cloudbench.yaml"
    params:
        spec=cleanup_spec(),
    shell:
        "$CLOUDBENCH_PYTHON -m cloudbench cleanup --spec {params.spec:q} 2>&1 | tee {log}"
