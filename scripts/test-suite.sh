#!/usr/bin/env bash
# `make test`: the whole suite, in two pytest sessions.
#
#   rates   the tests that check measured rates against a bandwidth cap (marked `rates`),
#           RATES_WORKERS at a time. They use little CPU, but a copy that waits for a core
#           is slower than its cap, so they must not wait.
#   others  every other test, TEST_WORKERS at a time (pytest-xdist, --dist loadgroup). They
#           keep both cores busy (Snakemake start-ups, reports, browsers).
#
# The rates session runs first, alone: run at the same time as the others, even at nice -5
# with the others at nice 10 (kernel autogroups off), capped copies still lost 10-20% of
# their rate and the whole took as long (ci13, ci14 on 2026-11-25: 18.5 and 19 minutes
# against 20 one after the other): the two cores are busy throughout, so the suite's length
# is its CPU time (docs/testing.md).
#
# Usage: scripts/test-suite.sh PYTEST RATES_WORKERS TEST_WORKERS [pytest args...]
set -uo pipefail
pytest=$1 rates_workers=$2 test_workers=$3
shift 3
work=$(mktemp -d)
durations=$work/durations
export CLOUDBENCH_DURATIONS_FILE=$durations CLOUDBENCH_DEMO_DIR=$work/demo
export CLOUDBENCH_TIMELINE_FILE=$work/timeline
cleanup() { rm -rf "$work"; }
trap cleanup EXIT
trap 'exit 130' INT TERM

# pytest's exit code 5 (no test selected, e.g. by ARGS) is no failure of a session
session_status() { [ "$1" -eq 5 ] && echo 0 || echo "$1"; }

rates=(-m rates -n "$rates_workers" "$@")
others=(-m "not rates" -n "$test_workers" --dist loadgroup "$@")

echo "== the tests that check measured rates, $rates_workers at a time"
$pytest "${rates[@]}"
rates_status=$(session_status $?)
echo "== every other test, $test_workers at a time"
$pytest "${others[@]}"
others_status=$(session_status $?)

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
