# The run itself, not its jobs' inputs: what every job's command starts with, which rules
# run on the submitting host, and the hooks that say how the run starts and ends (one
# function each of cloudbench.site.lifecycle).
from cloudbench.site import lifecycle

# Every rule's command starts with what it relies on: $CLOUDBENCH_PYTHON -m cloudbench from
# this checkout, and the run's spec (braces doubled: Snakemake formats the prefix)
shell.prefix(
    jobenv.shell_prefix(workflow.basedir, RUN_SPEC)
    .replace("{", "{{")
    .replace("}", "}}")
)


# Cheap bookkeeping runs on the submit host, not as batch jobs.
localrules:
    preflight,
    preflight_gate,
    store_open,
    stage,
    staged_all,
    publish,
    pull,
    manifest,
    aggregate,
    figures,
    status,
    cleanup,
    precision,
    precision_final,
    tune,
    tune_final,
    plan,


# A campaign whose every remote is a directory has no endpoint to probe: each probe job only
# records why (status skipped), a moment's work that need not wait in a batch queue.
if all(remote.is_directory for remote in CAMPAIGN.remotes):

    localrules:
        probe,


# Where the site's compute nodes cannot reach the store, its profile says transfers_on:
# submit_host and the transfers run here, on the login or data-transfer node.
if config["transfers_on"] == "submit_host":

    localrules:
        upload,
        download,


# What the hooks know of this run (cloudbench.site.lifecycle)
RUN = lifecycle.Run(CAMPAIGN, RESULTS, RUN_SPEC, record, verify_record)


onstart:
    lifecycle.started(RUN, workflow, config, ONE_ALLOCATION, TRANSFER_GROUP)


onerror:
    lifecycle.stopped(RUN)


onsuccess:
    lifecycle.succeeded(RUN)
