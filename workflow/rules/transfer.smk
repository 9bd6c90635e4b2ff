# Timed transfers. Each is one rclone copy with a JSON log of its own; the global resource
# network=1 keeps measured transfers at one site from overlapping.


rule stage:
    input:
        unpack(stage_inputs),
    output:
        paths.staged(RESULTS, UPLOAD_SITE, W["layout"]),
    log:
        paths.job_log(RESULTS, UPLOAD_SITE, "stage", W["layout"]),
    conda:
        "../../envs/cloudbench.yaml"
    shell:
        "$CLOUDBENCH_PYTHON -m cloudbench stage --checksums {input.checksums}"
        " --steps {input.steps} --out {output} 2> {log}"


rule staged_all:
    input:
        staged_layouts(),
    output:
        paths.staged_all(RESULTS, UPLOAD_SITE),
    log:
        paths.job_log(RESULTS, UPLOAD_SITE, "stage", "all"),
    conda:
        "../../envs/cloudbench.yaml"
    shell:
        "printf '%s\\n' {input} > {output} 2> {log}"


# Just before each measurement, on the submitting host: its store's breaker opened during
# this run fails this job at once, naming it, so Snakemake never submits the transfer that
# needs it (keep-going runs the rest; cloudbench.site.breaker). Its token is temp: gone once
# the transfer has run, so a measurement run again in a later run passes it again.
rule store_open:
    input:
        store_open_inputs,
    output:
        temp(breaker.open_token(copy_pattern(paths.transfer_record))),
    log:
        paths.job_log(
            RESULTS,
            W["site"],
            "store_open",
            "{direction}",
            W["remote"],
            W["layout"],
            W["setting"],
            f"r{W['repeat']}",
        ),
    wildcard_constraints:
        direction="upload|download",
    priority: store_open_priority
    resources:
        network=1,
    params:
        spec=store_open_spec,
    run:
        breaker.store_open(params.spec, RUN_SPEC, output[0], log[0])


rule upload:
    input:
        unpack(upload_inputs),
    output:
        record=transfer_pattern("upload"),
        series=paths.series(transfer_pattern("upload")),
    log:
        job=transfer_job_log("upload"),
        client=transfer_pattern("upload", paths.transfer_log),
    priority: transfer_priority("upload")
    group:
        TRANSFERS_GROUPED
    conda:
        "../../envs/cloudbench.yaml"
    threads: workflow.cores
    resources:
        network=1,
        mem_mb=2048,
        nodes=clients_of,
        tasks=clients_of,
        mpi=launcher_of,
        runtime=transfer_runtime,
        copy_timeout_s=copy_timeout_s,
    params:
        spec=spec_json("upload"),
        retry=retry_token("upload"),
        dataset=paths.dataset_dir(UPLOAD_DATA),
        chunks=paths.chunks_root(UPLOAD_DATA),
    shell:
        "$CLOUDBENCH_PYTHON -m cloudbench upload --spec {params.spec:q} --threads {threads}"
        " --dataset-dir {params.dataset} --chunks-root {params.chunks}"
        " --checksums {input.staged} --record {output.record} --series {output.series}"
        " --client-log {log.client} --walltime-min {resources.runtime}"
        " --copy-timeout-s {resources.copy_timeout_s}"
        ' --run-spec "$CLOUDBENCH_RUN_SPEC"'
        " 2> {log.job}"


rule download:
    input:
        download_inputs,
    output:
        record=transfer_pattern("download"),
        series=paths.series(transfer_pattern("download")),
        manifest=copy_pattern(paths.copy_manifest),
    log:
        job=transfer_job_log("download"),
        client=transfer_pattern("download", paths.transfer_log),
    priority: transfer_priority("download")
    group:
        TRANSFERS_GROUPED
    conda:
        "../../envs/cloudbench.yaml"
    threads: workflow.cores
    resources:
        network=1,
        mem_mb=2048,
        nodes=clients_of,
        tasks=clients_of,
        mpi=launcher_of,
        runtime=transfer_runtime,
        copy_timeout_s=copy_timeout_s,
    params:
        spec=spec_json("download"),
        retry=retry_token("download"),
        upload_record=upload_of,
    shell:
        "$CLOUDBENCH_PYTHON -m cloudbench download --spec {params.spec:q} --threads {threads}"
        " --manifest {output.manifest} --upload-record={params.upload_record:q}"
        " --record {output.record} --series {output.series}"
        " --client-log {log.client} --walltime-min {resources.runtime}"
        " --copy-timeout-s {resources.copy_timeout_s}"
        ' --run-spec "$CLOUDBENCH_RUN_SPEC"'
        " 2> {log.job}"


rule manifest:
    input:
        checksums=checksum_jsons(),
        uploads=upload_records(),
    output:
        manifest=paths.campaign_manifest(RESULTS),
        checksums=paths.campaign_checksums(RESULTS),
    log:
        paths.job_log(RESULTS, UPLOAD_SITE, "manifest"),
    conda:
        "../../envs/cloudbench.yaml"
    params:
        info=manifest_info(),
        release=UPLOAD_DATA,
    shell:
        "$CLOUDBENCH_PYTHON -m cloudbench manifest --info {params.info:q} --checksums {input.checksums}"
        " --uploads {input.uploads} --out {output.manifest} --release {params.release:q} 2> {log}"
