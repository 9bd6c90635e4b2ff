"""Keep credentials out of everything cloudbench writes.

cloudbench never puts a credential on a command line; rclone reads them from its config file
or from ``RCLONE_CONFIG_<REMOTE>_<KEY>`` variables.  What rclone itself writes (its log, an
error message that echoes a key) is scrubbed here before it is kept, and a remote spelled
with a credential in it is refused outright.

Which rclone settings are credentials is rclone's own word: every backend option that
``rclone config providers`` marks ``Sensitive`` or ``IsPassword`` (``b2 key``, ``sftp
key_pem``, ``s3 sse_customer_key``, also ``sftp host`` and ``user``, which rclone's
``config redacted`` hides too), whether it is spelled as a variable (``RCLONE_B2_KEY``,
``RCLONE_CONFIG_<REMOTE>_KEY``), a flag (``--b2-key``) or a line of rclone's config file.
``rclone_sensitive.py`` is a snapshot of that metadata from the pinned rclone (a test checks
it against the installed one). This process's own environment and config file (redacting a
log, a record's ``rclone_env``, what s5cmd and the AWS CLI may see) are judged by the rclone
in use, asked once per process, with the snapshot added; pure checks (a campaign's flags and
values, an explicit mapping) use the snapshot and start no process.

A name heuristic (``..._TOKEN``, ``..._PASSWORD``, ``..._KEY``) is kept on top, for rclone's
global settings (``RCLONE_CONFIG_PASS``, ``RCLONE_PASSWORD_COMMAND``), for options rclone
does not mark (``s3 ibm_api_key``) and for other clouds' SDK variables.
"""

from __future__ import annotations

import functools
import json
import os
import re
import shutil
import subprocess
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cloudbench.campaign import rclone_sensitive as _snapshot

REDACTED = "***"
MIN_SECRET_LEN = 6  # shorter values would redact ordinary words

# --- non-rclone variables: by name ---------------------------------------------------------

_CLOUD_PREFIXES = ("AWS_", "AZURE_", "GOOGLE_", "B2_", "OS_")
_SECRET_NAME = re.compile(
    r"(SECRET|PASSWORD|PASS|TOKEN|ACCESS_KEY|ACCOUNT_KEY|SAS_URL|API_KEY|KEY_ID|PRIVATE_KEY|"
    r"SESSION|CREDENTIAL|AUTH_KEY|CONNECTION_STRING|_KEY$)",
    re.IGNORECASE,
)

# --- rclone settings: rclone's metadata, then a heuristic by words -------------------------

# rclone's global settings that hold or fetch a credential; its metadata marks only
# client_pass. They are variables or flags, never remote options.
RCLONE_GLOBAL_SECRETS = frozenset(
    {
        "RCLONE_CONFIG_PASS",  # decrypts the config file
        "RCLONE_PASSWORD_COMMAND",
        "RCLONE_CLIENT_PASS",
        "RCLONE_RC_PASS",
        "RCLONE_METRICS_PASS",
        "RCLONE_RC_USER",
        "RCLONE_METRICS_USER",
    }
)
_HEADER_VARIABLES = ("RCLONE_HEADER", "RCLONE_HEADER_UPLOAD", "RCLONE_HEADER_DOWNLOAD")
_SECRET_HEADER = re.compile(r"authorization|cookie|token|secret|api-?key", re.IGNORECASE)
_SECRET_WORDS = {
    "secret", "password", "passwd", "pass", "passphrase", "token", "credential",
    "credentials", "session", "mnemonic",
}  # fmt: skip
_NOT_A_VALUE = {"url", "expiry", "duration", "name", "type"}  # token_url, role_session_name
_KEY_TAILS = ("key", "key_id", "key_pem", "key_md5", "key_sha256", "key_base64", "sas_url")


def _heuristic(option: str) -> bool:
    """A setting whose name says it holds a credential, by whole words (``bypass_...`` is
    not ``pass``): rclone leaves some unmarked (``s3 ibm_api_key``, ``linkbox web_token``,
    ``oracleobjectstorage sse_customer_key``)."""
    name = option.lower().replace("-", "_").replace(".", "_")
    words = name.split("_")
    if set(words) & _SECRET_WORDS and words[-1] not in _NOT_A_VALUE:
        return True
    return ("_" + name).endswith(tuple("_" + t for t in _KEY_TAILS))


