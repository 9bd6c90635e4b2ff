# Many small files (dataset.layout: nested): one job generates and checksums the whole
# dataset, where data.smk's job per file would spend more on start-up than on the data.
# upload_inputs and checksum_jsons (common.smk) pick this rule for such a dataset.


rule generate_small_files:
    input:
        paths.preflight(RESULTS, UPLOAD_SITE),
    output:
        record=paths.dataset_step_record(RESULTS, UPLOAD_SITE, "generate"),
        checksums=paths.dataset_checksums(RESULTS, UPLOAD_SITE),
    log:
        paths.job_log(RESULTS, UPLOAD_SITE, "generate-small-files"),
    conda:
        "../../envs/cloudbench.yaml"
    threads: 1
    resources:
        mem_mb=512,
    params:
        data=paths.dataset_dir(UPLOAD_DATA),
        dataset=dataset_args(),
        names=dataset_names(),
    shell:
        "$CLOUDBENCH_PYTHON -m cloudbench generate-small-files --dataset-dir {params.data}"
        " --dataset {params.dataset:q} --names {params.names:q} --checksums {output.checksums}"
        " --record {output.record} 2> {log}"
