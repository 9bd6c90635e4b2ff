# Timed transfers. Each is one rclone copy with a JSON log of its own; the global resource
# network=1 keeps measured transfers at one site from overlapping.


rule upload:
    input:
        unpack(upload_inputs),
    output:
        record=f"{SITES}/{{site}}/transfers/upload/{{remote}}/{{layout}}/r{{repeat}}.json",
        series=f"{SITES}/{{site}}/transfers/upload/{{remote}}/{{layout}}/r{{repeat}}.series.tsv",
    log:
        job=f"{SITES}/{{site}}/logs/upload/{{remote}}/{{layout}}/r{{repeat}}.log",
        rclone=f"{SITES}/{{site}}/rclone/upload/{{remote}}/{{layout}}/r{{repeat}}.jsonl",
    conda:
        "../../envs/cloudbench.yaml"
    threads: workflow.cores
    resources:
        network=1,
        mem_mb=2048,
    params:
        spec=spec_json("upload"),
        retry=retry_token("upload"),
        dataset=f"{UPLOAD_DATA}/dataset",
        chunks=f"{UPLOAD_DATA}/chunks",
    shell:
        "$CLOUDBENCH_PYTHON -m cloudbench upload --spec {params.spec:q} --threads {threads}"
        " --dataset-dir {params.dataset} --chunks-root {params.chunks}"
        " --checksums {input.checksums} --record {output.record} --series {output.series}"
        " --rclone-log {log.rclone} 2> {log.job}"


rule download:
    input:
        download_inputs,
    output:
        record=f"{SITES}/{{site}}/transfers/download/{{remote}}/{{layout}}/r{{repeat}}.json",
        series=f"{SITES}/{{site}}/transfers/download/{{remote}}/{{layout}}/r{{repeat}}.series.tsv",
        manifest=f"{SITES}/{{site}}/manifests/{{remote}}/{{layout}}/r{{repeat}}.json",
    log:
        job=f"{SITES}/{{site}}/logs/download/{{remote}}/{{layout}}/r{{repeat}}.log",
        rclone=f"{SITES}/{{site}}/rclone/download/{{remote}}/{{layout}}/r{{repeat}}.jsonl",
    conda:
        "../../envs/cloudbench.yaml"
    threads: workflow.cores
    resources:
        network=1,
        mem_mb=2048,
    params:
        spec=spec_json("download"),
        retry=retry_token("download"),
        upload_record=lambda w, input: input[0] if len(input) > 1 else "",
    shell:
        "$CLOUDBENCH_PYTHON -m cloudbench download --spec {params.spec:q} --threads {threads}"
        " --manifest {output.manifest} --upload-record={params.upload_record:q}"
        " --record {output.record} --series {output.series}"
        " --rclone-log {log.rclone} 2> {log.job}"


rule manifest:
    input:
        checksums=checksum_jsons(),
        uploads=upload_records(),
    output:
        f"{RESULTS}/manifest.json",
    log:
        f"{SITES}/{UPLOAD_SITE}/logs/manifest.log",
    conda:
        "../../envs/cloudbench.yaml"
    params:
        info=manifest_info(),
    shell:
        "$CLOUDBENCH_PYTHON -m cloudbench manifest --info {params.info:q} --checksums {input.checksums}"
        " --uploads {input.uploads} --out {output} 2> {log}"
