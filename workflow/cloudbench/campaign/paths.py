"""Where every record, log and bulk file of a campaign lives: one place for the patterns.

The rules call these with wildcards (``transfer_record(results, MeasurementId.wildcards())``
gives the output pattern) and the package calls them with values (the path of one record), so
the workflow and the aggregation can never disagree about a path. A measurement's paths are
named by its identity (:class:`~cloudbench.campaign.identity.MeasurementId`), its labels.
"""

from __future__ import annotations

from pathlib import Path

from cloudbench.campaign.identity import MeasurementId

SITES = "sites"
# The raw output of the client that moved a copy (rclone's JSON log, s5cmd's or the AWS
# CLI's text, your command's), kept as it ran: a neutral folder and suffix, since one
# pattern serves every tool (an s5cmd log once sat under rclone/ named .jsonl)
CLIENT_LOGS = "client-logs"
LOG_SUFFIX = ".log"


def sites_dir(results: str | Path) -> str:
    return f"{results}/{SITES}"


def copy_key(m: MeasurementId) -> str:
    """The part of a measurement's paths that names its copy: layout, setting, repeat."""
    return f"{m.layout}/{m.setting}/r{m.repeat}"


def transfer_record(results, m: MeasurementId) -> str:
    """The record of one timed transfer (one row of transfers.tsv)."""
    return f"{sites_dir(results)}/{m.site}/transfers/{m.direction}/{m.remote}/{copy_key(m)}.json"


def series(record: str) -> str:
    """The per-second series beside a transfer record."""
    return str(record).removesuffix(".json") + ".series.tsv"


def evidence(record: str | Path) -> str:
    """What limited a transfer as the kernel saw it (its client's TCP connections and CPU,
    sampled every second: cloudbench.measure.evidence), beside its record; ``record`` may
    also be the record's series (a client of a group is known to the copy by its series)."""
    return str(record).removesuffix(".json").removesuffix(".series.tsv") + ".evidence.jsonl"


def attempts_dir(record: str | Path) -> Path:
    """Every attempt's record (and rclone log) of one measurement, kept across reruns."""
    return Path(str(record).removesuffix(".json") + ".attempts")


def transfer_log(results, m: MeasurementId) -> str:
    """The raw log of one timed transfer's client (of its first client's index, with
    several: :func:`client_log`)."""
    folder = f"{sites_dir(results)}/{m.site}/{CLIENT_LOGS}/{m.direction}/{m.remote}"
    return f"{folder}/{copy_key(m)}{LOG_SUFFIX}"


def transfer_logs_glob() -> str:
    """Every transfer log under a results' ``sites/`` folder, its clients' logs too."""
    return f"*/{CLIENT_LOGS}/*/*/*/*/r*{LOG_SUFFIX}"


def clients_dir(record: str | Path) -> Path:
    """What the clients of one multi-client measurement share: their plan, the start
    barrier, and each client's record and series (``client-<k>.json``)."""
    return Path(str(record).removesuffix(".json") + ".clients")


def client_log(log: str | Path, index: int) -> Path:
    """Client ``index``'s own log, beside the measurement's log."""
    return Path(str(log).removesuffix(LOG_SUFFIX) + f".client-{index}{LOG_SUFFIX}")


def live_log(log: str | Path) -> Path:
    """A second name (hard link) of an rclone log while it is written. Snakemake deletes a
    job's declared logs before it runs the job again, so without it a killed attempt's log
    would be gone before the rerun could keep it."""
    return Path(str(log) + ".live")


def job_log(results, site, step, *parts) -> str:
    return "/".join([f"{sites_dir(results)}/{site}/logs/{step}", *map(str, parts)]) + ".log"


def copy_manifest(results, m: MeasurementId) -> str:
    """The manifest of the copy a download read (fetched from the remote)."""
    return f"{sites_dir(results)}/{m.site}/manifests/{m.remote}/{copy_key(m)}.json"


def verify_record(results, m: MeasurementId) -> str:
    """A download's check of what arrived against the manifest."""
    return f"{sites_dir(results)}/{m.site}/verify/{m.remote}/{copy_key(m)}.json"


def reassemble_record(results, m: MeasurementId) -> str:
    """A chunked download's files joined again from their chunks."""
    return f"{sites_dir(results)}/{m.site}/steps/reassemble/{m.remote}/{copy_key(m)}.json"


def data_step_record(results, site, step, file, chunk=None) -> str:
    """generate/checksum per file; chunk per chunk size and file."""
    middle = f"{step}/{chunk}" if chunk is not None else step
    return f"{sites_dir(results)}/{site}/steps/{middle}/{file}.json"


def dataset_step_record(results, site, step) -> str:
    """A data step done for the whole dataset in one job (many small files)."""
    return f"{sites_dir(results)}/{site}/steps/dataset/{step}.json"


def dataset_checksums(results, site) -> str:
    """Every file's XXH128 in one file (many small files): ``{"files": [...]}``."""
    return f"{sites_dir(results)}/{site}/checksums/dataset.files.json"


