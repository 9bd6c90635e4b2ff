#!/usr/bin/env bash
# The report's first screen as a picture: README's docs/report-first-screen.png is made from
# the demo's own report by this command (make screenshot), so it shows what `make demo` shows
# today and cannot go stale by hand.
#
#   scripts/report-screenshot.sh [REPORT] [OUT] [WIDTHxHEIGHT]
#
# REPORT defaults to results/demo/report.html, OUT to docs/report-first-screen.png and the
# window to 1400x900 (the size the browser test tests/test_report_browser.py holds the first
# screen to). Headless Chromium with --no-sandbox, as the browser tests run it, so no root is
# needed; the Snakemake report draws itself with JavaScript, which the virtual time budget
# lets finish before the picture is taken.
set -euo pipefail

report=${1:-results/demo/report.html}
out=${2:-docs/report-first-screen.png}
size=${3:-1400x900}

chromium=""
for name in chromium chromium-browser google-chrome; do
	if command -v "$name" >/dev/null 2>&1; then
		chromium=$(command -v "$name")
		break
	fi
done
if [[ -z $chromium ]]; then
	echo "report-screenshot: no Chromium found (make sysdeps installs Debian's chromium)" >&2
	exit 1
fi
if [[ ! -f $report ]]; then
	echo "report-screenshot: $report does not exist (make demo writes it)" >&2
	exit 1
fi

profile=$(mktemp -d)
trap 'rm -rf "$profile"' EXIT
"$chromium" --headless --no-sandbox --disable-gpu --no-first-run --hide-scrollbars \
	--disable-background-networking --disable-component-update --disable-sync \
	--user-data-dir="$profile" --window-size="${size/x/,}" --virtual-time-budget=10000 \
	--screenshot="$(realpath -m "$out")" "file://$(realpath "$report")" 2>"$profile/stderr" ||
	{
		cat "$profile/stderr" >&2
		exit 1
	}
[[ -s $out ]] || {
	echo "report-screenshot: Chromium wrote no picture" >&2
	exit 1
}
echo "report-screenshot: $out ($size) from $report"
