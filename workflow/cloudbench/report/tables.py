"""The report's HTML tables, hand-built from the aggregated tables (no plotting library).

Every number comes from :mod:`cloudbench.report.stats`; these functions only format and escape.
"""

from __future__ import annotations

import html
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from cloudbench.campaign.identity import GROUP, LABELS, NAMED, keys_without
from cloudbench.intervals import INTERVALS_NOTE
from cloudbench.report import headline, stats
from cloudbench.report.html_page import html_table, page
from cloudbench.report.labels import NA, factor, with_interval
from cloudbench.sizes import size_label


def _ran_on(transfers: pd.DataFrame) -> str:
    """Where a site's transfers ran, in a few words: 'submit host', '9 batch jobs', or both."""
    where = transfers.get("ran_on", pd.Series(dtype=str)).dropna().astype(str)
    jobs = where[where.str.startswith("batch job")]
    parts = [f"{len(jobs)} batch job(s)"] if len(jobs) else []
    if (where == "submit host").any():
        parts.append(f"submit host ({(where == 'submit host').sum()})")
    return ", ".join(parts) or NA


def transfers_html(transfers: pd.DataFrame, missing: pd.DataFrame, path: Path) -> None:
    """Every transfer, one row each; rows that are not ``ok`` are highlighted."""
    cols = [
        *keys_without(*NAMED, "setting"),  # the page names a transfer by its layout
        "status",
        "mb_per_s",
        "seconds",
        "connections",
        "bytes_requested",
        "bytes_moved",
        "started_utc",
        "retries",
        "error",
        "host",
        "ran_on",
        "rclone_version",
    ]
    t = transfers.reindex(columns=cols)
    body = html_table(t, {"seconds": 4, "mb_per_s": 4}, flag=t["status"] != "ok", wrap={"error"})
    if not missing.empty:
        body += "<h2>Not reported yet</h2>" + html_table(missing)
    path.write_text(page("Every transfer", body))


def summary_html(summary: pd.DataFrame, metrics: pd.DataFrame, path: Path) -> None:
    """Rate statistics, failures and outliers per site x direction x layout, then the lists
    of outliers and of failed or corrupt transfers."""
    sm = summary
    t = pd.DataFrame({
        **{k: sm[k] for k in GROUP}, "n ok": sm["n"], "mean": sm["mean"],
        "P10": sm["p10"],
        "P50": sm["p50"], "P90": sm["p90"],
        "sustained median [interval] coverage": [
            with_interval(v, lo, hi, lvl, n=n) for v, lo, hi, lvl, n in
            zip(sm["sustained_median"], sm["sustained_ci_low"], sm["sustained_ci_high"],
                sm["sustained_ci_level"], sm["n"], strict=True)],
        "speed-up vs plain [interval] coverage": [
            with_interval(v, lo, hi, lvl, "×", n=n, fmt=factor) if layout != "plain" else NA
            for v, lo, hi, lvl, n, layout in
            zip(sm["speedup_vs_plain"], sm["speedup_ci_low"], sm["speedup_ci_high"],
                sm["speedup_ci_level"], sm["n"], sm["layout"], strict=True)],
        "connections": sm["connections"],
        "failed": sm["failed"], "corrupt": sm["corrupt"], "unverified": sm["unverified"],
        "retries": sm["retries"],
        "outliers": sm["outliers"],
    })  # fmt: skip
    if t["remote"].nunique() <= 1:
        t = t.drop(columns=["remote"])
    # the setting (tool-clients x concurrency) tells rows of a sweep apart; one setting: noise
    if t["setting"].nunique() <= 1:
        t = t.drop(columns=["setting"])
    flag = (summary["failed"] + summary["corrupt"] + summary["outliers"]) > 0
    body = (
        f'<p class="note">Rates in MB/s (10⁶ B/s) over the <code>ok</code> '
        f"repeats; P10/P50/P90 by linear interpolation. {INTERVALS_NOTE} "
        f"<b>What is equalised</b>: every strategy may open as many connections as "
        f"the transfer job has threads; <i>connections</i> (objects in flight × streams per "
        f"object) is what it actually used. Sustained: the rate after "
        f"the first {stats.RAMP_FRACTION:.0%} of the transfer (see the figure's caption). "
        f"Highlighted rows have a failed, corrupt or outlying repeat. All numbers, unrounded, "
        f"are in <code>summary.tsv</code>.</p>"
    )
    body += html_table(t, flag=flag)
    out = metrics[metrics["outlier"].astype(bool)]
    body += (
        f'<h2>Outliers</h2><p class="note">A repeat whose rate is below '
        f"{stats.OUTLIER_FRACTION} × the median of its group (same site, remote, direction, "
        f"layout and setting, the repeat included, at least {stats.OUTLIER_MIN_REPEATS} ok "
        f"repeats): a collapse, not noise.</p>"
    )
    if out.empty:
        body += "<p>No outliers.</p>"
    else:
        o = out[
            [
                *(k for k in LABELS if k in out),
                "started_utc",
                "mb_per_s",
                "group_median",
            ]
        ].copy()
        o["× median"] = o["mb_per_s"] / o["group_median"]
        body += html_table(o.rename(columns={"mb_per_s": "rate", "group_median": "group median"}))
    bad = metrics[metrics["status"] != "ok"]
    body += "<h2>Failed, corrupt and unverified transfers</h2>"
    if bad.empty:
        body += "<p>None: every transfer moved and verified every byte.</p>"
    else:
        body += html_table(
            bad[
                [
                    *(k for k in LABELS if k in bad),
                    *["status", "retries", "error"],
                ]
            ],
            wrap={"error"},
        )
    path.write_text(page("Rate per site, direction and strategy", body))


