#!/usr/bin/env bash
# `make test`: the whole suite, in two pytest sessions.
#
#   rates   the tests that check measured rates against a bandwidth cap (marked `rates`),
#           RATES_WORKERS at a time. They use little CPU (a quarter of a core each), but a
#           copy that waits for a core is slower than its cap, so they must not wait.
#   others  every other test, TEST_WORKERS at a time (pytest-xdist, --dist loadgroup). They
#           keep both cores busy (Snakemake start-ups, reports, browsers).
#
# The rates session runs first, alone, then the others. Side by side, each in a cgroup of
# the cpu controller, they saved a quarter of the suite's time on a machine at its usual
# speed (2026-11-26: 12.7-14.0 minutes against 16.8), but on the same machine at half that
# speed (2026-11-28) no weighting held both: at 262144 against 2 the others starved while a
# rates test built a report (a demo copy paced at 16.8 MB/s read 6.4; a group's clients ran
# 0.55 s past rclone's own lines; an AWS CLI exited 2.4 s after its last byte), and at 8192
# against 1024 a rates test's tuned setting read 0.86 of its link (3.43 of 4 MB/s). CI runs
# on whatever speed the machine has that day: a suite that passes at either speed is worth
# more than the minutes.
#
# Usage: scripts/test-suite.sh PYTEST RATES_WORKERS TEST_WORKERS [pytest args...]
set -uo pipefail
pytest=$1 rates_workers=$2 test_workers=$3
shift 3
work=$(mktemp -d)
durations=$work/durations
export CLOUDBENCH_DURATIONS_FILE=$durations CLOUDBENCH_DEMO_DIR=$work/demo
export CLOUDBENCH_TIMELINE_FILE=$work/timeline
cleanup() {
    rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# pytest's exit code 5 (no test selected, e.g. by ARGS) is no failure of a session
session_status() { [ "$1" -eq 5 ] && echo 0 || echo "$1"; }

rates=(-m rates -n "$rates_workers" "$@")
others=(-m "not rates" -n "$test_workers" --dist loadgroup "$@")

echo "== the tests that check measured rates, first and alone, $rates_workers at a time"
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