def _env_word(text: str) -> str:
    """How rclone spells an option or prefix inside a variable name."""
    return re.sub(r"[-.]", "_", text).upper()


@dataclass(frozen=True)
class RcloneSensitive:
    """rclone's sensitive options: backend type -> (flag/variable prefix, option names)."""

    backends: Mapping[str, tuple[str, frozenset[str]]]
    global_options: frozenset[str] = frozenset()  # options without a prefix (--copy-links)

    @functools.cached_property
    def variables(self) -> frozenset[str]:
        """``RCLONE_<PREFIX>_<OPTION>`` of every sensitive backend option."""
        out = {f"RCLONE_{_env_word(opt)}" for opt in self.global_options}
        for prefix, options in self.backends.values():
            out |= {f"RCLONE_{_env_word(prefix)}_{_env_word(opt)}" for opt in options}
        return frozenset(out)

    @functools.cached_property
    def any_backend(self) -> frozenset[str]:
        """Option names (``KEY``, ``KEY_PEM``) sensitive in at least one backend."""
        out = {_env_word(o) for _, options in self.backends.values() for o in options}
        return frozenset(out | {_env_word(o) for o in self.global_options})

    def of_type(self, kind: str | None) -> frozenset[str]:
        """Option names sensitive for a remote of ``kind``; every backend's when unknown."""
        found = self.backends.get((kind or "").strip().lower())
        if found is None:
            return self.any_backend
        return frozenset(_env_word(o) for o in found[1])

    def merged(self, other: RcloneSensitive) -> RcloneSensitive:
        backends = dict(self.backends)
        for kind, (prefix, options) in other.backends.items():
            mine = backends.get(kind)
            backends[kind] = (mine[0], mine[1] | options) if mine else (prefix, options)
        return RcloneSensitive(backends, self.global_options | other.global_options)


def parse_providers(text: str) -> RcloneSensitive:
    """The sensitive options in ``rclone config providers`` output (JSON)."""
    providers = json.loads(text)
    if not isinstance(providers, list) or not providers:
        raise ValueError("rclone config providers printed no backends")
    backends: dict[str, tuple[str, frozenset[str]]] = {}
    global_options: set[str] = set()
    for p in providers:
        options = set()
        for o in p.get("Options") or ():
            if o.get("Sensitive") or o.get("IsPassword"):
                options.add(o["Name"])
                if o.get("NoPrefix"):
                    global_options.add(o["Name"])
        for kind in [p["Name"], *(p.get("Aliases") or ())]:
            if kind not in backends:
                backends[kind] = (p.get("Prefix") or p["Name"], frozenset(options))
    return RcloneSensitive(backends, frozenset(global_options))


@functools.lru_cache(maxsize=1)
def snapshot() -> RcloneSensitive:
    """The committed snapshot (rclone_sensitive.py) of the pinned rclone's metadata."""
    return RcloneSensitive(
        {k: (prefix, frozenset(opts)) for k, (prefix, opts) in _snapshot.BACKENDS.items()},
        frozenset(_snapshot.GLOBAL_OPTIONS),
    )


def snapshot_source(binary: str) -> str:
    """rclone_sensitive.py's text, from ``binary`` (the pinned rclone): ``python -c 'from
    cloudbench.campaign.secrets import snapshot_source as s; print(s("rclone"))'``."""
    res = subprocess.run(
        [binary, "version"], capture_output=True, text=True, timeout=60, check=True
    )
    version = res.stdout.split()[1].lstrip("v")
    meta = parse_providers(_providers_json(binary))
    lines = [
        f'"""rclone {version}\'s sensitive options (``rclone config providers``: Sensitive or',
        "IsPassword), generated by cloudbench.campaign.secrets.snapshot_source; do not edit.",
        "Used when no rclone answers, and added to what the rclone in use says;",
        'tests/test_secrets.py checks it against the installed rclone."""',
        "",
        f'RCLONE_VERSION = "{version}"',
        "# backend type: (flag and variable prefix, sensitive options)",
        "BACKENDS: dict[str, tuple[str, tuple[str, ...]]] = {",
    ]
    for kind in sorted(meta.backends):
        prefix, options = meta.backends[kind]
        opts = "".join(f"{json.dumps(o)}, " for o in sorted(options))
        lines.append(f"    {json.dumps(kind)}: ({json.dumps(prefix)}, ({opts.rstrip()})),")
    lines += ["}", "# options without a backend prefix (flag --<option>)"]
    lines.append(
        "GLOBAL_OPTIONS: tuple[str, ...] = ("
        + "".join(f"{json.dumps(o)}, " for o in sorted(meta.global_options)).rstrip()
        + ")"
    )
    return "\n".join(lines) + "\n"


