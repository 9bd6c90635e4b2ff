"""The campaign model: what a config file asks for, checked, and the measurements it implies.

The JSON schema (workflow/schemas/config.schema.yaml) checks shapes; this module checks the
meaning (a chunk larger than the file, no upload site, an unknown site) so that every mistake
stops the run before any job starts, with one line naming the key and the value.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from cloudbench.campaign import clients
from cloudbench.campaign import rclone_options as rc
from cloudbench.campaign.identity import MeasurementId
from cloudbench.campaign.jobspec import auto_runtime_min as auto_runtime_min
from cloudbench.campaign.labels import (
    AUTO,
    STRATEGIES,
    ConfigError,
    Layout,
    Setting,
)
from cloudbench.campaign.precision import Precision, copy_repeat, first_rounds
from cloudbench.campaign.remote import Remote
from cloudbench.campaign.search import Tune
from cloudbench.campaign.secrets import credential_flag, credential_in_remote, credential_in_value
from cloudbench.campaign.template import PLACEHOLDERS, TemplateError, template_argv
from cloudbench.data import chunking
from cloudbench.sizes import SizeError, parse_duration, parse_size

NESTED = "nested"  # dataset.layout of many small files in nested directories
FILES_PER_DIR = 100  # nested: files per leaf directory; leaves grouped 10 per top directory
TOOLS = clients.NAMES  # clients that move the data, by the registry (one module each)
# Strategies only a client that can split one file into parallel streams measures
# (clients.REGISTRY's multithread capability: rclone's per-file streams).
MULTI_STREAM_STRATEGIES = ("multithread",)
DIRECTIONS = ("upload", "download")
ALL_SITES = "all"
NO_SITE = "none"  # only pull every site's results from the remote and aggregate them
RESERVED_SITE_NAMES = (ALL_SITES, NO_SITE)
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


@dataclass(frozen=True)
class Site:
    name: str
    upload: bool
    download: bool
    scratch: Path
    location: tuple[float, float] | None
    launch: tuple[tuple[str, Any], ...] = ()  # how the launcher reaches it (ssh host, workdir)
    clients: tuple[int, ...] = (1,)  # client counts this site sweeps (one process per node)


@dataclass(frozen=True)
class Measurement:
    """One timed transfer of one copy: the unit that becomes one row of transfers.tsv."""

    site: str
    remote: str
    direction: str
    layout: Layout
    repeat: int
    setting: Setting = Setting()

    @property
    def key(self) -> str:
        return (
            f"{self.direction}/{self.remote}/{self.layout.label}/{self.setting.label}"
            f"/r{self.repeat}"
        )

    @property
    def identity(self) -> MeasurementId:
        """This measurement's identity, as its paths and its row name it."""
        return MeasurementId(
            site=self.site, remote=self.remote, direction=self.direction,
            tool=self.setting.tool, strategy=self.layout.strategy, layout=self.layout.label,
            setting=self.setting.label, repeat=self.repeat,
        )  # fmt: skip


