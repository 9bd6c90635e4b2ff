#!/usr/bin/env bash
# capture.sh -- regenerate the real rclone JSON logs used by tests/test_rclonelog.py.
#
# Why this exists: the parser in workflow/cloudbench/measure/rclonelog.py is only as good
# as the logs it was tested on, and rclone's log format has changed before
# (1.70 swapped logrus for slog and changed the time format).  Instead of
# hand-written fixtures, every *.jsonl file next to this script is produced by a
# real rclone run, so bumping rclone means rerunning this script and the tests.
#
# Usage:
#     tests/data/rclone-logs/capture.sh            # uses $RCLONE or /tmp/probe-venv/bin/rclone
#     RCLONE=/path/to/rclone tests/data/rclone-logs/capture.sh
#
# Needs: bash, python3 (only to find a free TCP port), coreutils.  Network use is
# limited to 127.0.0.1: an `rclone serve s3` process plays the object store.
# Takes roughly two minutes.  Every server it starts is stopped on exit, even on
# failure (trap).  Nothing is written here until all captures have succeeded
# and passed the secret check, so a failed rerun leaves the old fixtures intact.
#
# Captures (all with --use-json-log --stats 1s; rclone's default
# --stats-log-level is INFO, so -v is enough for stats lines to appear):
#   local_copy.jsonl          local -> local, --transfers 2 --bwlimit 20M, -v
#   s3_upload.jsonl           local -> S3,   same flags, -v
#   s3_download.jsonl         S3 -> local,   same flags, -v
#   s3_upload_mt.jsonl        local -> S3, + --multi-thread-streams 4 --multi-thread-cutoff 1M
#                             (S3 multipart, 5 MiB parts), -v
#   s3_download_mt.jsonl      S3 -> local, + --multi-thread-streams 4 --multi-thread-cutoff 1M
#                             --multi-thread-chunk-size 8M (the default 64M chunk would
#                             make a 30 MiB file a single stream), -v
#   s3_killed.jsonl           upload; server SIGKILLed once bytes are flowing and never
#                             restarted: errors, "Attempt 1/3 .. 3/3 failed", -v
#   s3_killed_debug.jsonl     same at -vv: adds the debug-only "low level retry" and
#                             "Version ... starting" lines
#   s3_killed_recovered.jsonl upload; server killed mid-transfer, restarted after
#                             "Attempt 1/3 failed" (--retries-sleep 5s gives the window):
#                             ends with "Attempt 2/3 succeeded", -v
#   s3_wrong_secret_download.jsonl  S3 -> local with a wrong secret key, -v
#   s3_wrong_secret_upload.jsonl    local -> S3 with a wrong secret key, -vv (at -v
#                             the only line is a misleading critical; -vv shows why)
#   s3_dead_store.jsonl       local -> S3 with the store down before the copy starts, -vv:
#                             rclone's verdict is "is a file not a directory", only its
#                             retries say "connection refused"
#   s3_corrupted_download.jsonl  S3 -> local after one byte of a stored object was flipped
#                             (its time kept), -v: rclone's md5 check fails; the verdict names
#                             no object, its error lines name the .partial file
# The failure captures use --low-level-retries 3 so a dead server costs seconds,
# not the ~10 minutes the default 10 costs (the S3 SDK also backs off internally).
#
# captures.tsv records, per capture: file, rclone exit code, log level, number of
# source files, their total size in bytes, and a description.  The tests compare
# the parsed logs against it.
#
# Credentials: fake ones (testkey/testsecret).  The client gets them only through
# RCLONE_CONFIG_S3T_* environment variables, never its command line.  The server
# takes --auth-key on its command line (the env form RCLONE_AUTH_KEY is split at
# the comma by rclone and rejected).  Before installing anything the script
# fails if either secret string occurs in any captured log.
set -euo pipefail

RCLONE=${RCLONE:-/tmp/probe-venv/bin/rclone}
OUT=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
KEY=testkey
SECRET=testsecret
WRONG_SECRET=wrongsecret-not-the-real-one
# Distinct, odd sizes so "final bytes == total size" cannot match by accident.
SIZES=(31457280 29360251 33558987)   # 30 MiB, 28 MiB + 123, 32 MiB + 4555
COMMON=(--use-json-log --stats 1s --transfers 2 --bwlimit 20M)
FAIL=(--low-level-retries 3)

