# Input functions and the campaign model: every loop and every if of the workflow lives here
# or in the cloudbench package, never inside a rule.
import json
import sys
from datetime import datetime, timezone
from pathlib import Path

from snakemake.settings.types import DeploymentMethod

sys.path.insert(0, workflow.basedir)

from cloudbench import jobenv
from cloudbench.campaign import ConfigError, Layout, Measurement, load_campaign
from cloudbench.sizes import parse_size
from cloudbench.spec import transfer_spec

try:
    CAMPAIGN = load_campaign(config)
except ConfigError as err:
    raise WorkflowError(f"config error: {err}") from None
# Checked where jobs are submitted; batch jobs themselves do not see the variables.
MISSING_ENV = jobenv.missing_variables(config.get("required_env"))
if MISSING_ENV and workflow.is_main_process:
    raise WorkflowError(
        f"this profile needs {', '.join(MISSING_ENV)} set in the environment "
        f"(e.g. export {MISSING_ENV[0]}=...): scheduler account/partition/queue never live in files"
    )

RESULTS = f"results/{CAMPAIGN.name}"
SITES = f"{RESULTS}/sites"
UPLOAD_SITE = CAMPAIGN.upload_site.name
UPLOAD_DATA = str(CAMPAIGN.upload_site.scratch / CAMPAIGN.name)

jobenv.prepare(
    workflow.basedir,
    use_conda=DeploymentMethod.CONDA in workflow.deployment_settings.deployment_method,
)
NAME = r"[A-Za-z0-9][A-Za-z0-9_.-]*"
RUN_STARTED = datetime.now(timezone.utc).isoformat()


wildcard_constraints:
    site=NAME,
    remote=NAME,
    layout=r"plain|multithread|chunked-[0-9]+(KiB|MiB|GiB|TiB|B)",
    repeat=r"[0-9]+",
    file=r"[^/]+",
    chunk=r"[0-9]+(KiB|MiB|GiB|TiB|B)",


# Cheap bookkeeping runs on the submit host, not as batch jobs.
localrules:
    preflight,
    publish,
    pull,
    manifest,
    aggregate,
    plots,
    status,
    cleanup,


def record(m):
    return f"{SITES}/{m.site}/transfers/{m.direction}/{m.remote}/{m.layout.label}/r{m.repeat}.json"


def verify_record(m):
    return f"{SITES}/{m.site}/verify/{m.remote}/{m.layout.label}/r{m.repeat}.json"


def measurement_of(wildcards, direction):
    return Measurement(
        wildcards.site,
        wildcards.remote,
        direction,
        Layout.from_label(wildcards.layout),
        int(wildcards.repeat),
    )


def retry_token(direction):
    """A param that changes after a failed measurement, so the next run measures it again.

    Snakemake re-runs a job whose params differ from those stored when it last ran: this
    is empty while a record is missing or ok, and names the failed attempt otherwise.
    """

    def fn(wildcards):
        return jobenv.retry_token(record(measurement_of(wildcards, direction)))

    return fn


def spec_json(direction):
    def fn(wildcards):
        return transfer_spec(CAMPAIGN, measurement_of(wildcards, direction)).to_json()

    return fn


def dataset_files():
    return [f"{UPLOAD_DATA}/dataset/{name}" for name in CAMPAIGN.file_names]


def checksum_jsons():
    return [
        f"{SITES}/{UPLOAD_SITE}/checksums/{n}.chunks.json" for n in CAMPAIGN.file_names
    ]


def upload_inputs(wildcards):
    """Whole files for plain/multithread; every file's chunk directory for chunked."""
    layout = Layout.from_label(wildcards.layout)
    if layout.strategy == "chunked":
        data = [
            f"{UPLOAD_DATA}/chunks/{layout.chunk_label}/{n}"
            for n in CAMPAIGN.file_names
        ]
    else:
        data = dataset_files()
    return {"data": data, "checksums": checksum_jsons()}


def download_inputs(wildcards):
    """Preflight first; with site: all, also the upload of the copy it reads (listed first)."""
    inputs = []
    if any(s.name == UPLOAD_SITE for s in CAMPAIGN.active_sites):
        up = measurement_of(wildcards, "upload")
        inputs.append(
            record(Measurement(UPLOAD_SITE, up.remote, "upload", up.layout, up.repeat))
        )
    return inputs + [f"{SITES}/{wildcards.site}/preflight.json"]


def verify_inputs(wildcards):
    m = measurement_of(wildcards, "download")
    base = f"{SITES}/{m.site}"
    tail = f"{m.remote}/{m.layout.label}/r{m.repeat}"
    inputs = {
        "download": record(m),
        "manifest": f"{base}/manifests/{tail}.json",
    }
    if m.layout.strategy == "chunked":
        inputs["reassembled"] = f"{base}/steps/reassemble/{tail}.json"
    return inputs


def upload_records():
    return [
        record(m)
        for m in CAMPAIGN.measurements(CAMPAIGN.upload_site)
        if m.direction == "upload"
    ]


