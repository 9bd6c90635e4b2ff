# After a download: chunks back into files, then every file against the manifest.


rule reassemble:
    input:
        download=transfer_pattern("download"),
        manifest=copy_pattern(paths.copy_manifest),
    output:
        copy_pattern(paths.reassemble_record),
    log:
        transfer_job_log("reassemble"),
    wildcard_constraints:
        layout=f"chunked-{CHUNK}",
    priority: 10  # before the next download: frees scratch sooner
    conda:
        "../../envs/cloudbench.yaml"
    threads: 1
    resources:
        mem_mb=512,
    params:
        spec=spec_json("download"),
    shell:
        "$CLOUDBENCH_PYTHON -m cloudbench reassemble --spec {params.spec:q} --manifest {input.manifest}"
        " --download-record {input.download} --record {output} 2> {log}"


rule verify:
    input:
        unpack(verify_inputs),
    output:
        copy_pattern(paths.verify_record),
    log:
        transfer_job_log("verify"),
    priority: 10  # before the next download: frees scratch sooner
    conda:
        "../../envs/cloudbench.yaml"
    threads: 1
    resources:
        mem_mb=512,
    params:
        spec=spec_json("download"),
    shell:
        "$CLOUDBENCH_PYTHON -m cloudbench verify --spec {params.spec:q} --manifest {input.manifest}"
        " --download-record {input.download} --record {output} 2> {log}"
