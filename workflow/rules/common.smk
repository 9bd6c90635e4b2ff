# Input functions and the campaign model: every loop and every if of the workflow lives here
# or in the cloudbench package, never inside a rule.
import functools
from pathlib import Path  # the rules use it (aggregate.smk, exchange.smk)

from cloudbench.site import breaker, jobenv
from cloudbench.campaign import jobs, order, paths, rounds
from cloudbench.campaign.identity import MeasurementId
from cloudbench.campaign.labels import SETTING_PATTERN, STRATEGIES
from cloudbench.campaign.model import (
    ConfigError,
    auto_runtime_min,
    Layout,
    Measurement,
    Setting,
    load_campaign,
)
from cloudbench.campaign.schema import stop
from cloudbench.sizes import parse_size
from cloudbench.campaign.spec import transfer_spec
from cloudbench.campaign.clients import NAMES as TOOLS

try:
    CAMPAIGN = load_campaign(config)
except ConfigError as err:
    stop(f"config error: {err}")


RESULTS = f"results/{CAMPAIGN.name}"
UPLOAD_SITE = CAMPAIGN.upload_site.name
UPLOAD_DATA = str(CAMPAIGN.upload_site.scratch / CAMPAIGN.name)
# Output patterns of the rules, from the one module that names every path.
W = {
    k: f"{{{k}}}"
    for k in ("site", "remote", "layout", "setting", "repeat", "file", "chunk", "tool")
}

NAME = r"[A-Za-z0-9][A-Za-z0-9_.-]*"
# a chunk's size as a layout's label writes it (campaign.labels.Layout: chunked-64MiB)
CHUNK = r"[0-9]+(KiB|MiB|GiB|TiB|B)"
# What this run tells its jobs that must never re-run one (campaign.jobs.RunSpec): written
# when the run starts (site.lifecycle.started), named on the jobs' command lines
RUN_SPEC = paths.run_spec(RESULTS, [s.name for s in CAMPAIGN.active_sites])


wildcard_constraints:
    site=NAME,
    remote=NAME,
    layout="|".join(s for s in STRATEGIES if s != "chunked") + f"|chunked-{CHUNK}",
    setting=SETTING_PATTERN,
    repeat=r"[0-9]+",
    file=r"[^/]+",
    chunk=CHUNK,
    tool="|".join(TOOLS),


# One queue wait per site run: the profile says transfers_on: one_allocation, and every
# transfer of the site runs in one batch job (a Snakemake group job) holding the nodes of
# its largest client count, one after the other.
ONE_ALLOCATION = config["transfers_on"] == "one_allocation"
TRANSFER_GROUP = "transfers"
# the transfers' group: None otherwise (a rule with any group is never a local rule)
TRANSFERS_GROUPED = TRANSFER_GROUP if ONE_ALLOCATION else None


def record(m):
    return paths.transfer_record(RESULTS, m.identity)


def verify_record(m):
    return paths.verify_record(RESULTS, m.identity)


def transfer_pattern(direction, kind=paths.transfer_record):
    return kind(RESULTS, MeasurementId.wildcards(direction))


def transfer_job_log(step):
    return paths.job_log(
        RESULTS,
        W["site"],
        step,
        W["remote"],
        W["layout"],
        W["setting"],
        f"r{W['repeat']}",
    )


def copy_pattern(kind):
    return kind(RESULTS, MeasurementId.wildcards())


def measurement_of(wildcards, direction):
    return Measurement(
        wildcards.site,
        wildcards.remote,
        direction,
        Layout.from_label(wildcards.layout),
        int(wildcards.repeat),
        Setting.from_label(wildcards.setting),
    )


def clients_of(wildcards):
    """Nodes and tasks of a transfer job: one of each per client (each task asks for the
    job's threads, so a client has a node of its own)."""
    return Setting.from_label(wildcards.setting).clients


def launcher_of(wildcards):
    """Several clients start their own tasks (srun inside the job, see cloudbench.measure.group),
    so the Slurm job step must not wrap the job in a one-task srun ('mpi' resource). In one
    allocation every transfer is a step of the group's job (Snakemake wants one value for
    a whole group); the clients' srun then overlaps the step that waits for them."""
    if ONE_ALLOCATION:
        return ""
    return "srun" if clients_of(wildcards) > 1 else ""


def transfer_runtime(wildcards):
    """Minutes a transfer job asks for when no site profile sets ``runtime``: the copy
    is ended before this walltime runs out (cloudbench.measure.attempts.copy_timeout).
    """
    return auto_runtime_min(CAMPAIGN.file_bytes * CAMPAIGN.files)