@dataclass(frozen=True)
class Campaign:
    name: str
    bucket: str
    remotes: tuple[Remote, ...]
    dataset_name: str
    files: int
    file_bytes: int
    chunk_sizes: tuple[int, ...]
    strategies: tuple[str, ...]
    repeats: int  # with precision: the first rounds, which every identity has
    seed: str
    rclone_flags: tuple[str, ...]
    multi_thread_cutoff: int
    multi_thread_chunk_size: int
    min_rclone_version: str
    sites: tuple[Site, ...]
    site: str
    concurrency: tuple[tuple[str, tuple[int | None, ...]], ...] = ()  # per strategy
    start_tolerance_s: float = 1.0
    copy_timeout_s: float | None = None  # None: auto (the job's walltime, or an estimate)
    store_down: StoreDown = field(default_factory=lambda: StoreDown())
    tools: tuple[str, ...] = ("rclone",)
    command_template: str | None = None
    dataset_layout: str = "flat"
    compare_with: Path | None = None  # another campaign's transfers.tsv (report: Comparison)
    compare_margin: float = 0.05  # a change below this is no verdict (schema's default)
    precision: Precision | None = None  # repeats: auto (cloudbench.campaign.precision)
    series: str | None = None  # an occurrence's series (its name is <series>@<occurrence>)
    thresholds: tuple[float | None, float | None] = (None, None)  # good, poor (MB/s)
    tune: Tune | None = None  # the tuning mode (cloudbench.campaign.tune)

    @property
    def small_files(self) -> bool:
        """Many small files in nested directories: generated and checksummed by one job."""
        return self.dataset_layout == NESTED

    def tools_for(self, strategy: str) -> tuple[str, ...]:
        """The tools that measure a strategy: all of them, but multithread only the clients
        that can split one file into streams (rclone)."""
        if strategy in MULTI_STREAM_STRATEGIES:
            return tuple(t for t in self.tools if clients.REGISTRY[t].multithread)
        return self.tools

    def concurrency_of(self, strategy: str) -> tuple[int | None, ...]:
        """The parallelism values swept for a strategy; (None,) = the job's threads."""
        return dict(self.concurrency).get(strategy, (None,))

    def settings(self, site: Site, strategy: str, remote: Remote | None = None) -> list[Setting]:
        """Every tool x clients x concurrency combination a site measures for a strategy,
        each concurrency as the tool honours it (campaign.clients.objects_at_once: s3cmd at
        1 only, every value of the sweep would run the same command; s5cmd from 2). In the
        tuning mode, the first round's: each tool at the fewest clients and concurrency (the
        search decides the rest). With ``remote``, only the tools that measure it."""
        tools = [t for t in self.tools_for(strategy) if remote is None or t in remote.tools]
        if self.tune is not None:  # a search starts at the fewest clients and connections
            return [
                Setting(t, min(site.clients), min(self._concurrency(t, strategy))) for t in tools
            ]
        return [
            Setting(t, n, c)
            for t in tools
            for n in site.clients
            for c in self._concurrency(t, strategy)
        ]

    def _concurrency(self, tool: str, strategy: str) -> tuple[int | None, ...]:
        return clients.concurrency_values(tool, self.concurrency_of(strategy))

    def template_for(self, tool: str) -> str | None:
        """The command template for a tool whose command line it is, None for the others
        (only their jobs see it: a changed template re-runs only those)."""
        return self.command_template if clients.REGISTRY[tool].needs_template else None

    def copy_setting(self, m: Measurement) -> Setting:
        """The upload whose copy a measurement moves: its own for an upload; for a download,
        the upload with the same setting, or (when the upload site does not sweep that
        client count) the upload site's first client count at the same concurrency.
        Reading a copy does not change it, so every download setting can share one."""
        if m.direction == "upload":
            return m.setting
        ups = self.settings(self.upload_site, m.layout.strategy, self.remote_named(m.remote))
        if m.setting in ups:
            return m.setting
        same = [s for s in ups if s.concurrency == m.setting.concurrency]
        return (same or ups)[0]

    # --- derived views -------------------------------------------------------------------
    @property
    def file_names(self) -> list[str]:
        return file_names(self.dataset_name, self.files, self.dataset_layout)

    @property
    def dataset_bytes(self) -> int:
        return self.files * self.file_bytes

    @property
    def upload_site(self) -> Site:
        return next(s for s in self.sites if s.upload)

    def site_named(self, name: str) -> Site:
        for s in self.sites:
            if s.name == name:
                return s
        raise ConfigError(f"site: unknown site {name!r} (known: {', '.join(self.site_names)})")

    def remote_named(self, name: str) -> Remote:
        for r in self.remotes:
            if r.name == name:
                return r
        raise ConfigError(f"remotes: unknown remote {name!r}")

    @property
    def site_names(self) -> list[str]:
        return [s.name for s in self.sites]

    @property
    def active_sites(self) -> list[Site]:
        """The sites whose share this run performs (``site: all`` = every site, in order)."""
        if self.site == ALL_SITES:
            return list(self.sites)
        if self.site == NO_SITE:
            return []
        return [self.site_named(self.site)]

    @property
    def passive_sites(self) -> list[Site]:
        """Sites whose results this run pulls from the remote instead of measuring."""
        active = {s.name for s in self.active_sites}
        return [s for s in self.sites if s.name not in active]

    @property
    def rendezvous_prefixes(self) -> list[str]:
        """Where sites publish and find results: the campaign folder on every remote."""
        return [self.remote_prefix(r) for r in self.remotes]

    @property
    def layouts(self) -> list[Layout]:
        out: list[Layout] = []
        for strategy in self.strategies:
            if strategy == "chunked":
                out.extend(Layout("chunked", c) for c in self.chunk_sizes)
            else:
                out.append(Layout(strategy, 0))
        return out

    @property
    def most_repeats(self) -> int:
        """The most repeats any identity can have (with ``repeats: auto``, its maximum)."""
        return self.precision.max_repeats if self.precision else self.repeats

    def copy_repeat(self, m: Measurement) -> int:
        """The upload repeat whose copy ``m`` moves: its own, but with ``repeats: auto`` a
        download beyond the first rounds reads theirs again (cloudbench.campaign.precision)."""
        if m.direction == "upload":
            return m.repeat
        return copy_repeat(m.repeat, self.repeats)

    def measurements(self, site: Site | None = None, rounds: int = 0) -> Iterator[Measurement]:
        """Every transfer this campaign implies (its first ``repeats`` rounds, or ``rounds``
        of them), or only those of one site."""
        for s in self.sites if site is None else [site]:
            for direction in DIRECTIONS:
                if not getattr(s, direction):
                    continue
                for remote in self.remotes:
                    for layout in self.layouts:
                        for setting in self.settings(s, layout.strategy, remote):
                            for repeat in range(1, (rounds or self.repeats) + 1):
                                yield Measurement(
                                    s.name, remote.name, direction, layout, repeat, setting
                                )

    def chunk_count(self, chunk_bytes: int) -> int:
        return chunking.chunk_count(self.file_bytes, chunk_bytes)

    def chunk_index_width(self, chunk_bytes: int) -> int:
        return chunking.chunk_index_width(self.file_bytes, chunk_bytes)

    def scratch_needed(self, site: Site) -> int:
        """Peak bulk bytes a site holds in scratch (a safe upper bound, not an average).

        The upload site keeps the files and every chunk size's chunks until the last upload.
        A download site holds one copy being downloaded while the previous one is checked;
        reassembly keeps a copy's chunks beside its reassembled files until verify removes
        both, so a chunked copy counts twice.
        """
        need = 0
        if site.upload:
            need += self.dataset_bytes * (1 + len(self.chunk_sizes))
        if site.download:  # with site: all, downloads may overlap the last uploads
            checking = 2 if self.chunk_sizes else 1
            need += self.dataset_bytes * (1 + checking)
        return need

    def remote_prefix(self, remote: Remote, *parts: str) -> str:
        return remote.path(self.bucket, self.name, *parts)


