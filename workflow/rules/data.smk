# Data steps at the upload site: generate, checksum, chunk. Bulk data lives in the upload
# site's scratch and is removed (temp) once every upload that needs it has run.


rule generate:
    input:
        f"{SITES}/{UPLOAD_SITE}/preflight.json",
    output:
        data=temp(f"{UPLOAD_DATA}/dataset/{{file}}"),
        record=f"{SITES}/{UPLOAD_SITE}/steps/generate/{{file}}.json",
    log:
        f"{SITES}/{UPLOAD_SITE}/logs/generate/{{file}}.log",
    conda:
        "../../envs/cloudbench.yaml"
    threads: 2  # two writer threads (striped keystream / parallel chunks)
    resources:
        mem_mb=512,
    params:
        size=CAMPAIGN.file_bytes,
        seed=CAMPAIGN.seed,
        campaign=CAMPAIGN.name,
        site=UPLOAD_SITE,
    shell:
        "$CLOUDBENCH_PYTHON -m cloudbench generate --out {output.data} --size {params.size} --seed {params.seed:q}"
        " --campaign {params.campaign} --site {params.site} --record {output.record} 2> {log}"


rule checksum:
    input:
        f"{UPLOAD_DATA}/dataset/{{file}}",
    output:
        sum=f"{SITES}/{UPLOAD_SITE}/checksums/{{file}}.xxh128",
        chunks=f"{SITES}/{UPLOAD_SITE}/checksums/{{file}}.chunks.json",
        record=f"{SITES}/{UPLOAD_SITE}/steps/checksum/{{file}}.json",
    log:
        f"{SITES}/{UPLOAD_SITE}/logs/checksum/{{file}}.log",
    conda:
        "../../envs/cloudbench.yaml"
    threads: 1
    resources:
        mem_mb=512,
    params:
        chunk_sizes=",".join(map(str, CAMPAIGN.chunk_sizes)),
        campaign=CAMPAIGN.name,
        site=UPLOAD_SITE,
    shell:
        "$CLOUDBENCH_PYTHON -m cloudbench checksum --data {input} --chunk-sizes {params.chunk_sizes:q} --sum {output.sum}"
        " --chunks {output.chunks} --campaign {params.campaign} --site {params.site}"
        " --record {output.record} 2> {log}"


rule chunk:
    input:
        f"{UPLOAD_DATA}/dataset/{{file}}",
    output:
        chunks=temp(directory(f"{UPLOAD_DATA}/chunks/{{chunk}}/{{file}}")),
        record=f"{SITES}/{UPLOAD_SITE}/steps/chunk/{{chunk}}/{{file}}.json",
    log:
        f"{SITES}/{UPLOAD_SITE}/logs/chunk/{{chunk}}/{{file}}.log",
    conda:
        "../../envs/cloudbench.yaml"
    threads: 2  # two writer threads (striped keystream / parallel chunks)
    resources:
        mem_mb=512,
    params:
        chunk_bytes=lambda w: parse_size(w.chunk),
        width=lambda w: CAMPAIGN.chunk_index_width(parse_size(w.chunk)),
        campaign=CAMPAIGN.name,
        site=UPLOAD_SITE,
    shell:
        "$CLOUDBENCH_PYTHON -m cloudbench chunk --data {input} --chunk-bytes {params.chunk_bytes} --width {params.width}"
        " --outdir {output.chunks} --campaign {params.campaign} --site {params.site}"
        " --record {output.record} 2> {log}"