def copy_timeout_s(wildcards):
    """The campaign's copy_timeout in whole seconds (0: auto, the walltime decides): a
    resource, not a param, so a new timeout never measures a finished transfer again."""
    return int(CAMPAIGN.copy_timeout_s or 0)


def retry_token(direction):
    """A param that changes once per failed attempt, so the next run measures it again.

    Snakemake re-runs a job whose params differ from those stored when it last ran. The
    token counts the failed attempts kept beside the record: a failure adds one (the next
    run differs, so it measures again), and a success adds none (every later run agrees).
    """

    def fn(wildcards):
        m = measurement_of(wildcards, direction)
        return jobenv.retry_token(record(m), settled=_settled(m))

    return fn


def _settled(m):
    """A tuning search's finding: a setting that failed while the store answered is
    avoided, not measured again (campaign.rounds.settled: read anew at each call)."""
    return rounds.settled(CAMPAIGN, RESULTS, m)


def dataset_args():
    """What fixes the generated bytes (the data steps regenerate missing files from it)."""
    return jobs.param(jobs.dataset(CAMPAIGN))


@functools.cache
def _transfer_param(m):
    return jobs.param(transfer_spec(CAMPAIGN, m))


def spec_json(direction):
    """The job's slice of the campaign; built once per measurement (a large sweep asks for
    it several times per job while the DAG is built)."""

    def fn(w):
        return _transfer_param(measurement_of(w, direction))

    return fn


def dataset_names():
    """What names the files (campaign.file_names): the small-files job derives them."""
    return jobs.param(jobs.dataset_names(CAMPAIGN))


def checksum_jsons():
    """Every file's checksums: one record per file, or one for a small-files dataset."""
    if CAMPAIGN.small_files:
        return [paths.dataset_checksums(RESULTS, UPLOAD_SITE)]
    return [paths.checksum_json(RESULTS, UPLOAD_SITE, n) for n in CAMPAIGN.file_names]


def stage_inputs(wildcards):
    """The records of the data steps one layout's uploads read: generate (plain,
    multithread) or chunk (chunked), and every checksum.

    The bulk data itself is not a Snakemake file: it lives in scratch, is removed once
    every upload has run, and is regenerated byte-identically (and checked against its
    XXH128) by whichever job needs it again, so a regenerated file never makes finished
    measurements look out of date.
    """
    if CAMPAIGN.small_files:  # one job made them all (rules/smallfiles.smk)
        return {
            "steps": [paths.dataset_step_record(RESULTS, UPLOAD_SITE, "generate")],
            "checksums": checksum_jsons(),
        }
    layout = Layout.from_label(wildcards.layout)
    chunk = layout.chunk_label if layout.strategy == "chunked" else None
    step = "chunk" if chunk else "generate"
    steps = [
        paths.data_step_record(RESULTS, UPLOAD_SITE, step, n, chunk)
        for n in CAMPAIGN.file_names
    ]
    return {"steps": steps, "checksums": checksum_jsons()}


def upload_inputs(wildcards):
    """What an upload waits for (:func:`upload_needs`), and its store_open job's token."""
    return upload_needs(wildcards) | {"store_open": store_open_of(wildcards, "upload")}


def upload_needs(wildcards):
    """One record per layout (the stage rule's), so a large sweep's uploads do not each
    depend on every file's records (a DAG of tens of thousands of edges); and the marker
    that every layout is staged, so rounds are not cut short by data still being made. The
    marker is ancient: rewritten when a layout is added, it measures nothing again."""
    return {
        "staged": paths.staged(RESULTS, UPLOAD_SITE, wildcards.layout),
        "all_staged": ancient(paths.staged_all(RESULTS, UPLOAD_SITE)),
        "gate": gate_of(wildcards),
        "retry": _failed_attempt(measurement_of(wildcards, "upload")),
    }


def staged_layouts():
    return [paths.staged(RESULTS, UPLOAD_SITE, l.label) for l in CAMPAIGN.layouts]


@functools.cache
def _transfer_priorities():
    most = CAMPAIGN.most_repeats  # repeats: auto: the later rounds keep the order too
    return order.priorities(
        order.run_order(CAMPAIGN.measurements(rounds=most), CAMPAIGN.seed)
    )


def transfer_priority(direction):
    """The priority that puts a transfer in its place in the run order (by rounds,
    shuffled within each: cloudbench.campaign.order)."""

    def priority(wildcards):
        return _transfer_priorities().get(
            measurement_of(wildcards, direction), order.PRIORITY_BAND[0]
        )

    return priority


def upload_of(wildcards):
    """The record of the upload that wrote the copy a download reads (the upload site's,
    local or pulled from the remote; it may not exist yet at a download-only site)."""
    down = measurement_of(wildcards, "download")
    setting = CAMPAIGN.copy_setting(down)
    copy = CAMPAIGN.copy_repeat(down)
    return record(
        Measurement(UPLOAD_SITE, down.remote, "upload", down.layout, copy, setting)
    )