def file_names(name: str, files: int, layout: str = "flat") -> list[str]:
    """The dataset's file names, relative to its directory (and to the copy's prefix on the
    remote): ``<name>-001.bin``; nested: ``d00/d03/<name>-0342.bin``, FILES_PER_DIR files in
    each leaf directory, ten leaves per top directory. Every base name is unique (the
    keystream derives from it)."""
    width = max(3, len(str(files)))
    out = []
    for i in range(1, files + 1):
        base = f"{name}-{i:0{width}d}.bin"
        if layout == NESTED:
            leaf = (i - 1) // FILES_PER_DIR
            base = f"d{leaf // 10:02d}/d{leaf % 10:02d}/{base}"
        out.append(base)
    return out


# --- loading and checking ------------------------------------------------------------------


def _size(cfg: Mapping[str, Any], key: str, value: Any) -> int:
    try:
        return parse_size(value)
    except SizeError as err:
        raise ConfigError(f"{key}: {err}") from None


def _size_or_auto(cfg: Mapping[str, Any], key: str, auto: int) -> int:
    """A size key of the config (``rclone.multi_thread_cutoff``) that may say ``auto``."""
    section, name = key.split(".")
    value = cfg[section][name]
    return auto if value == "auto" else _size(cfg, key, value)


def _location(key: str, value: Any) -> tuple[float, float] | None:
    if value is None:
        return None
    try:
        lat, lon = (float(v) for v in value)
    except (TypeError, ValueError):
        raise ConfigError(f"{key}: expected [latitude, longitude], got {value!r}") from None
    if not (-90 <= lat <= 90 and -180 <= lon <= 180):
        raise ConfigError(f"{key}: {value!r} is not a valid [latitude, longitude]")
    return (lat, lon)