WORK=$(mktemp -d "${TMPDIR:-/tmp}/rclone-capture.XXXXXX")
SERVER_PID=""

stop_server() {
    if [[ -n "$SERVER_PID" ]]; then
        kill -KILL "$SERVER_PID" 2>/dev/null || true
        wait "$SERVER_PID" 2>/dev/null || true
        SERVER_PID=""
    fi
}
cleanup() {
    stop_server
    if [[ -f "$WORK/restarted.pid" ]]; then         # server restarted by a subshell
        kill -KILL "$(cat "$WORK/restarted.pid")" 2>/dev/null || true
    fi
    rm -rf "$WORK"
}
trap cleanup EXIT

free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# start_server PORT: serve $WORK/store over S3 on 127.0.0.1:PORT; wait until it listens.
start_server() {
    local port=$1 i
    "$RCLONE" serve s3 --addr "127.0.0.1:$port" --auth-key "$KEY,$SECRET" store \
        >>"$WORK/server.log" 2>&1 &
    SERVER_PID=$!
    for i in $(seq 100); do
        if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then return 0; fi
        kill -0 "$SERVER_PID" 2>/dev/null || break
        sleep 0.1
    done
    echo "capture.sh: rclone serve s3 did not start on port $port" >&2
    cat "$WORK/server.log" >&2
    exit 1
}

# wait_for FILE REGEX: block until FILE has a line matching REGEX (max 120 s).
wait_for() {
    local i
    for i in $(seq 1200); do
        if grep -qE "$2" "$1" 2>/dev/null; then return 0; fi
        sleep 0.1
    done
    echo "capture.sh: timed out waiting for /$2/ in $1" >&2
    exit 1
}