def download_inputs(wildcards):
    """What a download waits for (:func:`download_needs`), and its store_open job's token."""
    return download_needs(wildcards) + [store_open_of(wildcards, "download")]


def store_open_of(wildcards, direction):
    """The token a measurement's store_open job leaves (site.breaker.open_token): ancient,
    so the job that left it never makes its transfer run again."""
    return ancient(breaker.open_token(record(measurement_of(wildcards, direction))))


def store_open_inputs(wildcards):
    """What a measurement's store_open job waits for: what its transfer waits for, so that
    it runs just before the transfer (with the same network resource and priority), all
    ancient: it runs once per measurement, never again for them."""
    if wildcards.direction == "upload":
        needs = list(upload_needs(wildcards).values())
    else:
        needs = download_needs(wildcards)
    files = [f for v in needs for f in (v if isinstance(v, list) else [v])]
    return [ancient(f) for f in files]


def store_open_priority(wildcards):
    return transfer_priority(wildcards.direction)(wildcards)


def store_open_spec(wildcards):
    return spec_json(wildcards.direction)(wildcards)


def download_needs(wildcards):
    """Preflight first; with site: all, also the upload of the copy it reads (a retried
    upload measures its downloads again). Params and the preflight do not depend on which
    sites a run names, so switching between site=<name> and site=all measures nothing
    again (the set of inputs may differ: not a rerun trigger, profiles/default)."""
    inputs = [paths.preflight(RESULTS, wildcards.site), gate_of(wildcards)]
    if any(s.name == UPLOAD_SITE for s in CAMPAIGN.active_sites):
        inputs.append(upload_of(wildcards))
    return inputs + _failed_attempt(measurement_of(wildcards, "download"))


def _failed_attempt(m):
    """The newest failed attempt of a transfer, as an input: measured again (jobenv)."""
    return jobenv.failed_attempt(record(m), settled=_settled(m))


def verify_inputs(wildcards):
    m = measurement_of(wildcards, "download")
    inputs = {
        "download": record(m),
        "manifest": paths.copy_manifest(RESULTS, m.identity),
    }
    if m.layout.strategy == "chunked":
        inputs["reassembled"] = paths.reassemble_record(RESULTS, m.identity)
    return inputs


def upload_records():
    return [
        record(m)
        for m in CAMPAIGN.measurements(CAMPAIGN.upload_site)
        if m.direction == "upload"
    ]


def manifest_info():
    return jobs.param(jobs.manifest_info(CAMPAIGN))


def expected_measurements():
    """What the tables may hold: this campaign's measurements and data steps, nothing older."""
    return jobs.param(jobs.plan(CAMPAIGN))


def precision_target():
    """What ``repeats: auto`` aims for, as the precision checkpoint's param (a new target
    decides again from the same records; nothing already measured is measured again)."""
    return jobs.param(jobs.precision_target(CAMPAIGN))


def _search(site_name):
    """The search that decides a site's rounds (campaign.rounds), or None."""
    return rounds.of(CAMPAIGN, site_name)


def _states(search):
    """The state after round k of a site, as its checkpoint decided it (Snakemake runs the
    checkpoint first where it has not)."""
    decided = getattr(checkpoints, search.checkpoint)
    return lambda k: rounds.read_state(decided.get(site=search.site, round=k).output[0])


def round_inputs(wildcards):
    """What the state after round k rests on: records, and the states it builds on."""
    search, k = _search(wildcards.site), int(wildcards.round)
    return {
        "records": [record(m) for m in search.rests_on(k, _states(search))],
        "previous": [search.state_path(RESULTS, j) for j in search.previous(k)],
    }


def final_state(wildcards):
    """The state after a site's last round: it asks for nothing more."""
    search = _search(wildcards.site)
    return search.state_path(RESULTS, rounds.last(search, _states(search)))


def release_after_last_round(wildcards):
    """The upload site's generated data, once its last round is decided: the later rounds'
    uploads made it again, and no upload is left to read it."""
    return UPLOAD_DATA if wildcards.site == UPLOAD_SITE else ""


def tune_target():
    """How the tuning mode's searches decide (a new budget or margin replays them)."""
    return jobs.param(jobs.tune_target(CAMPAIGN))


def later_rounds(site):
    """The transfers of a site beyond its first rounds that its search asked for so far
    (``repeats: auto`` or the tuning mode; none without either)."""
    search = _search(site.name)
    return rounds.later(search, _states(search)) if search else []


def measured(site):
    """Every transfer a site measures: the first rounds, then any later ones."""
    return [*CAMPAIGN.measurements(site), *later_rounds(site)]