def _positive_int(key: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"{key}: must be a whole number >= 1, got {value!r}")
    return value


def _name(key: str, value: Any) -> str:
    if not isinstance(value, str) or not _NAME_RE.match(value):
        raise ConfigError(
            f"{key}: {value!r} is not a valid name (letters, digits, '_', '.', '-'; no '/')"
        )
    return value


def _remote_url(key: str, url: Any, environ: Mapping[str, str] = os.environ) -> str:
    url = str(url)
    found = credential_in_remote(url)
    if found:
        raise ConfigError(
            f"{key}: the remote spells out a credential ({found}=...); put credentials in "
            "rclone's config file or RCLONE_CONFIG_<NAME>_* variables, never in the campaign"
        )
    # without its colon a remote's name is a local directory to rclone (Remote.is_directory):
    # the campaign would measure local disk and call it the store
    defined = f"RCLONE_CONFIG_{url.rstrip('/').upper().replace('-', '_')}_TYPE"
    if ":" not in url and defined in environ:
        raise ConfigError(
            f"{key}: {url!r} is a local directory to rclone, but {defined} defines a remote "
            f"of that name: write {url.rstrip('/') + ':'!r}"
        )
    return url


def _remotes(cfg: Mapping[str, Any]) -> tuple[Remote, ...]:
    spec = cfg.get("remotes")
    if spec and cfg.get("remote"):
        raise ConfigError("remote and remotes: give one of them, not both")
    if spec:
        remotes = []
        for name, r in spec.items():
            _name("remotes", name)
            remotes.append(
                Remote(
                    name,
                    _remote_url(f"remotes.{name}.url", r["url"]),
                    _location(f"remotes.{name}.location", r.get("location")),
                    _listed_tools(f"remotes.{name}.tools", r["tools"]) if "tools" in r else (),
                )
            )
        return tuple(remotes)
    url = cfg.get("remote")
    if not url:
        raise ConfigError("remote: missing (an rclone remote such as 'mys3:' or a local path)")
    return (
        Remote(
            "main",
            _remote_url("remote", url),
            _location("remote_location", cfg.get("remote_location")),
        ),
    )


def _strings(value: Any, where: str) -> Iterator[tuple[str, str]]:
    """Every string in a nested config, with its dotted key (list items as key[i])."""
    if isinstance(value, str):
        yield where, value
    elif isinstance(value, Mapping):
        for k, v in value.items():
            yield from _strings(v, f"{where}.{k}" if where else str(k))
    elif isinstance(value, list | tuple):
        for i, v in enumerate(value):
            yield from _strings(v, f"{where}[{i}]")


def _no_credentials(cfg: Mapping[str, Any]) -> None:
    """A campaign file is shared, published and put in reports: it must hold no secret."""
    for key, text in _strings(cfg, ""):
        found = credential_in_value(text) or (
            credential_flag(text) if text.startswith("-") else None
        )
        if found:
            raise ConfigError(
                f"{key}: looks like a credential ({found}); credentials belong in rclone's "
                "config file or RCLONE_CONFIG_<REMOTE>_* variables, never in the campaign file"
            )


def _counts(key: str, value: Any, allow_auto: bool = False) -> tuple[Any, ...]:
    """A number or a list of numbers (a sweep), each >= 1, none twice, in the given order."""
    items = value if isinstance(value, list) else [value]
    if not items:
        raise ConfigError(f"{key}: give at least one value")
    out = []
    for v in items:
        if allow_auto and v == AUTO:
            out.append(None)
            continue
        out.append(_positive_int(key, v))
    if len(set(out)) != len(out):
        raise ConfigError(f"{key}: the same value listed twice in {items!r}")
    return tuple(out)