def _prices(info: Mapping[str, Any]) -> dict[str, stats.Prices | None]:
    return {
        name: stats.Prices.from_config((r or {}).get("prices"))
        for name, r in (info.get("remotes") or {}).items()
    }


def _money(v: float, currency: str) -> str:
    return NA if math.isnan(v) else f"{v:,.2f} {currency}".strip()


def cost_html(
    transfers: pd.DataFrame, summary: pd.DataFrame, info: Mapping[str, Any], path: Path
) -> None:
    """What the campaign cost and what 1 TB would cost and take, at the configured prices."""
    prices = _prices(info)
    camp = stats.campaign_cost(transfers, prices)
    tb = stats.per_tb(summary, prices)
    no = "no prices configured"

    def money(values, currencies, notes) -> list[str]:
        return [
            _money(v, c) if not n else no for v, c, n in zip(values, currencies, notes, strict=True)
        ]

    price_rows = pd.DataFrame([{
        "remote": n,
        "egress per GB": f"{p.egress_per_gb:g} {p.currency}" if p else no,
        "storage per GB-month": f"{p.storage_per_gb_month:g} {p.currency}" if p else no,
        "storing 1 TB for one month": (_money(1000 * p.storage_per_gb_month, p.currency)
                                       if p else no),
    } for n, p in prices.items()])  # fmt: skip
    c = pd.DataFrame({
        "remote": camp["remote"],
        "downloaded (GB)": camp["downloaded_gb"], "download attempts": camp["download_attempts"],
        "stored (GB)": camp["stored_gb"],
        "egress": money(camp["egress_cost"], camp["currency"], camp["note"]),
        "storage, one month": money(camp["storage_cost_month"], camp["currency"], camp["note"]),
        "total": money(camp["total_cost"], camp["currency"], camp["note"]),
    })  # fmt: skip
    egress = money(tb["egress_cost_per_tb"], tb["currency"], tb["note"])
    t = pd.DataFrame({
        "site": tb["site"], "remote": tb["remote"], "direction": tb["direction"],
        "layout": tb["layout"], "median rate (MB/s)": tb["median_mb_per_s"],
        "hours per TB": tb["hours_per_tb"],
        "egress per TB": [e if d == "download" else "none (upload)"
                          for e, d in zip(egress, tb["direction"], strict=True)],
    })  # fmt: skip
    if t["remote"].nunique() <= 1:
        t = t.drop(columns=["remote"])
    body = (
        '<p class="note">Assumptions: GB = 10<sup>9</sup> bytes and TB = 10<sup>12</sup> '
        "bytes (a provider that bills per GiB charges about 7% more per unit); egress is "
        "charged on every byte downloaded, whatever the transfer's status, also by the "
        "attempts a rerun replaced or a kill cut short (transfers.tsv: <code>attempts</code>, "
        "<code>bytes_moved_all_attempts</code>); uploads (ingress) "
        "are free; every uploaded copy (each layout and repeat) stays on the remote for one "
        "whole month; requests (API calls), minimum storage durations, retrieval fees, taxes "
        "and discounts are <b>not</b> included. Prices are the config's <code>prices</code> "
        "(top level for the single <code>remote</code>, or <code>remotes.&lt;name&gt;.prices"
        "</code>); none are invented.</p>"
    )
    body += "<h2>Prices used</h2>" + (
        html_table(price_rows) if not price_rows.empty else "<p>no remotes</p>"
    )
    body += "<h2>What this campaign cost</h2>" + html_table(c)
    body += (
        '<h2>Moving one TB</h2><p class="note">Hours = 10<sup>12</sup> bytes / the '
        "median (P50) whole-transfer rate of the <code>ok</code> repeats of that site, "
        "direction and layout, assuming it holds for the whole TB; egress applies to "
        "downloads only (storage: see the prices table).</p>" + html_table(t)
    )
    path.write_text(page("Cost", body))