def final_states(sites):
    """The final state of these sites' searches (none without one)."""
    return [x.final_path(RESULTS) for x in map(_search, (s.name for s in sites)) if x]


def site_records(site, measurements=None):
    """Every record one site produces: its transfers, and verify for each download."""
    files = []
    for m in measured(site) if measurements is None else measurements:
        files.append(record(m))
        if m.direction == "download":
            files.append(verify_record(m))
    return files


def all_records():
    """Every record this run's sites must have: targets of the run itself, so one that is
    lost (deleted by hand, or removed by a forced re-measure that could not finish) is
    measured again. As an input of the report alone it would not be: Snakemake does not
    re-create a missing intermediate file while what was made from it is up to date."""
    return [
        f
        for s in CAMPAIGN.active_sites
        for f in site_records(s, CAMPAIGN.measurements(s))
    ]


def later_records(wildcards):
    """The records of the later rounds of ``repeats: auto``, once they are decided."""
    return [f for s in CAMPAIGN.active_sites for f in site_records(s, later_rounds(s))]


PROBE_TIMES = ("before", "after")


def probe_records(site):
    """A site's latency probes: every remote, before and after its transfers."""
    return [
        paths.probe_record(RESULTS, site.name, r.name, when)
        for r in CAMPAIGN.remotes
        for when in PROBE_TIMES
    ]


def probe_inputs(wildcards):
    """``before`` waits for the site's preflight; ``after`` for every transfer of that
    site to or from that remote, and its checks (so it sees the path as the transfers
    left it, and the site's records are complete once every ``after`` has run)."""
    if wildcards.when == "before":
        return [paths.preflight(RESULTS, wildcards.site)]
    files = []
    for m in measured(CAMPAIGN.site_named(wildcards.site)):
        if m.remote == wildcards.remote:
            files.append(record(m))
            if m.direction == "download":
                files.append(verify_record(m))
    return files


def probe_url(wildcards):
    """name:bucket/campaign, the prefix the transfers use: the probe's objects go there."""
    return CAMPAIGN.remote_prefix(CAMPAIGN.remote_named(wildcards.remote))


def publish_inputs(wildcards):
    """A site's probes, and through each ``after`` probe every record of the site: they
    travel together (publish copies the site folder). Listing the records again would
    double the edges of a large sweep's DAG and its planning time."""
    site = CAMPAIGN.site_named(wildcards.site)
    return probe_records(site) + final_states([site])


def aggregate_inputs(wildcards):
    """This run's own records, plus every other site's results pulled from the remote."""
    files = [paths.plan(RESULTS)] + [
        f
        for site in CAMPAIGN.active_sites
        for f in site_records(site) + probe_records(site)
    ]
    compared = [str(CAMPAIGN.compare_with)] if CAMPAIGN.compare_with else []
    return (
        files
        + [paths.pulled(RESULTS, s.name) for s in CAMPAIGN.passive_sites]
        + compared
        + final_states(CAMPAIGN.active_sites)
    )


def exchange_spec():
    return jobs.param(jobs.exchange(CAMPAIGN))


def preflight_spec(wildcards):
    """A site's own checks (campaign.jobs.PreflightSpec: nothing that re-runs it)."""
    return jobs.param(jobs.preflight(CAMPAIGN, CAMPAIGN.site_named(wildcards.site)))


def scratch_needed(wildcards):
    return CAMPAIGN.scratch_needed(CAMPAIGN.site_named(wildcards.site))


def gate_spec(wildcards):
    """One remote with one tool at one site: reachable, writable, and the tool usable."""
    return jobs.param(
        jobs.gate(CAMPAIGN, wildcards.site, wildcards.remote, wildcards.tool)
    )


def gate_of(wildcards):
    """The preflight gate of a transfer's remote and tool at its site."""
    tool = Setting.from_label(wildcards.setting).tool
    return paths.preflight_gate(RESULTS, wildcards.site, wildcards.remote, tool)


def cleanup_spec():
    return jobs.param(jobs.cleanup(CAMPAIGN))


def bookkeeping_targets():
    """The campaign manifest (upload site), the final status line of every run, and the
    latency probes of every active site and remote."""
    targets = [f"{RESULTS}/status.txt"]
    targets += [paths.published(RESULTS, s.name) for s in CAMPAIGN.active_sites]
    targets += [p for s in CAMPAIGN.active_sites for p in probe_records(s)]
    if any(s.name == UPLOAD_SITE for s in CAMPAIGN.active_sites):
        targets.append(paths.campaign_manifest(RESULTS))
    return targets


def report_info():
    """What the report needs from the config (campaign.jobs.ReportInfo)."""
    return jobs.param(jobs.report_info(CAMPAIGN, config))
