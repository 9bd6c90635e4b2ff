#!/usr/bin/env bash
# `make test`: the whole suite, in two pytest sessions.
#
#   rates   the tests that check measured rates against a bandwidth cap (marked `rates`),
#           RATES_WORKERS at a time. They use little CPU (a quarter of a core each), but a
#           copy that waits for a core is slower than its cap, so they must not wait.
#   others  every other test, TEST_WORKERS at a time (pytest-xdist, --dist loadgroup). They
#           keep both cores busy (Snakemake start-ups, reports, browsers).
#
# The two sessions run side by side, each in a cgroup of its own (the cgroup-v1 cpu
# controller, where this user may make groups: root on the test machines): the rates
# session's group weighs eight times the others' (cpu.shares 8192 against 1024), so a rates
# test's process gets a core the moment it wants one (a waking group preempts, and it is
# given 8/9 of the machine while both want more), and the others take every cycle it leaves
# (three quarters of the two cores while it runs) and never less than 1/9 of them. A weight
# of 262144 against 2 (2026-11-26: every rate the rates tests check read 0.953-0.997 of
# its cap) starved the others outright while a rates test built a report: on a machine half
# as fast (2026-11-28) a demo copy paced at 16.8 MB/s read 6.4, a group's exec and exit took
# 0.55 s and an AWS CLI exited 2.4 s after its last byte, failing 2 of 3 fresh-clone runs.
# Group weights are not nice levels: a group gets its share whatever its number of
# processes (plain nice, rates at -5 and others at 10, cost capped copies 10-20% of their
# rate: ci13, ci14 on 2026-11-25). Where no group can be made, the rates session runs
# first, alone.
#
# Usage: scripts/test-suite.sh PYTEST RATES_WORKERS TEST_WORKERS [pytest args...]
set -uo pipefail
pytest=$1 rates_workers=$2 test_workers=$3
shift 3
work=$(mktemp -d)
durations=$work/durations
export CLOUDBENCH_DURATIONS_FILE=$durations CLOUDBENCH_DEMO_DIR=$work/demo
export CLOUDBENCH_TIMELINE_FILE=$work/timeline
cpu=/sys/fs/cgroup/cpu  # the cgroup-v1 cpu controller
groups=()
cleanup() {
    for g in "${groups[@]}"; do rmdir "$g" 2>/dev/null; done
    rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# pytest's exit code 5 (no test selected, e.g. by ARGS) is no failure of a session
session_status() { [ "$1" -eq 5 ] && echo 0 || echo "$1"; }

# a cgroup of the cpu controller with this weight, its path printed; nothing where none
# can be made (no cgroup-v1 cpu controller, not root)
cpu_group() {
    local g=$cpu/cloudbench-test-$$-$1
    [ -d "$cpu" ] && [ -w "$cpu" ] && mkdir "$g" 2>/dev/null || return 1
    echo "$2" > "$g/cpu.shares" 2>/dev/null || { rmdir "$g"; return 1; }
    echo "$g"
}

# run a pytest session inside a cgroup (this subshell joins it, then becomes pytest)
in_group() {
    local g=$1
    shift
    ( echo "$BASHPID" > "$g/tasks" && exec $pytest "$@" )
}

rates=(-m rates -n "$rates_workers" "$@")
others=(-m "not rates" -n "$test_workers" --dist loadgroup "$@")

if fast=$(cpu_group rates 8192) && slow=$(cpu_group others 1024); then
    groups=("$fast" "$slow")
    echo "== the tests that check measured rates, $rates_workers at a time (output below once" \
        "they end), beside every other test, $test_workers at a time, at an eighth of their CPU weight"
    in_group "$fast" "${rates[@]}" > "$work/rates.out" 2>&1 &
    rates_pid=$!
    in_group "$slow" "${others[@]}"
    others_status=$(session_status $?)
    wait "$rates_pid"
    rates_status=$(session_status $?)
    echo "== the tests that check measured rates (ran beside the others)"
    cat "$work/rates.out"
else
    [ -n "${fast:-}" ] && rmdir "$fast"
    echo "== no cgroup of the cpu controller can be made here: the tests that check measured" \
        "rates run first, alone, $rates_workers at a time"
    $pytest "${rates[@]}"
    rates_status=$(session_status $?)
    echo "== every other test, $test_workers at a time"
    $pytest "${others[@]}"
    others_status=$(session_status $?)
fi

echo "== the ten slowest tests of the whole suite (seconds: setup + call + teardown)"
sort -rn "$durations" | head -10
mkdir -p .pytest_cache && sort -rn "$durations" > .pytest_cache/test-durations.tsv
sort -n "$work/timeline" > .pytest_cache/test-timeline.tsv 2>/dev/null
echo "(every test's seconds: .pytest_cache/test-durations.tsv; when each ran, on which worker: test-timeline.tsv)"
# a long test missing from tests/expected-seconds.tsv is handed out last, as if short: in
# ci35/ci36 the new 191 s test_status_failures test started when the others were ending
awk 'NR == FNR { if ($0 !~ /^#/) known[$2] = 1; next }
     { t = $1; sub("s$", "", t); id = $3; sub("@.*$", "", id)
       if ($2 == "passed" && t + 0 >= 15 && !(id in known)) printf "  %s %s\n", $1, id }' \
    FS='\t' tests/expected-seconds.tsv FS=' +' <(sed 's/^ *//' "$durations") > "$work/unknown"
if [ -s "$work/unknown" ]; then
    echo "long tests not in tests/expected-seconds.tsv (handed out last; add them):"
    cat "$work/unknown"
fi
awk '{n[$2]++} END {printf "total: %d passed, %d failed, %d skipped\n",
    n["passed"], n["failed"], n["skipped"]}' "$durations"
[ "$rates_status" = 0 ] && [ "$others_status" = 0 ]