def staged(results, site, layout) -> str:
    """One layout's data is ready at the upload site: its files' hashes in one record (so an
    upload depends on one file, not on a record per dataset file)."""
    return f"{sites_dir(results)}/{site}/steps/staged/{layout}.json"


def staged_all(results, site) -> str:
    """Every layout's data is ready at the upload site: uploads start only then, so the
    first round is not run before the data of its last layout exists."""
    return f"{sites_dir(results)}/{site}/steps/staged/all.txt"


def checksum_json(results, site, file) -> str:
    return f"{sites_dir(results)}/{site}/checksums/{file}.chunks.json"


def checksum_sum(results, site, file) -> str:
    return f"{sites_dir(results)}/{site}/checksums/{file}.xxh128"


def preflight(results, site) -> str:
    """A site's own checks (rclone, scratch, the upload it downloads): every job waits."""
    return f"{sites_dir(results)}/{site}/preflight.json"


def preflight_gate(results, site, remote, tool) -> str:
    """The checks of one remote with one tool at a site: only that pair's transfers wait
    for it, so adding a tool or a remote to a measured campaign gates only the new ones."""
    return f"{sites_dir(results)}/{site}/preflight/{remote}/{tool}.json"


def probe_record(results, site, remote, when) -> str:
    """The latency probe of one remote from one site, ``before`` or ``after`` its transfers."""
    return f"{sites_dir(results)}/{site}/probe/{remote}/{when}.json"


def precision_round(results, site, round_) -> str:
    """The decisions of ``repeats: auto`` after one round at a site (a checkpoint's output)."""
    return f"{sites_dir(results)}/{site}/precision/round-{round_}.json"


def precision_final(results, site) -> str:
    """A site's last decisions of ``repeats: auto``: how each identity's rounds ended."""
    return f"{sites_dir(results)}/{site}/precision.json"


def tune_round(results, site, round_) -> str:
    """The state of a site's searches after one round of the tuning mode (a checkpoint's)."""
    return f"{sites_dir(results)}/{site}/tune/round-{round_}.json"


def tune_final(results, site) -> str:
    """A site's searches once over: each one's best setting, and how it got there."""
    return f"{sites_dir(results)}/{site}/tune.json"


def published(results, site) -> str:
    """This site's results are on the remote (written by the publish rule)."""
    return f"{sites_dir(results)}/{site}/published.json"


def pulled(results, site) -> str:
    """Another site's results were fetched from the remote (written by the pull rule)."""
    return f"{sites_dir(results)}/{site}/pulled.json"


def store_down(scratch: str | Path, site: str, remote: str) -> Path:
    """A site's count of ``remote``'s failures in a row (cloudbench.site.breaker), in its
    scratch (shared by every job of the site), cleared by the first answer."""
    return Path(scratch) / f".store-down.{site}.{remote}.json"


def dataset_dir(upload_data: str | Path) -> str:
    """Generated files at the upload site's scratch (bulk: never under results/)."""
    return f"{upload_data}/dataset"


def chunks_root(upload_data: str | Path) -> str:
    return f"{upload_data}/chunks"


# --- the campaign's own files, beside sites/ (tables, manifest, status, campaign-wide logs) ----


def table(results, name: str) -> str:
    """A table of the campaign (transfers, timeseries, steps, missing), written by aggregate."""
    return f"{results}/{name}.tsv"


# On the remote and in the results: the manifest that marks a copy (or the campaign) complete,
# and the folder of a copy's objects.
MANIFEST = "manifest.json"
OBJECTS = "objects"
# Beside the campaign's manifest: every file's XXH128 in `xxh128sum -c` form
CHECKSUMS = "checksums.xxh128"


def plan(results) -> str:
    """What the campaign's tables may hold (its measurements, files, chunks), for aggregate:
    a file, as a large sweep's list would not fit on a command line."""
    return f"{results}/plan.json"


def campaign_manifest(results) -> str:
    return f"{results}/{MANIFEST}"


def campaign_checksums(results) -> str:
    return f"{results}/{CHECKSUMS}"


def status_file(results) -> str:
    """The last word of a run: 'all measurements ok', written only when it is true, and
    removed by a run that stops early (its word was about a run that finished)."""
    return f"{results}/status.txt"


def campaign_log(results, step, *parts) -> str:
    """The log of a campaign-wide job (aggregate, plots, status, publish/<site>, ...)."""
    return "/".join([f"{results}/logs/{step}", *map(str, parts)]) + ".log"


def listing(record: str | Path) -> Path:
    """What a copy left at its destination (object, bytes, time written) beside its record:
    the store's listing after an upload, the directory's after a download. With the
    client's raw log it recomputes the record's bytes and seconds."""
    return Path(str(record).removesuffix(".json") + ".listing.tsv")


def run_spec(results, sites) -> str:
    """What one run tells every job that must never re-run a job (campaign.jobs.RunSpec),
    written when the run starts: one file per set of sites, so that runs of other sites of
    the campaign beside it keep their own."""
    return f"{results}/runs/{'+'.join(sorted(sites))}.json"
