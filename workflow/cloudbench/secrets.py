"""Keep credentials out of everything cloudbench writes.

cloudbench never puts a credential on a command line; rclone reads them from its config file
or from ``RCLONE_CONFIG_<REMOTE>_<KEY>`` variables.  What rclone itself writes (its log, an
error message that echoes a key) is scrubbed here before it is kept, and a remote spelled
with a credential in it is refused outright.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from pathlib import Path

REDACTED = "***"
_SECRET_NAME = re.compile(
    r"(SECRET|PASSWORD|PASS|TOKEN|ACCESS_KEY|ACCOUNT_KEY|SAS_URL|API_KEY|KEY_ID|PRIVATE_KEY|"
    r"SESSION|CREDENTIAL|AUTH_KEY)",
    re.IGNORECASE,
)
_SECRET_PARAM = re.compile(
    r"(secret_access_key|access_key_id|password|pass|token|key|account_key|sas_url|session_token)"
    r"\s*=",
    re.IGNORECASE,
)
MIN_SECRET_LEN = 6  # shorter values would redact ordinary words


def secret_values(environ: Mapping[str, str] | None = None) -> list[str]:
    """Values of environment variables that hold credentials for rclone or a cloud SDK."""
    env = os.environ if environ is None else environ
    out = []
    for name, value in env.items():
        if not value or len(value) < MIN_SECRET_LEN:
            continue
        relevant = name.startswith(("RCLONE_", "AWS_", "AZURE_", "GOOGLE_", "B2_", "OS_"))
        if relevant and _SECRET_NAME.search(name) and not name.endswith(("_TYPE", "_PROVIDER")):
            out.append(value)
    return sorted(set(out), key=len, reverse=True)


def rclone_env_flags(environ: Mapping[str, str] | None = None) -> str:
    """rclone flags set in the environment (``RCLONE_BWLIMIT=8M``, ``RCLONE_S3_CHUNK_SIZE``):
    rclone applies them to every measured copy, so each record names them. Remote
    definitions (``RCLONE_CONFIG_*``) are left out; a credential-like name keeps its value
    out (``RCLONE_PASSWORD_COMMAND=<set>``)."""
    env = os.environ if environ is None else environ
    out = []
    for name in sorted(env):
        if not name.startswith("RCLONE_") or name.startswith("RCLONE_CONFIG"):
            continue
        value = "<set>" if _SECRET_NAME.search(name) else env[name]
        out.append(f"{name}={value}")
    return " ".join(out)


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


def credential_in_remote(remote: str) -> str | None:
    """The credential parameter named in an rclone connection string, if any."""
    m = _SECRET_PARAM.search(remote)
    return m.group(1) if m else None


_SECRET_FLAG_PARTS = {"secret", "password", "pass", "passphrase", "token", "credentials"}
_SECRET_FLAG_ENDINGS = ("key", "key-pem", "key-id", "sas-url", "client-secret")


def credential_flag(flag: str) -> str | None:
    """The flag's name if it hands rclone a credential on the command line, else None.

    ``--s3-secret-access-key X`` would show in ``ps``, in job scripts and in every record
    that keeps the command; rclone reads the same values from its config or environment.
    A ``--header`` carrying an Authorization value counts too.
    """
    name = flag.split("=", 1)[0].lstrip("-").lower()
    if not name:
        return None
    parts = set(name.split("-"))
    if parts & _SECRET_FLAG_PARTS or name.endswith(_SECRET_FLAG_ENDINGS):
        return f"--{name}"
    if name.startswith("header") and "authorization" in flag.lower():
        return f"--{name}"
    return None


def credential_in_value(text: str, environ: Mapping[str, str] | None = None) -> str | None:
    """What makes ``text`` a credential: a ``key=...`` parameter, or a secret's actual value
    from the environment (named by its variable, never by the value)."""
    found = credential_in_remote(text)
    if found:
        return f"{found}=..."
    env = os.environ if environ is None else environ
    for name, value in env.items():
        if (
            value
            and len(value) >= MIN_SECRET_LEN
            and value in text
            and value in secret_values({name: value})
        ):
            return f"the value of ${name}"
    return None
