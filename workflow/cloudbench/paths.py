"""Where every record, log and bulk file of a campaign lives: one place for the patterns.

The rules call these with wildcards (``transfer_record(results, "{site}", ...)`` gives the
output pattern) and the package calls them with values (the path of one record), so the
workflow and the aggregation can never disagree about a path.
"""

from __future__ import annotations

from pathlib import Path

SITES = "sites"


def sites_dir(results: str | Path) -> str:
    return f"{results}/{SITES}"


def transfer_record(results, site, direction, remote, layout, repeat) -> str:
    """The record of one timed transfer (one row of transfers.tsv)."""
    return f"{sites_dir(results)}/{site}/transfers/{direction}/{remote}/{layout}/r{repeat}.json"


def series(record: str) -> str:
    """The per-second series beside a transfer record."""
    return str(record).removesuffix(".json") + ".series.tsv"


def attempts_dir(record: str | Path) -> Path:
    """Every attempt's record (and rclone log) of one measurement, kept across reruns."""
    return Path(str(record).removesuffix(".json") + ".attempts")


def rclone_log(results, site, direction, remote, layout, repeat) -> str:
    return f"{sites_dir(results)}/{site}/rclone/{direction}/{remote}/{layout}/r{repeat}.jsonl"


def job_log(results, site, step, *parts) -> str:
    return "/".join([f"{sites_dir(results)}/{site}/logs/{step}", *map(str, parts)]) + ".log"


def copy_manifest(results, site, remote, layout, repeat) -> str:
    """The manifest of the copy a download read (fetched from the remote)."""
    return f"{sites_dir(results)}/{site}/manifests/{remote}/{layout}/r{repeat}.json"


def verify_record(results, site, remote, layout, repeat) -> str:
    return f"{sites_dir(results)}/{site}/verify/{remote}/{layout}/r{repeat}.json"


def reassemble_record(results, site, remote, layout, repeat) -> str:
    return f"{sites_dir(results)}/{site}/steps/reassemble/{remote}/{layout}/r{repeat}.json"


def data_step_record(results, site, step, file, chunk=None) -> str:
    """generate/checksum per file; chunk per chunk size and file."""
    middle = f"{step}/{chunk}" if chunk is not None else step
    return f"{sites_dir(results)}/{site}/steps/{middle}/{file}.json"


def checksum_json(results, site, file) -> str:
    return f"{sites_dir(results)}/{site}/checksums/{file}.chunks.json"


def checksum_sum(results, site, file) -> str:
    return f"{sites_dir(results)}/{site}/checksums/{file}.xxh128"


def preflight(results, site) -> str:
    return f"{sites_dir(results)}/{site}/preflight.json"


def published(results, site) -> str:
    """This site's results are on the remote (written by the publish rule)."""
    return f"{sites_dir(results)}/{site}/published.json"


def pulled(results, site) -> str:
    """Another site's results were fetched from the remote (written by the pull rule)."""
    return f"{sites_dir(results)}/{site}/pulled.json"


def dataset_dir(upload_data: str | Path) -> str:
    """Generated files at the upload site's scratch (bulk: never under results/)."""
    return f"{upload_data}/dataset"


def chunks_root(upload_data: str | Path) -> str:
    return f"{upload_data}/chunks"


# --- the campaign's own files, beside sites/ (tables, manifest, status, campaign-wide logs) ----


def table(results, name: str) -> str:
    """A table of the campaign (transfers, timeseries, steps, missing), written by aggregate."""
    return f"{results}/{name}.tsv"


def campaign_manifest(results) -> str:
    return f"{results}/manifest.json"


def status_file(results) -> str:
    """The last word of a run: 'all measurements ok', written only when it is true."""
    return f"{results}/status.txt"


def campaign_log(results, step, *parts) -> str:
    """The log of a campaign-wide job (aggregate, plots, status, publish/<site>, ...)."""
    return "/".join([f"{results}/logs/{step}", *map(str, parts)]) + ".log"
