#!/usr/bin/env bash
# install-sysdeps.sh -- install the Debian packages cloudbench needs (idempotent).
#
#   xxhash            required  (xxh128sum: content hashes)
#   slurm-wlm munge   optional  (scheduler tests: tests/infra/slurm.py)
#   slurm-wlm-torque  optional  (PBS qsub/qstat/qdel wrappers for profiles/tesseract tests)
#   openssh-server    optional
#   faketime          optional  (libfaketime: a node's clock behind, tests/test_group_clock.py)
#   chromium          optional
#
# Only missing packages are installed (waiting up to 5 min for a concurrent
# apt/dpkg run to release its lock); `apt-get update` runs at most once and
# only if something is missing.  One line is printed per package.  Exit status
# is non-zero only if xxhash is still unavailable; other failures are warnings.
# Needs root (or passwordless sudo) only when something has to be installed.
# SYSDEPS_PACKAGES="a b" overrides the package list (for testing the script).
set -u

export DEBIAN_FRONTEND=noninteractive
REQUIRED="xxhash"
PACKAGES="${SYSDEPS_PACKAGES:-xxhash slurm-wlm munge slurm-wlm-torque openssh-server faketime chromium}"

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
        SUDO="sudo -n"
    fi
fi

# present PKG: the package is usable (dpkg says installed; xxhash: the binary)
present() {
    case "$1" in
        xxhash) command -v xxh128sum >/dev/null 2>&1 && return 0 ;;
    esac
    dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"
}

APT="apt-get -o DPkg::Lock::Timeout=300 -qq"
last_err=""
# run CMD...: run quietly, keep the last output line for the message
run() {
    local out
    if out=$("$@" 2>&1 </dev/null); then
        return 0
    fi
    last_err="${out##*$'\n'}"
    return 1
}

updated=0
update_ok=1
apt_update_once() {
    [ "$updated" -eq 1 ] && return "$((1 - update_ok))"
    updated=1
    run $SUDO $APT update || update_ok=0
    return "$((1 - update_ok))"
}

rc=0
for pkg in $PACKAGES; do
    if present "$pkg"; then
        echo "$pkg: already installed"
        continue
    fi
    required=0
    case " $REQUIRED " in *" $pkg "*) required=1 ;; esac
    if [ "$(id -u)" -ne 0 ] && [ -z "$SUDO" ]; then
        msg="not installed and not root (no passwordless sudo)"
    elif ! apt_update_once; then
        msg="apt-get update failed: $last_err"
    elif ! run $SUDO $APT install -y "$pkg"; then
        msg="apt-get install failed: $last_err"
    elif present "$pkg"; then
        echo "$pkg: installed"
        continue
    else
        msg="installed but still not usable"
    fi
    if [ "$required" -eq 1 ]; then
        echo "$pkg: ERROR: $msg (required)" >&2
        rc=1
    else
        echo "$pkg: WARNING: $msg (optional, skipped)"
    fi
done
exit "$rc"