def _concurrency(cfg: Mapping[str, Any], strategies: tuple[str, ...]):
    out = []
    for strategy, values in (cfg.get("concurrency") or {}).items():
        if strategy not in strategies:
            raise ConfigError(
                f"concurrency.{strategy}: strategy {strategy!r} is not measured "
                f"(strategies: {', '.join(strategies)})"
            )
        out.append((strategy, _counts(f"concurrency.{strategy}", values, allow_auto=True)))
    return tuple(out)


def _flags(raw: list[str]) -> tuple[str, ...]:
    """rclone.flags: one argument per item, none that cloudbench sets itself."""
    for flag in raw:
        name = flag.split("=", 1)[0]
        if flag.startswith("-") and " " in name.strip():
            parts = flag.split()
            raise ConfigError(
                f"rclone.flags: {flag!r} is one item; write each argument as its own item: "
                f"{parts!r}"
            )
        if name in rc.MANAGED_FLAGS:
            raise ConfigError(
                f"rclone.flags: {name} is set by cloudbench for each strategy "
                f"({rc.MANAGED_FLAGS[name]}); remove it"
            )
    return tuple(raw)


def _listed_tools(where: str, listed: Any) -> tuple[str, ...]:
    """A list of tools (``tools``, ``remotes.<name>.tools``): at least one, none twice."""
    chosen = tuple(listed)
    if not chosen:
        raise ConfigError(f"{where}: at least one of {', '.join(TOOLS)}")
    if len(set(chosen)) != len(chosen):
        raise ConfigError(f"{where}: listed twice in {list(chosen)!r}")
    return chosen


def _tools(
    cfg: Mapping[str, Any], strategies: tuple[str, ...], remotes: tuple[Remote, ...]
) -> tuple[tuple[str, ...], tuple[Remote, ...]]:
    """(every tool of the campaign, the remotes with their tools resolved): each remote
    measured by its own ``tools`` or the campaign's; the campaign's tools are all of them.
    Known, none twice, command with its template, S3-only tools on remotes that can be S3 (a
    local path or a connection string never is: refused here, naming the remote; a named
    remote's type is checked by preflight, which may read rclone's config)."""
    default = _listed_tools("tools", cfg["tools"])
    remotes = tuple(replace(r, tools=r.tools or default) for r in remotes)
    chosen = tuple(dict.fromkeys(t for r in remotes for t in r.tools))
    template = cfg.get("command_template")
    templated = [t for t in chosen if clients.REGISTRY[t].needs_template]
    if templated:
        if not template:
            raise ConfigError(f"command_template: tools lists {templated[0]}, so give its template")
        try:
            template_argv(template, {p: p for p in PLACEHOLDERS})
        except TemplateError as err:
            raise ConfigError(f"command_template: {err}") from None
    elif template:
        raise ConfigError(
            f"command_template: given, but tools does not list {' or '.join(clients.TEMPLATED)}"
        )
    if not any(clients.REGISTRY[t].multithread for t in chosen):
        only = [s for s in strategies if s in MULTI_STREAM_STRATEGIES]
        if only:
            raise ConfigError(
                f"tools: strategy {only[0]} is rclone's per-file multi-stream copy, which "
                f"{', '.join(chosen)} cannot do; add rclone to tools or drop {only[0]}"
            )
    for r in remotes:
        for tool in r.tools:
            if not clients.REGISTRY[tool].s3_only:
                continue
            if r.url.startswith(":"):  # its parameters are not echoed: they may hold a secret
                what = "a connection string"
            elif not clients.is_remote(r.url):
                what = "a local path"
            else:
                continue
            raise ConfigError(
                f"tools: {tool} speaks S3 only, and remote {r.name!r} is {what}; "
                "define a named S3 remote (RCLONE_CONFIG_<NAME>_* or rclone config), use "
                "rclone, or measure it with other tools "
                f"(remotes: {{{r.name}: {{tools: [rclone]}}}})"
            )
    return chosen, remotes


