# Data steps at the upload site: generate, checksum, chunk. Bulk data lives in the upload
# site's scratch, outside Snakemake's view: the records below are the outputs, and any job
# that finds the data gone regenerates it byte-identically (the keystream is seeded).


rule generate:
    input:
        paths.preflight(RESULTS, UPLOAD_SITE),
    output:
        paths.data_step_record(RESULTS, UPLOAD_SITE, "generate", W["file"]),
    log:
        paths.job_log(RESULTS, UPLOAD_SITE, "generate", W["file"]),
    conda:
        "../../envs/cloudbench.yaml"
    threads: 2  # two writer threads (striped keystream)
    resources:
        mem_mb=512,
    params:
        data=paths.dataset_dir(UPLOAD_DATA),
        dataset=dataset_args(),
    shell:
        "$CLOUDBENCH_PYTHON -m cloudbench generate --dataset-dir {params.data} --file {wildcards.file}"
        " --dataset {params.dataset:q} --record {output} 2> {log}"


rule checksum:
    input:
        paths.data_step_record(RESULTS, UPLOAD_SITE, "generate", W["file"]),
    output:
        sum=paths.checksum_sum(RESULTS, UPLOAD_SITE, W["file"]),
        chunks=paths.checksum_json(RESULTS, UPLOAD_SITE, W["file"]),
        record=paths.data_step_record(RESULTS, UPLOAD_SITE, "checksum", W["file"]),
    log:
        paths.job_log(RESULTS, UPLOAD_SITE, "checksum", W["file"]),
    conda:
        "../../envs/cloudbench.yaml"
    threads: 1
    resources:
        mem_mb=512,
    params:
        data=paths.dataset_dir(UPLOAD_DATA),
        dataset=dataset_args(),
    shell:
        "$CLOUDBENCH_PYTHON -m cloudbench checksum --dataset-dir {params.data} --file {wildcards.file}"
        " --dataset {params.dataset:q} --sum {output.sum}"
        " --chunks {output.chunks} --record {output.record} 2> {log}"


rule chunk:
    input:
        paths.data_step_record(RESULTS, UPLOAD_SITE, "generate", W["file"]),
    output:
        paths.data_step_record(RESULTS, UPLOAD_SITE, "chunk", W["file"], W["chunk"]),
    log:
        paths.job_log(RESULTS, UPLOAD_SITE, "chunk", W["chunk"], W["file"]),
    conda:
        "../../envs/cloudbench.yaml"
    threads: 2  # two writer threads (alternate chunks)
    resources:
        mem_mb=512,
    params:
        data=paths.dataset_dir(UPLOAD_DATA),
        chunks=paths.chunks_root(UPLOAD_DATA),
        dataset=dataset_args(),
        chunk_bytes=lambda w: parse_size(w.chunk),
    shell:
        "$CLOUDBENCH_PYTHON -m cloudbench chunk --dataset-dir {params.data} --file {wildcards.file}"
        " --dataset {params.dataset:q} --chunk-bytes {params.chunk_bytes} --chunks-root {params.chunks}"
        " --record {output} 2> {log}"
