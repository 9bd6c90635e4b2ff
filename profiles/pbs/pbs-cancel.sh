#!/usr/bin/env bash
# pbs-cancel.sh JOBID... -- cluster-generic ``cancel-cmd``: qdel every id.
#
# Why it looks like this:
# * snakemake-executor-plugin-cluster-generic 1.0.9 runs [cancel-cmd, id, ...]
#   WITHOUT a shell (so the profile value must be this file's path, no args)
#   and kills it after 2 seconds.  So every id gets its own qdel, all in
#   parallel, each bounded by `timeout`.
# * One id being gone already (finished, or deleted by hand) must not stop the
#   others or fail the command: failures go to logs/pbs/cancel.log and the
#   script always exits 0.
set -u

log_dir="logs/pbs"
timeout_s="${PBS_CANCEL_TIMEOUT:-30}"

pids=()
ids=()
for id in "$@"; do
    [ -n "$id" ] || continue
    timeout "$timeout_s" qdel "$id" >"/dev/null" 2>&1 &
    pids+=("$!")
    ids+=("$id")
done

for i in "${!pids[@]}"; do
    if ! wait "${pids[$i]}"; then
        mkdir -p "$log_dir" 2>/dev/null &&
            printf '%s qdel %s failed (already finished or gone?)\n' \
                "$(date +%Y-%m-%dT%H:%M:%S)" "${ids[$i]}" >>"$log_dir/cancel.log" 2>/dev/null
    fi
done
exit 0