def _share(key: str, raw: Any, of: str, example: str, zero: bool = False) -> float:
    """A share written as ``10%`` or ``0.1``: above 0 (or at least 0 with ``zero``) and below
    1; a bare number of 1 or more is refused, since ``10`` meant 10% (one line naming
    ``key``)."""
    try:
        share = float(str(raw).rstrip("%")) / (100 if str(raw).endswith("%") else 1)
    except ValueError:
        share = -1.0
    if not (share >= 0 if zero else share > 0):
        above = "at least 0" if zero else "above 0"
        raise ConfigError(f"{key}: {raw!r} must be a share {of} {above}, e.g. {example}")
    if not str(raw).endswith("%") and share >= 1:
        raise ConfigError(
            f"{key}: {raw!r} is a share {of} ({share:g} = {share:.0%}); "
            f"for {raw} percent write {raw}%"
        )
    return share


def _repeats(value: Any, target: Mapping[str, Any]) -> tuple[int, Precision | None]:
    """The first rounds every identity is measured, and with ``auto`` the precision that
    decides the later ones (:mod:`cloudbench.campaign.precision`)."""
    if value != "auto":
        return _positive_int("repeats", value), None
    first = first_rounds()
    width = _share("precision.width", target["width"], "of the median", "10% or 0.1")
    most = _positive_int("precision.max_repeats", target["max_repeats"])
    if most < first:
        raise ConfigError(
            f"precision.max_repeats: {most} is below {first}, the first rounds of repeats: "
            f"auto (fewer repeats give no median interval at 95%)"
        )
    return first, Precision(width, most)


def _tune(raw: Mapping[str, Any], c: Campaign) -> Tune:
    """The tuning mode's budget and margin, and what a search needs of the campaign: a
    number of repeats (3 or more: a step's median needs an interval) and concurrency
    values that are numbers (a ladder to climb)."""
    if c.precision is not None:
        raise ConfigError(
            "tune: needs a number of repeats (3 or more), not repeats: auto; a search "
            "measures each step with the same repeats"
        )
    if c.repeats < 3:
        raise ConfigError(
            f"tune: needs repeats: 3 or more (got {c.repeats}); a step's median needs an "
            "interval to be set against the next"
        )
    for strategy in c.strategies:
        if None in c.concurrency_of(strategy):
            raise ConfigError(
                f"concurrency.{strategy}: tune climbs a list of numbers, e.g. [1, 2, 4, 8, 16, "
                "32]; 'auto' (or no list) gives it nothing to climb"
            )
    margin = _share("tune.margin", raw["margin"], "of a median rate", "10% or 0.1")
    budget = raw["budget"]
    try:
        return Tune(margin, budget_bytes=parse_size(budget))
    except SizeError:
        pass
    try:
        return Tune(margin, budget_s=parse_duration(budget))
    except SizeError:
        raise ConfigError(
            f"tune.budget: {budget!r} is neither bytes moved (20GiB) nor time (2h, 90m)"
        ) from None


@dataclass(frozen=True)
class StoreDown:
    """The campaign's ``store_down``: when a site stops trying a store (site.breaker)."""

    after_failures: int = 3
    stall_s: float = 60.0  # 0: off
    wait_s: float = 0.0  # 0: stop the run; > 0: wait for the store this long


def _store_down(cfg: Mapping[str, Any]) -> StoreDown:
    def seconds(key: str, value: str | int | float) -> float:
        if value == "off" or value in (0, "0", "0s", "0m", "0h"):
            return 0.0
        try:
            return parse_duration(value)
        except SizeError as err:
            raise ConfigError(f"store_down.{key}: {err}") from None

    return StoreDown(
        after_failures=_positive_int("store_down.after_failures", cfg.get("after_failures", 3)),
        stall_s=seconds("stall", cfg.get("stall", "60s")),
        wait_s=seconds("wait", cfg.get("wait", "0s")),
    )


def _copy_timeout(value: str | int | float) -> float | None:
    if value == "auto":
        return None
    try:
        return parse_duration(value)
    except SizeError as err:
        raise ConfigError(f"copy_timeout: {err}") from None