def _providers_json(binary: str) -> str:
    return subprocess.run(
        [binary, "config", "providers"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
        stdin=subprocess.DEVNULL,
    ).stdout


def _ask_sensitive(binary: str) -> dict[str, Any]:
    meta = parse_providers(_providers_json(binary))
    return {
        "backends": {k: [p, sorted(o)] for k, (p, o) in meta.backends.items()},
        "global_options": sorted(meta.global_options),
    }


@functools.lru_cache(maxsize=8)
def _from_binary(binary: str) -> RcloneSensitive:
    """What ``binary`` says (~0.1 s the first time, then remembered per binary), with the
    snapshot added; the snapshot alone if it cannot say (missing, too old, not rclone)."""
    from cloudbench import binaries

    try:
        said = binaries.remembered(binary, "rclone-sensitive", _ask_sensitive)
        meta = RcloneSensitive(
            {k: (p, frozenset(o)) for k, (p, o) in said["backends"].items()},
            frozenset(said["global_options"]),
        )
        return meta.merged(snapshot())
    except (OSError, subprocess.SubprocessError, ValueError, KeyError, TypeError):
        return snapshot()


def _binary() -> str | None:
    from cloudbench import binaries
    from cloudbench.campaign.rclone_options import RCLONE

    try:
        return binaries.find(RCLONE)
    except binaries.BinaryError:
        return None


def rclone_sensitive(binary: str | None = None) -> RcloneSensitive:
    """rclone's sensitive options, from ``binary`` (default: the rclone cloudbench runs),
    with the snapshot's added; the snapshot alone when there is no rclone."""
    binary = binary or _binary()
    return _from_binary(binary) if binary else snapshot()


def _meta_for(environ: Mapping[str, str] | None) -> RcloneSensitive:
    """This process's own environment is judged by the rclone in use (asked once per
    process); an explicit mapping, like the pure checks of a campaign file, by the snapshot
    of the pinned rclone, without starting a process (the two agree: tests/test_secrets.py)."""
    return rclone_sensitive() if environ is None else snapshot()


def _config_option(rest: str, environ: Mapping[str, str], meta: RcloneSensitive) -> bool:
    """``rest`` of ``RCLONE_CONFIG_<rest>`` names a sensitive option of a remote. A remote
    the environment defines (``RCLONE_CONFIG_<REMOTE>_TYPE``) is judged by its backend;
    otherwise (remote names may hold ``_``) every split is tried, by every backend."""
    defined = [k[14:-5] for k in environ if k.startswith("RCLONE_CONFIG_") and k.endswith("_TYPE")]
    known = [r for r in defined if r and rest.startswith(r + "_") and len(rest) > len(r) + 1]
    if known:
        remote = max(known, key=len)
        option = rest[len(remote) + 1 :]
        kind = environ.get(f"RCLONE_CONFIG_{remote}_TYPE")
        return option in meta.of_type(kind) or _heuristic(option)
    parts = rest.split("_")
    for i in range(1, len(parts)):
        option = "_".join(parts[i:])
        if option in meta.any_backend or _heuristic(option):
            return True
    return False


def rclone_secret(
    name: str, value: str = "", environ: Mapping[str, str] | None = None, *, meta=None
) -> bool:
    """Whether the rclone variable ``name`` (``RCLONE_...``) holds a credential: rclone's
    metadata ``meta`` (default: see :func:`_meta_for`), its global secrets, a ``--header``
    with an Authorization value, or a name that says so."""
    env = os.environ if environ is None else environ
    meta = meta or _meta_for(environ)
    upper = name.upper()
    if upper in RCLONE_GLOBAL_SECRETS or upper in meta.variables:
        return True
    if upper in _HEADER_VARIABLES:
        return bool(_SECRET_HEADER.search(value))
    if upper.startswith("RCLONE_CONFIG_"):
        return _config_option(upper[14:], env, meta)
    return _heuristic(upper[len("RCLONE_") :])


def secret_variable(
    name: str, environ: Mapping[str, str] | None = None, *, meta: RcloneSensitive | None = None
) -> bool:
    """Whether the variable ``name`` holds a credential for rclone or a cloud SDK (rclone's
    metadata for ``RCLONE_*``, the name for the SDKs' ``AWS_*``, ``AZURE_*``...)."""
    env = os.environ if environ is None else environ
    if name.upper().startswith("RCLONE_"):
        return rclone_secret(name, env.get(name, ""), env, meta=meta or _meta_for(environ))
    return (
        name.upper().startswith(_CLOUD_PREFIXES)
        and bool(_SECRET_NAME.search(name))
        and not name.upper().endswith(("_TYPE", "_PROVIDER"))
    )


def _parts(value: str) -> list[str]:
    """A secret value and the secrets inside it: a header's value after ``Name:`` and its
    token after ``Bearer``; an OAuth token's JSON fields (access_token, refresh_token)."""
    out = [value]
    header = re.match(r"([A-Za-z][A-Za-z0-9-]*)\s*:\s*(\S.*)$", value, re.DOTALL)
    if header and _SECRET_HEADER.search(header.group(1)):
        after = header.group(2).strip()
        out += [after, after.split()[-1]]
    if ";" in value and "=" in value:  # an Azure connection string: AccountKey=...
        for field in value.split(";"):
            k, _, v = field.partition("=")
            if v and re.search(r"key|secret|signature|token|pass", k, re.IGNORECASE):
                out.append(v)
    if value.lstrip().startswith("{"):
        try:
            fields = json.loads(value)
        except ValueError:
            fields = None
        if isinstance(fields, dict):
            out += [
                v
                for k, v in fields.items()
                if isinstance(v, str) and _heuristic(k)  # access_token, not token_type
            ]
    return [p for p in out if len(p) >= MIN_SECRET_LEN]


def _config_files(binary: str, config_file: str | None) -> list[Path]:
    """Where rclone looks for its config file: ``RCLONE_CONFIG``, else beside the binary,
    the XDG place, the home directory's dot file (rclone's own order)."""
    if config_file is not None:
        return [Path(config_file)] if config_file else []
    home = Path.home()
    xdg = os.environ.get("XDG_CONFIG_HOME") or str(home / ".config")
    beside = Path(os.path.realpath(shutil.which(binary) or binary)).parent
    return [beside / "rclone.conf", Path(xdg) / "rclone" / "rclone.conf", home / ".rclone.conf"]


@functools.lru_cache(maxsize=4)
def _config_dump(binary: str, config_file: str | None) -> tuple[tuple[str, str, str], ...]:
    """(remote, option, value) of rclone's config file, from one ``rclone config dump``
    per process (and config file): it holds secrets, so it is parsed and never printed.
    An encrypted file without its password, or no rclone, gives nothing; with no config
    file at all (remotes in the environment only) no process is started."""
    if not any(p.is_file() for p in _config_files(binary, config_file)):
        return ()
    try:
        res = subprocess.run(
            [binary, "config", "dump", "--ask-password=false"],
            capture_output=True,
            text=True,
            timeout=60,
            stdin=subprocess.DEVNULL,
        )
        dump = json.loads(res.stdout or "{}") if res.returncode == 0 else {}
    except (OSError, subprocess.SubprocessError, ValueError):
        return ()
    if not isinstance(dump, dict):
        return ()
    return tuple(
        (str(remote), str(k), str(v))
        for remote, options in dump.items()
        if isinstance(options, dict)
        for k, v in options.items()
    )


def config_secret_values(binary: str | None = None) -> list[str]:
    """Values in rclone's config file of every remote's sensitive options (by the remote's
    type), or options named like a credential."""
    binary = binary or _binary()
    if not binary:
        return []
    meta = rclone_sensitive(binary)
    rows = _config_dump(binary, os.environ.get("RCLONE_CONFIG"))
    types = {remote: v for remote, k, v in rows if k == "type"}
    out = []
    for remote, option, value in rows:
        sensitive = meta.of_type(types.get(remote))
        if _env_word(option) in sensitive or _heuristic(option):
            out += _parts(value)
    return out


def secret_values(
    environ: Mapping[str, str] | None = None, *, config_file: bool | None = None
) -> list[str]:
    """Values of environment variables that hold credentials for rclone or a cloud SDK,
    longest first (so a value that contains another is redacted whole).

    ``config_file``: also the sensitive values in rclone's config file (one ``rclone config
    dump`` per process). By default only for this process's own environment (``environ``
    None): an explicit mapping is judged alone.
    """
    env = os.environ if environ is None else environ
    meta = _meta_for(environ)
    out = []
    for name, value in env.items():
        if value and len(value) >= MIN_SECRET_LEN and secret_variable(name, env, meta=meta):
            out += _parts(value)
    if config_file if config_file is not None else environ is None:
        out += config_secret_values()
    return sorted(set(out), key=len, reverse=True)


def rclone_env_flags(environ: Mapping[str, str] | None = None) -> str:
    """rclone flags set in the environment (``RCLONE_BWLIMIT=8M``, ``RCLONE_S3_CHUNK_SIZE``):
    rclone applies them to every measured copy, so each record names them. Remote
    definitions (``RCLONE_CONFIG_*``) are left out; a credential by rclone's metadata or by
    its name keeps its value out (``RCLONE_B2_KEY=<set>``, ``RCLONE_PASSWORD_COMMAND=<set>``)."""
    env = os.environ if environ is None else environ
    meta = _meta_for(environ)
    out = []
    for name in sorted(env):
        if not name.startswith("RCLONE_") or name.startswith("RCLONE_CONFIG"):
            continue
        value = "<set>" if rclone_secret(name, env[name], env, meta=meta) else env[name]
        out.append(f"{name}={value}")
    return " ".join(out)


def without_credentials(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """``environ`` (default os.environ) without what another tool (s5cmd, the AWS CLI) has
    no business seeing: remote definitions (every ``RCLONE_CONFIG_*``), rclone credentials
    (rclone's metadata), other clouds' credentials (``AZURE_*``, ``GOOGLE_*``, ``OS_*``...).
    AWS_* variables stay: with an env_auth remote they are the tool's credentials. PATH,
    HOME, locale, proxies, TMPDIR and rclone's other settings are kept."""
    env = os.environ if environ is None else environ
    meta = _meta_for(environ)
    return {
        name: value
        for name, value in env.items()
        if not name.upper().startswith("RCLONE_CONFIG")
        and (name.upper().startswith("AWS_") or not secret_variable(name, env, meta=meta))
    }


def redact(text: str, secrets: Iterable[str]) -> str:
    for s in secrets:
        if s:
            text = text.replace(s, REDACTED)
    return text


def redact_file(path: Path, secrets: Iterable[str] | None = None) -> bool:
    """Scrub ``path`` in place; True if anything was replaced."""
    secrets = secret_values() if secrets is None else list(secrets)
    if not secrets or not path.exists():
        return False
    text = path.read_text(errors="replace")
    clean = redact(text, secrets)
    if clean == text:
        return False
    path.write_text(clean)
    return True


_SECRET_PARAM = re.compile(
    r"(secret_access_key|access_key_id|password|pass|token|key|account_key|sas_url|session_token)"
    r"\s*=",
    re.IGNORECASE,
)


def credential_in_remote(remote: str) -> str | None:
    """The credential parameter named in an rclone connection string, if any."""
    m = _SECRET_PARAM.search(remote)
    return m.group(1) if m else None


def credential_flag(flag: str) -> str | None:
    """The flag's name if it hands rclone a credential on the command line, else None.

    ``--s3-secret-access-key X`` would show in ``ps``, in job scripts and in every record
    that keeps the command; rclone reads the same values from its config or environment.
    Judged as its variable (``--b2-key`` as ``RCLONE_B2_KEY``), so flags and variables
    agree; by the snapshot of rclone's metadata, so reading a campaign starts no process.
    A ``--header`` carrying an Authorization value counts too.
    """
    name = flag.split("=", 1)[0].lstrip("-").lower()
    if not name:
        return None
    variable = "RCLONE_" + _env_word(name)
    value = flag.split("=", 1)[1] if "=" in flag else ""
    return f"--{name}" if rclone_secret(variable, value, {}, meta=snapshot()) else None


def credential_in_value(text: str, environ: Mapping[str, str] | None = None) -> str | None:
    """What makes ``text`` a credential: a ``key=...`` parameter, or a secret's actual value
    from the environment (named by its variable, never by the value). Pure (rclone's
    metadata from the snapshot): campaign files are checked as they are read."""
    found = credential_in_remote(text)
    if found:
        return f"{found}=..."
    env = os.environ if environ is None else environ
    for name, value in env.items():
        if value and len(value) >= MIN_SECRET_LEN and value in text:
            if secret_variable(name, env, meta=snapshot()):
                return f"the value of ${name}"
    return None
