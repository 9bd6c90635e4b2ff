# After a download: chunks back into files, then every file against the manifest.


rule reassemble:
    input:
        download=f"{SITES}/{{site}}/transfers/download/{{remote}}/{{layout}}/r{{repeat}}.json",
        manifest=f"{SITES}/{{site}}/manifests/{{remote}}/{{layout}}/r{{repeat}}.json",
    output:
        f"{SITES}/{{site}}/steps/reassemble/{{remote}}/{{layout}}/r{{repeat}}.json",
    log:
        f"{SITES}/{{site}}/logs/reassemble/{{remote}}/{{layout}}/r{{repeat}}.log",
    wildcard_constraints:
        layout=r"chunked-[0-9]+(KiB|MiB|GiB|TiB|B)",
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
        f"{SITES}/{{site}}/verify/{{remote}}/{{layout}}/r{{repeat}}.json",
    log:
        f"{SITES}/{{site}}/logs/verify/{{remote}}/{{layout}}/r{{repeat}}.log",
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