def _when(ts: Any) -> str:
    return NA if ts is None or pd.isna(ts) else ts.strftime("%Y-%m-%d %H:%M:%S")


def _dataset(ds: Mapping[str, Any]) -> str:
    files, size = int(ds.get("files", 0)), int(ds.get("file_bytes", 0))
    if not files or not size:
        return NA
    return (
        f"{ds.get('name', '')}: {files} files × {size_label(size)} ({size / 1e9:.3g} GB) = "
        f"{files * size:,} bytes"
    )


def campaign_html(
    info: Mapping[str, Any], manifest: Mapping[str, Any] | None, transfers: pd.DataFrame, path: Path
) -> None:
    """Campaign metadata: sites, hosts, cores, rclone versions and flags, dataset, dates."""
    ds = info.get("dataset") or {}
    rc = info.get("rclone") or {}
    t = transfers
    started = pd.to_datetime(t["started_utc"], utc=True, errors="coerce") if not t.empty else None
    rows = [
        ("campaign", info.get("campaign", "")),
        ("bucket", info.get("bucket", "")),
        ("dataset", _dataset(ds)),
        ("chunk sizes", ", ".join(size_label(int(c)) for c in ds.get("chunk_sizes", [])) or NA),
        ("strategies", ", ".join(info.get("strategies", []))),
        ("repeats", str(info.get("repeats", ""))),
        ("rclone flags", " ".join(rc.get("flags", [])) or "(none)"),
        ("rclone flags from the environment", headline.environment_flags(t) or "(none)"),
        (
            "multi-thread cutoff / part size",
            f"{size_label(int(rc['multi_thread_cutoff']))} / "
            f"{size_label(int(rc['multi_thread_chunk_size']))}"
            if rc.get("multi_thread_cutoff")
            else NA,
        ),
        (
            "rclone versions",
            ", ".join(sorted(map(str, t["rclone_version"].dropna().unique())))
            if not t.empty
            else NA,
        ),
        (
            "transfers recorded",
            f"{len(t)} ({int((t['status'] == 'ok').sum()) if not t.empty else 0} ok)",
        ),
        ("first transfer started (UTC)", _when(started.min() if started is not None else None)),
        ("last transfer started (UTC)", _when(started.max() if started is not None else None)),
    ]
    if manifest:
        rows.append(
            (
                "campaign manifest written (UTC)",
                _when(pd.to_datetime(manifest.get("written_utc"), utc=True, errors="coerce")),
            )
        )
        rows.append(
            (
                "manifest written on",
                f"{manifest.get('host', NA)} ({manifest.get('node_cores', NA)} cores)",
            )
        )
    body = html_table(pd.DataFrame(rows, columns=["", "value"]))
    site_rows = []
    for name, s in (info.get("sites") or {}).items():
        st = t[t["site"] == name] if not t.empty else t
        loc = s.get("location")
        role = "+".join(r for r in ("upload", "download") if s.get(r)) or "none"
        site_rows.append({
            "site": name, "role": role,
            "location": f"{loc[0]:.2f}, {loc[1]:.2f}" if loc else NA,
            "hosts": ", ".join(sorted(map(str, st["host"].dropna().unique()))) or NA,
            "transfers ran on": _ran_on(st),
            "node cores": ", ".join(sorted({str(int(c)) for c in st["node_cores"].dropna()}))
            or NA,
            "rclone": ", ".join(sorted(map(str, st["rclone_version"].dropna().unique()))) or NA,
            "transfers": len(st),
            "first (UTC)": _when(pd.to_datetime(st["started_utc"], utc=True, errors="coerce").min()
                                 if len(st) else None),
            "last (UTC)": _when(pd.to_datetime(st["started_utc"], utc=True, errors="coerce").max()
                                if len(st) else None),
        })  # fmt: skip
    body += "<h2>Sites</h2>" + html_table(pd.DataFrame(site_rows))
    dist = stats.site_remote_distances(info.get("sites") or {}, info.get("remotes") or {})
    rem_rows = []
    for name, r in (info.get("remotes") or {}).items():
        loc = (r or {}).get("location")
        d = dist[dist["remote"] == name]
        rem_rows.append({
            "remote": name, "location": f"{loc[0]:.2f}, {loc[1]:.2f}" if loc else NA,
            "distance from sites (km)": ", ".join(
                f"{x.site} {x.distance_km:,.0f}" for x in d.itertuples()) or NA,
        })  # fmt: skip
    body += "<h2>Remotes</h2>" + html_table(pd.DataFrame(rem_rows))
    if manifest and manifest.get("files"):
        files = pd.DataFrame(
            [
                {"file": f.get("name"), "bytes": f.get("bytes"), "XXH128": f.get("xxh128")}
                for f in manifest["files"]
            ]
        )
        body += "<h2>Dataset files (campaign manifest)</h2>" + html_table(files)
    path.write_text(page("Campaign", body))


