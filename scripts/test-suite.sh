#!/usr/bin/env bash
# `make test`: the whole suite, in two pytest sessions.
#
#   rates   the tests that check measured rates against a bandwidth cap (marked `rates`, and
#           the demo campaign, whose medians are checked against its cap), RATES_WORKERS at
#           a time. They use little CPU, but a copy that waits for a core is slower than its
#           cap, so they must not wait.
#   others  every other test, TEST_WORKERS at a time (pytest-xdist, --dist loadgroup). They
#           keep both cores busy (Snakemake start-ups, reports, browsers).
#
# Where the CPU scheduler can be told (root, and the kernel's per-session autogroups can be
# switched off for the run), both sessions run at once: the rates session at nice -5, the
# others at nice 10, so every process of a rates test (its Snakemake, rclone, S3 server and
# Slurm daemons, which inherit the niceness) gets a core as soon as it wants one, and the
# others take what is left. Autogroups would otherwise share the CPU per session whatever
# the niceness; the setting is put back on exit. Elsewhere the rates session runs first,
# alone, then the others.
#
# Usage: scripts/test-suite.sh PYTEST RATES_WORKERS TEST_WORKERS [pytest args...]
set -uo pipefail
pytest=$1 rates_workers=$2 test_workers=$3
shift 3
work=$(mktemp -d)
durations=$work/durations
export CLOUDBENCH_DURATIONS_FILE=$durations CLOUDBENCH_DEMO_DIR=$work/demo
autogroup=/proc/sys/kernel/sched_autogroup_enabled
was=""

cleanup() {
    [ -n "$was" ] && echo "$was" > "$autogroup"
    rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# pytest's exit code 5 (no test selected, e.g. by ARGS) is no failure of a session
session_status() { [ "$1" -eq 5 ] && echo 0 || echo "$1"; }

rates=(-m rates -n "$rates_workers" "$@")
others=(-m "not rates" -n "$test_workers" --dist loadgroup "$@")

if [ "$(id -u)" = 0 ] && [ -w "$autogroup" ] && was=$(cat "$autogroup") \
    && echo 0 > "$autogroup" 2>/dev/null; then
    echo "== both sessions at once: the rates tests ($rates_workers at a time) at nice -5," \
        "every other test ($test_workers at a time) at nice 10 (autogroups off for the run)"
    # the others read the demo campaign the rates session makes (tests/conftest.py)
    nice -n -5 $pytest "${rates[@]}" > "$work/rates.log" 2>&1 &
    rates_pid=$!
    CLOUDBENCH_DEMO_MADE_ELSEWHERE=1 nice -n 10 $pytest "${others[@]}"
    others_status=$(session_status $?)
    wait "$rates_pid"
    rates_status=$(session_status $?)
    echo "== the rates session (its output, held back until it ended)"
    cat "$work/rates.log"
else
    [ -n "$was" ] && [ "$(cat "$autogroup")" = "$was" ] && was=""  # nothing was changed
    echo "== the tests that check measured rates (and the demo campaign), $rates_workers at a time"
    $pytest "${rates[@]}"
    rates_status=$(session_status $?)
    echo "== every other test, $test_workers at a time"
    $pytest "${others[@]}"
    others_status=$(session_status $?)
fi

echo "== the ten slowest tests of the whole suite (seconds: setup + call + teardown)"
sort -rn "$durations" | head -10
mkdir -p .pytest_cache && sort -rn "$durations" > .pytest_cache/test-durations.tsv
echo "(every test's seconds: .pytest_cache/test-durations.tsv)"
awk '{n[$2]++} END {printf "total: %d passed, %d failed, %d skipped\n",
    n["passed"], n["failed"], n["skipped"]}' "$durations"
[ "$rates_status" = 0 ] && [ "$others_status" = 0 ]
