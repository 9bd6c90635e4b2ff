# repeats: auto. After each round a site decides, per measurement identity, whether its
# median is known well enough (cloudbench.campaign.precision); the next round measures only
# the identities that need more. A checkpoint, so the DAG grows by the rounds it needs; run
# in Snakemake's own process, as a large sweep's records would not fit on a command line.
from cloudbench.campaign import precision


checkpoint precision:
    input:
        unpack(round_inputs),
    output:
        paths.precision_round(RESULTS, W["site"], "{round}"),
    log:
        paths.job_log(RESULTS, W["site"], "precision", "r{round}"),
    wildcard_constraints:
        round=r"[0-9]+",
    params:
        target=precision_target(),
    run:
        precision.decide_files(
            input.records, input.previous, params.target, output[0], log[0]
        )


rule precision_final:
    input:
        final_state,
    output:
        paths.precision_final(RESULTS, W["site"]),
    log:
        paths.job_log(RESULTS, W["site"], "precision", "final"),
    conda:
        "../../envs/cloudbench.yaml"
    params:
        release=release_after_last_round,
    shell:
        "$CLOUDBENCH_PYTHON -m cloudbench precision-final --decisions {input} --out {output}"
        " --release={params.release:q} 2> {log}"