# run NAME LEVEL DESCRIPTION -- RCLONE-ARGS...: run rclone into $WORK/NAME.jsonl
# (rclone appends to --log-file, so start from nothing) and record the result.
RC=0
run() {
    local name=$1 level=$2 desc=$3
    shift 4
    rm -f "$WORK/$name.jsonl"
    set +e
    timeout 600 "$RCLONE" "$@" "${COMMON[@]}" "$level" --log-file "$WORK/$name.jsonl"
    RC=$?
    set -e
    printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$name.jsonl" "$RC" "$level" "${#SIZES[@]}" "$TOTAL" "$desc" \
        >>"$WORK/captures.tsv"
    echo "capture.sh: $name exit=$RC" >&2
}

cd "$WORK"
: >rclone.conf                 # empty config: hermetic, and no "config not found" notice
export RCLONE_CONFIG="$WORK/rclone.conf"
mkdir -p src store/bench
TOTAL=0
for i in "${!SIZES[@]}"; do
    head -c "${SIZES[$i]}" /dev/urandom >"src/f$((i + 1)).bin"
    TOTAL=$((TOTAL + SIZES[i]))
done
printf 'file\texit_code\tlevel\tn_files\ttotal_bytes\tdescription\n' >captures.tsv

PORT=$(free_port)
export RCLONE_CONFIG_S3T_TYPE=s3
export RCLONE_CONFIG_S3T_PROVIDER=Rclone
export RCLONE_CONFIG_S3T_ENDPOINT="http://127.0.0.1:$PORT"
export RCLONE_CONFIG_S3T_ACCESS_KEY_ID="$KEY"
export RCLONE_CONFIG_S3T_SECRET_ACCESS_KEY="$SECRET"

# (a) local -> local
run local_copy -v "local to local copy" -- copy src dst-local

# (b) S3 up/down, plain and multi-thread
start_server "$PORT"
run s3_upload -v "upload to rclone serve s3" -- copy src s3t:bench/up
run s3_download -v "download from rclone serve s3" -- copy s3t:bench/up dst-down
run s3_upload_mt -v "multi-thread (multipart) upload" -- \
    copy src s3t:bench/up-mt --multi-thread-streams 4 --multi-thread-cutoff 1M
run s3_download_mt -v "multi-thread download, 8M chunks" -- \
    copy s3t:bench/up dst-down-mt --multi-thread-streams 4 --multi-thread-cutoff 1M \
    --multi-thread-chunk-size 8M
for d in dst-local dst-down dst-down-mt; do
    for f in src/*.bin; do
        cmp -s "$f" "$d/${f#src/}" || { echo "capture.sh: $d/${f#src/} differs" >&2; exit 1; }
    done
done

# (c) failures.  Server killed once bytes are flowing, never restarted.
# kill_mid_transfer NAME LEVEL DESC DEST [EXTRA-ARGS...]
kill_mid_transfer() {
    local name=$1 level=$2 desc=$3 dest=$4
    shift 4
    rm -f "$WORK/$name.jsonl"
    ( wait_for "$WORK/$name.jsonl" '"bytes":[1-9]'; kill -KILL "$SERVER_PID" ) &
    local killer=$!
    run "$name" "$level" "$desc" -- copy src "s3t:bench/$dest" "${FAIL[@]}" "$@"
    wait "$killer"
    wait "$SERVER_PID" 2>/dev/null || true
    SERVER_PID=""
}
kill_mid_transfer s3_killed -v "upload, server killed mid-transfer" killed
start_server "$PORT"
kill_mid_transfer s3_killed_debug -vv "upload, server killed mid-transfer (debug)" killed-debug

# Server killed mid-transfer, restarted once rclone reports the first failed attempt.
start_server "$PORT"
rm -f "$WORK/s3_killed_recovered.jsonl"
(
    wait_for "$WORK/s3_killed_recovered.jsonl" '"bytes":[1-9]'
    kill -KILL "$SERVER_PID"
    wait_for "$WORK/s3_killed_recovered.jsonl" 'Attempt 1/3 failed'
    "$RCLONE" serve s3 --addr "127.0.0.1:$PORT" --auth-key "$KEY,$SECRET" store \
        >>"$WORK/server.log" 2>&1 &
    echo $! >"$WORK/restarted.pid"
    wait
) &
RESTARTER=$!
run s3_killed_recovered -v "upload, server killed then restarted before attempt 2" -- \
    copy src s3t:bench/recovered "${FAIL[@]}" --retries-sleep 5s
stop_server                                  # the original (already dead) server
SERVER_PID=$(cat "$WORK/restarted.pid")       # the restarted one
stop_server
rm -f "$WORK/restarted.pid"
wait "$RESTARTER" 2>/dev/null || true

# Wrong secret key (server up and healthy).
start_server "$PORT"
RCLONE_CONFIG_S3T_SECRET_ACCESS_KEY="$WRONG_SECRET" \
    run s3_wrong_secret_download -v "download with wrong secret key" -- \
    copy s3t:bench/up dst-wrong "${FAIL[@]}"
RCLONE_CONFIG_S3T_SECRET_ACCESS_KEY="$WRONG_SECRET" \
    run s3_wrong_secret_upload -vv "upload with wrong secret key (debug)" -- \
    copy src s3t:bench/wrong "${FAIL[@]}"

# One byte of a stored object flipped, its modification time kept (a store that corrupts
# data silently): the upload's md5 (rclone's metadata) no longer matches the bytes served.
python3 - store/bench/up/f2.bin <<'PY'
import os, sys
path = sys.argv[1]
st = os.stat(path)
with open(path, "r+b") as fh:
    fh.seek(12345)
    byte = fh.read(1)
    fh.seek(12345)
    fh.write(bytes([byte[0] ^ 0xFF]))
os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
PY
run s3_corrupted_download -v "download of an object changed in the store after upload (md5 differs)" -- \
    copy s3t:bench/up dst-corrupt "${FAIL[@]}"
stop_server

# The store down before the copy starts (stopped just above, nothing listens on $PORT).
run s3_dead_store -vv "upload to a store that is down before the copy starts (debug)" -- \
    copy src s3t:bench/dead "${FAIL[@]}"

# Refuse to install anything that leaked a secret.
if grep -lF -e "$SECRET" -e "$WRONG_SECRET" ./*.jsonl; then
    echo "capture.sh: a secret appears in the logs above; not installing" >&2
    exit 1
fi

rm -f "$OUT"/*.jsonl
cp ./*.jsonl captures.tsv "$OUT/"
"$RCLONE" version | head -1 >"$OUT/rclone-version.txt"
ls -l "$OUT" >&2