def manifest_info():
    return json.dumps(
        {
            "campaign": CAMPAIGN.name,
            "bucket": CAMPAIGN.bucket,
            "upload_site": UPLOAD_SITE,
            "dataset": {
                "name": CAMPAIGN.dataset_name,
                "files": CAMPAIGN.files,
                "file_bytes": CAMPAIGN.file_bytes,
                "chunk_sizes": list(CAMPAIGN.chunk_sizes),
            },
            "strategies": list(CAMPAIGN.strategies),
            "repeats": CAMPAIGN.repeats,
            "remotes": [
                {"name": r.name, "prefix": CAMPAIGN.remote_prefix(r)}
                for r in CAMPAIGN.remotes
            ],
            "flags": list(CAMPAIGN.rclone_flags),
        },
        sort_keys=True,
    )


def expected_measurements():
    return json.dumps(
        [
            {
                "site": m.site,
                "direction": m.direction,
                "remote": m.remote,
                "layout": m.layout.label,
                "repeat": m.repeat,
            }
            for m in CAMPAIGN.measurements()
        ]
    )


def site_records(site):
    """Every record one site produces: its transfers, and verify for each download."""
    files = []
    for m in CAMPAIGN.measurements(site):
        files.append(record(m))
        if m.direction == "download":
            files.append(verify_record(m))
    return files


def publish_inputs(wildcards):
    return site_records(CAMPAIGN.site_named(wildcards.site))


def aggregate_inputs(wildcards):
    """This run's own records, plus every other site's results pulled from the remote."""
    files = [f for site in CAMPAIGN.active_sites for f in site_records(site)]
    return files + [f"{SITES}/{s.name}/pulled.json" for s in CAMPAIGN.passive_sites]


def pull_token(wildcards):
    """A new value every invocation: other sites' results are pulled afresh by every run
    that aggregates them (Snakemake re-runs a job whose params changed)."""
    return RUN_STARTED


def exchange_spec():
    return json.dumps(
        {"prefixes": CAMPAIGN.rendezvous_prefixes, "flags": list(CAMPAIGN.rclone_flags)}
    )


def preflight_spec(wildcards):
    site = CAMPAIGN.site_named(wildcards.site)
    return json.dumps(
        {
            "campaign": CAMPAIGN.name,
            "site": site.name,
            "scratch": str(site.scratch),
            "needed_bytes": CAMPAIGN.scratch_needed(site),
            "remote_prefixes": {
                r.name: CAMPAIGN.remote_prefix(r) for r in CAMPAIGN.remotes
            },
            "flags": list(CAMPAIGN.rclone_flags),
            "min_rclone_version": CAMPAIGN.min_rclone_version,
            "upload_site": UPLOAD_SITE,
            "needs_upload": site.download
            and all(s.name != UPLOAD_SITE for s in CAMPAIGN.active_sites),
        }
    )


def cleanup_spec():
    return json.dumps(
        {
            "remote_data": [
                CAMPAIGN.remote_prefix(r, "data") for r in CAMPAIGN.remotes
            ],
            "scratch": [str(s.scratch / CAMPAIGN.name) for s in CAMPAIGN.active_sites],
            "flags": list(CAMPAIGN.rclone_flags),
        }
    )


def bookkeeping_targets():
    """The campaign manifest (upload site) and the final status line of every run."""
    targets = [f"{RESULTS}/status.txt"]
    targets += [f"{SITES}/{s.name}/published.json" for s in CAMPAIGN.active_sites]
    if any(s.name == UPLOAD_SITE for s in CAMPAIGN.active_sites):
        targets.append(f"{RESULTS}/manifest.json")
    return targets


def final_targets():
    figures = [
        "rate_vs_time.png",
        "rate_by_strategy.png",
        "speedup.png",
        "rate_vs_distance.png",
        "steps.png",
        "transfers.html",
        "summary.html",
        "cost.html",
        "campaign.html",
    ]
    return [f"{RESULTS}/transfers.tsv", f"{RESULTS}/summary.tsv"] + [
        f"{RESULTS}/figures/{f}" for f in figures
    ]


def report_info():
    """What the report needs from the config, as JSON: locations, prices, flags, dataset.

    Top-level ``prices`` apply to the single ``remote``; with ``remotes``, each remote's own
    ``prices``. Remote URLs are left out (the report needs names and places, not addresses).
    """
    named = config.get("remotes") or {}
    remotes = {}
    for r in CAMPAIGN.remotes:
        prices = (
            (named.get(r.name) or {}).get("prices") if named else config.get("prices")
        )
        remotes[r.name] = {"location": r.location, "prices": prices or None}
    return json.dumps(
        {
            "campaign": CAMPAIGN.name,
            "bucket": CAMPAIGN.bucket,
            "sites": {
                s.name: {
                    "location": s.location,
                    "upload": s.upload,
                    "download": s.download,
                }
                for s in CAMPAIGN.sites
            },
            "remotes": remotes,
            "dataset": {
                "name": CAMPAIGN.dataset_name,
                "files": CAMPAIGN.files,
                "file_bytes": CAMPAIGN.file_bytes,
                "chunk_sizes": list(CAMPAIGN.chunk_sizes),
            },
            "strategies": list(CAMPAIGN.strategies),
            "repeats": CAMPAIGN.repeats,
            "rclone": {
                "flags": list(CAMPAIGN.rclone_flags),
                "multi_thread_cutoff": CAMPAIGN.multi_thread_cutoff,
                "multi_thread_chunk_size": CAMPAIGN.multi_thread_chunk_size,
            },
        }
    )