def as_if_auto(transfers: pd.DataFrame, width: float) -> pd.DataFrame:
    """Each measurement identity of a campaign with fixed repeats, decided as ``repeats:
    auto`` would have after its last repeat (its repeats being the maximum)."""
    from cloudbench.campaign.precision import COLUMNS, Precision, decide_round

    if transfers.empty:
        return pd.DataFrame(columns=list(COLUMNS))
    most = int(pd.to_numeric(transfers["repeat"]).max())
    rows = transfers.astype(object).where(transfers.notna(), None).to_dict("records")
    return pd.DataFrame(decide_round(rows, [], Precision(width, most)), columns=list(COLUMNS))


def precision_html(
    decided: pd.DataFrame, info: Mapping[str, Any], path: Path, transfers: pd.DataFrame
) -> None:
    """The Repeats page: with ``repeats: auto``, how each measurement's rounds ended and the
    interval they ended on; with fixed repeats, how each came out against auto's default."""
    from cloudbench.campaign.precision import (
        MET,
        default_width,
        first_rounds,
        stops_text,
        width_text,
    )

    target = info.get("precision")
    if not target:
        width = width_text(default_width())
        body = (
            f"<p>Repeats were fixed at {html.escape(str(info.get('repeats', '')))} for every "
            "measurement. With <code>repeats: auto</code> (and <code>precision:</code> width "
            "and max_repeats) each measurement is repeated until its median's 95% interval "
            "is that narrow, or the maximum is reached. Against auto's default target, "
            f"within {width} of the median, the fixed repeats gave (decision: met target, or "
            "reached max: more repeats, or a steadier store, would narrow it; below "
            f"{first_rounds()} repeats no interval reaches 95%, so none can meet it):</p>"
        )
        fixed = as_if_auto(transfers, default_width())
        flag = fixed["decision"] != MET if not fixed.empty else None
        path.write_text(page("Repeats", body + html_table(fixed, flag=flag)))
        return
    records = decided.to_dict("records")
    body = f"<p>{html.escape(stops_text(records, target))}.</p>" + (
        "<p>Each measurement ran the first "
        f"{int(target['first'])} rounds, then one more round at a time while its median's "
        "interval (low to high, at the coverage in <code>level</code>) was wider than "
        f"{width_text(float(target['width']))} of the median. Marked: not met (reached max, or a "
        "failed repeat; a rerun measures the failed one again and carries on).</p>"
    )
    flag = decided["decision"] != MET if not decided.empty else None
    path.write_text(page("Repeats", body + html_table(decided, flag=flag)))