def _compare_with(raw: Any, base: Path) -> Path | None:
    """The transfers.tsv of the campaign named by ``compare_with`` (a results directory or
    the file itself), checked before any work: a report would otherwise fail at the end."""
    if not raw:
        return None
    path = Path(str(raw)).expanduser()
    path = path if path.is_absolute() else base / path
    table = path / "transfers.tsv" if path.is_dir() else path
    if not table.is_file():
        raise ConfigError(
            f"compare_with: {raw} has no transfers.tsv (give another campaign's results "
            "directory, e.g. results/<campaign>, after its report was made)"
        )
    return table


def load_campaign(cfg: Mapping[str, Any], base: Path | None = None) -> Campaign:
    """Build a checked Campaign from a campaign file's mapping; ConfigError on the first problem.

    The mapping is the whole campaign: it is checked against the schema (unknown keys
    refused), the schema's defaults fill what it leaves out, and nothing else is merged in.
    ``base`` resolves relative scratch paths (the working directory by default), so every
    job of a run, wherever it executes, agrees on where bulk data lives.
    """
    # imported here: a transfer job rebuilds its spec from JSON and never reads YAML
    from cloudbench.campaign.schema import SchemaError, validate

    try:
        cfg = validate(cfg)
    except SchemaError as err:
        raise ConfigError(str(err)) from None
    _no_credentials(cfg)
    base = Path.cwd() if base is None else base
    series = _name("campaign", cfg.get("campaign"))
    occurrence = cfg.get("occurrence")
    name = f"{series}@{_name('occurrence', str(occurrence))}" if occurrence else series
    bucket = cfg["bucket"]
    if not bucket.strip("/"):
        raise ConfigError(f"bucket: must be a non-empty path, got {bucket!r}")
    ds = cfg["dataset"]
    dataset_name = _name("dataset.name", ds.get("name", series))
    files = _positive_int("dataset.files", ds["files"])
    file_bytes = _size(cfg, "dataset.size", ds["size"])
    if file_bytes < 1:
        raise ConfigError(f"dataset.size: must be at least 1 byte, got {ds.get('size')!r}")

    strategies = tuple(cfg["strategies"])
    if not strategies:
        raise ConfigError("strategies: at least one of plain, chunked, multithread")
    for s in strategies:
        if s not in STRATEGIES:
            raise ConfigError(
                f"strategies: unknown strategy {s!r} (known: {', '.join(STRATEGIES)})"
            )
    if len(set(strategies)) != len(strategies):
        raise ConfigError(f"strategies: listed twice in {list(strategies)!r}")

    dataset_layout = ds["layout"]
    if dataset_layout == NESTED:
        for s in strategies:
            if s in ("chunked", "multithread"):
                why = (
                    "a small file has nothing to split"
                    if s == "chunked"
                    else "multi-thread streams only split files above the cutoff"
                )
                raise ConfigError(
                    f"strategies: {s} is refused for dataset.layout nested (many small "
                    f"files): {why}; use plain"
                )
    raw_chunks = ds["chunk_sizes"] if "chunked" in strategies else []
    chunk_sizes = tuple(_size(cfg, "dataset.chunk_sizes", c) for c in raw_chunks)
    if "chunked" in strategies and not chunk_sizes:
        raise ConfigError("dataset.chunk_sizes: strategy 'chunked' needs at least one chunk size")
    for raw, c in zip(raw_chunks, chunk_sizes, strict=True):
        if c < 1:
            raise ConfigError(f"dataset.chunk_sizes: {raw!r} must be at least 1 byte")
        if c > file_bytes:
            raise ConfigError(
                f"dataset.chunk_sizes: chunk {raw!r} is larger than the file size "
                f"{ds.get('size')!r}"
            )
    if len(set(chunk_sizes)) != len(chunk_sizes):
        raise ConfigError(f"dataset.chunk_sizes: the same size listed twice in {raw_chunks!r}")

    repeats, precision = _repeats(cfg["repeats"], cfg["precision"])
    rcfg = cfg["rclone"]
    flags = _flags(rcfg["flags"])
    cutoff = _size_or_auto(
        cfg, "rclone.multi_thread_cutoff", min(rc.RCLONE_MULTI_THREAD_CUTOFF, file_bytes)
    )
    if "multithread" in strategies and cutoff > file_bytes:
        raise ConfigError(
            f"rclone.multi_thread_cutoff: {rcfg['multi_thread_cutoff']!r} is above the file size "
            f"{ds['size']!r}, so strategy multithread would move each file as one stream; "
            f"set it to at most {ds['size']!r}, or to auto"
        )

    part_bytes = _size_or_auto(
        cfg, "rclone.multi_thread_chunk_size", rc.auto_part_bytes(file_bytes)
    )
    default_clients = _counts("clients", cfg["clients"])
    sites = []
    for sname, s in cfg["sites"].items():
        _name("sites", sname)
        if sname in RESERVED_SITE_NAMES:
            raise ConfigError(
                f"sites: {sname!r} is reserved (site: all / site: none); rename the site"
            )
        path = Path(str(s["scratch"])).expanduser()
        sites.append(
            Site(
                name=sname,
                upload=s["upload"],
                download=s["download"],
                scratch=path if path.is_absolute() else base / path,
                location=_location(f"sites.{sname}.location", s.get("location")),
                launch=tuple(sorted((s.get("launch") or {}).items())),
                clients=_counts(f"sites.{sname}.clients", s["clients"])
                if "clients" in s
                else default_clients,
            )
        )
        if max(sites[-1].clients) > files:
            raise ConfigError(
                f"{'sites.' + sname + '.clients' if 'clients' in s else 'clients'}: "
                f"{max(sites[-1].clients)} clients need at least as many files, and "
                f"dataset.files is {files} (each client moves its own files)"
            )
    if not sites:
        raise ConfigError("sites: at least one site is needed")
    uploaders = [s.name for s in sites if s.upload]
    if not uploaders:
        raise ConfigError("sites: no upload site (set upload: true on exactly one site)")
    if len(uploaders) > 1:
        raise ConfigError(f"sites: more than one upload site: {', '.join(uploaders)}")

    chosen_tools, remotes = _tools(cfg, strategies, _remotes(cfg))
    campaign = Campaign(
        name=name,
        bucket=bucket.strip("/"),
        remotes=remotes,
        dataset_name=dataset_name,
        files=files,
        file_bytes=file_bytes,
        chunk_sizes=chunk_sizes,
        strategies=strategies,
        repeats=repeats,
        precision=precision,
        seed=str(ds.get("seed", series)),  # a series' occurrences move the same bytes
        rclone_flags=flags,
        multi_thread_cutoff=cutoff,
        multi_thread_chunk_size=part_bytes,
        min_rclone_version=str(rcfg["min_version"]),
        sites=tuple(sites),
        site=str(cfg["site"]),
        concurrency=_concurrency(cfg, strategies),
        start_tolerance_s=float(cfg["start_tolerance_s"]),
        copy_timeout_s=_copy_timeout(cfg.get("copy_timeout", "auto")),
        store_down=_store_down(cfg.get("store_down") or {}),
        tools=chosen_tools,
        command_template=cfg.get("command_template"),
        dataset_layout=dataset_layout,
        compare_with=_compare_with(cfg.get("compare_with"), base),
        compare_margin=_share(
            "compare_margin", cfg["compare_margin"], "of the median rate", "5% or 0.05", zero=True
        ),
    )
    if occurrence:
        campaign = replace(campaign, series=series)
    if "thresholds" in cfg:
        t = cfg["thresholds"]
        good, poor = t.get("good"), t.get("poor")
        if good is not None and poor is not None and poor > good:
            raise ConfigError(f"thresholds: poor ({poor} MB/s) is above good ({good} MB/s)")
        campaign = replace(campaign, thresholds=(good, poor))
    if "tune" in cfg:
        campaign = replace(campaign, tune=_tune(cfg["tune"], campaign))
    if "estimate" in cfg and _size(cfg, "estimate.size", cfg["estimate"]["size"]) < 1:
        raise ConfigError("estimate.size: at least 1 byte")  # the report's block reads it
    if campaign.site not in RESERVED_SITE_NAMES:
        campaign.site_named(campaign.site)  # raises with the list of known sites
    return campaign
