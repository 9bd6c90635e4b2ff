# tune: per site, remote, direction and tool, an adaptive search for the fastest setting
# (cloudbench.campaign.tune). After each round a checkpoint replays every search of the site
# from its records so far and names the next round's settings; the DAG grows by the rounds
# the searches need. Run in Snakemake's own process, like repeats: auto's checkpoint.
from cloudbench.campaign import tune


checkpoint tune:
    input:
        unpack(round_inputs),
    output:
        paths.tune_round(RESULTS, W["site"], "{round}"),
    log:
        paths.job_log(RESULTS, W["site"], "tune", "r{round}"),
    wildcard_constraints:
        round=r"[0-9]+",
    params:
        target=tune_target(),
    run:
        # imported here, not while the workflow is parsed: only this job needs the clients
        from cloudbench.measure.suggest import tuned_command

        tune.decide_files(
            CAMPAIGN,
            wildcards.site,
            int(wildcards.round),
            input.records,
            output[0],
            log[0],
            tuned_command,
        )


rule tune_final:
    input:
        final_state,
    output:
        paths.tune_final(RESULTS, W["site"]),
    log:
        paths.job_log(RESULTS, W["site"], "tune", "final"),
    conda:
        "../../envs/cloudbench.yaml"
    params:
        release=release_after_last_round,
    shell:
        "$CLOUDBENCH_PYTHON -m cloudbench precision-final --decisions {input} --out {output}"
        " --release={params.release:q} 2> {log}"
