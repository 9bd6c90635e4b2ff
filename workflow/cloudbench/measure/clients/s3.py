"""What every S3-only client shares: the S3 side of the rclone remote a campaign names, and
the AWS variables that hand its credentials over.

The S3 clients get their credentials from the rclone remote the campaign already names
(``RCLONE_CONFIG_<NAME>_*`` variables, or rclone's config file read in-process through
``rclone config dump``), handed over in each tool's own environment variables. They never
appear in an argument list (``ps`` shows those to every user of a node), a log or a record.
A client module subclasses :class:`S3Client` and builds only its own command line.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from cloudbench.campaign.clients import split_remote
from cloudbench.campaign.rclone_options import remote_env_prefix
from cloudbench.measure.clients.base import (
    ClientError,
    CopyRequest,
    ExternalClient,
    ToolCommand,
    shell_lines,
    sides,
)

DEFAULT_REGION = "us-east-1"  # rclone's and the AWS SDKs' default when a remote names none
# Variables that would make a tool read a profile or credentials other than the remote's.
_AWS_SELECTORS = ("AWS_PROFILE", "AWS_DEFAULT_PROFILE")
# Where the S3 tools read a remote's keys: a user's command names them, never their values.
KEY_ID_VARIABLE = "AWS_ACCESS_KEY_ID"
SECRET_VARIABLE = "AWS_SECRET_ACCESS_KEY"
TOKEN_VARIABLE = "AWS_SESSION_TOKEN"


@dataclass(frozen=True)
class S3Access:
    """How to reach an rclone S3 remote with another S3 client.

    The credentials are excluded from ``repr`` so an accidental print or traceback cannot
    show them; :func:`public` is what may be recorded.
    """

    remote: str
    endpoint: str | None  # None: the tool's AWS default for ``region``
    region: str
    path_style: bool
    access_key: str | None = field(default=None, repr=False)
    secret_key: str | None = field(default=None, repr=False)
    session_token: str | None = field(default=None, repr=False)

    def public(self) -> dict[str, object]:
        """What a record may keep: where and how, never who."""
        return {
            "remote": self.remote,
            "endpoint": self.endpoint,
            "region": self.region,
            "path_style": self.path_style,
        }


# --- the S3 side of an rclone remote -------------------------------------------------


def remote_name(remote: str) -> str:
    """``mys3`` from ``mys3:bucket/prefix``; a path or connection string is refused."""
    if remote.startswith(":"):
        raise ClientError(
            f"connection-string remotes (:{remote[1:].split(',')[0].split(':')[0]},...:) cannot "
            "be read by other tools: "
            "define a named remote (RCLONE_CONFIG_<NAME>_* variables or rclone config)"
        )
    split = split_remote(remote)
    if split is None:
        raise ClientError(f"{remote!r} is not an rclone remote (name:bucket/path)")
    return split[0]


def remote_options(
    name: str, config_dump: Mapping[str, Mapping[str, str]], environ: Mapping[str, str]
) -> dict[str, str]:
    """The remote's options as rclone resolves them: ``RCLONE_CONFIG_<NAME>_<KEY>`` over the
    config file's section over the backend's ``RCLONE_<TYPE>_<KEY>`` variables.

    (rclone's precedence; command-line flags such as ``--s3-endpoint`` in a campaign's
    rclone flags are not seen here, so such a campaign gets its endpoint from the config.)
    """
    prefix = remote_env_prefix(name)
    from_env = {k[len(prefix) :].lower(): v for k, v in environ.items() if k.startswith(prefix)}
    from_file = {k.lower(): str(v) for k, v in (config_dump.get(name) or {}).items()}
    kind = from_env.get("type") or from_file.get("type")
    if not kind:
        return {}
    backend = f"RCLONE_{kind.upper()}_"
    from_backend = {
        k[len(backend) :].lower(): v for k, v in environ.items() if k.startswith(backend)
    }
    return {**from_backend, **from_file, **from_env}


def _truthy(value: str | None, default: bool) -> bool:
    if value is None or value == "":
        return default
    return value.strip().lower() in ("true", "1", "yes", "on")


def not_configured(name: str) -> str:
    """What to do about a remote that neither rclone's config nor the environment defines
    (a typo, a config file on another host): rclone's own "didn't find section in config
    file" does not say, and a user read "only S3 remotes can use s5cmd" for a misspelled
    name."""
    var = remote_env_prefix(name)
    return (
        f"remote '{name}:' is not configured here: define it with `rclone config` or the "
        f"{var}* variables ({var}TYPE=s3, ...)"
    )


def s3_access_from(name: str, options: Mapping[str, str], tool: str = "s5cmd/aws") -> S3Access:
    """Endpoint, region, addressing style and keys of an S3 remote from its options.

    rclone's defaults: path-style addressing unless ``force_path_style = false``, region
    us-east-1, an endpoint without a scheme is https. With ``env_auth`` the keys are left
    to the tools' own AWS variables and files, as rclone leaves them.
    """
    kind = options.get("type")
    if not kind:
        raise ClientError(not_configured(name))
    if kind != "s3":
        raise ClientError(
            f"remote {name!r} is of type {kind}: only S3 remotes can use {tool} (use rclone "
            "or command)"
        )
    endpoint = options.get("endpoint") or None
    if endpoint and "://" not in endpoint:
        endpoint = "https://" + endpoint
    return S3Access(
        remote=name,
        endpoint=endpoint.rstrip("/") if endpoint else None,
        region=options.get("region") or DEFAULT_REGION,
        path_style=_truthy(options.get("force_path_style"), True),
        access_key=options.get("access_key_id") or None,
        secret_key=options.get("secret_access_key") or None,
        session_token=options.get("session_token") or None,
    )


def rclone_config_dump(binary: str) -> dict[str, dict[str, str]]:
    """rclone's config file as a dict, parsed here and never printed: it holds secrets.

    (Remotes defined only by environment variables are not in it; see remote_options.)
    """
    try:
        res = subprocess.run([binary, "config", "dump"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError) as err:
        raise ClientError(f"cannot run {binary} config dump: {type(err).__name__}") from None
    if res.returncode != 0:
        return {}
    try:
        return json.loads(res.stdout or "{}")
    except json.JSONDecodeError:
        return {}


def options_here(
    remote: str, binary: str | None = None, environ: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The options of ``remote``'s rclone remote in this environment (its variables, else
    rclone's config file); empty when neither defines it."""
    from cloudbench.measure import rclone as rc

    env = os.environ if environ is None else environ
    name = remote_name(remote)
    dump: Mapping[str, Mapping[str, str]] = {}
    if not env.get(remote_env_prefix(name) + "TYPE"):  # defined in the config file, if anywhere
        dump = rclone_config_dump(binary or rc.find_rclone())
    return remote_options(name, dump, env)


def s3_access(
    remote: str,
    *,
    tool: str = "s5cmd/aws",
    binary: str | None = None,
    environ: Mapping[str, str] | None = None,
) -> S3Access:
    """The S3 side of ``remote`` (``name:bucket/path``), for ``tool``'s error message."""
    return s3_access_from(remote_name(remote), options_here(remote, binary, environ), tool)


def s3_url(remote_path: str) -> str:
    """``s3://bucket/prefix/`` for ``name:bucket/prefix``: the S3 tools' spelling."""
    split = split_remote(remote_path)
    path = (split[1] if split else remote_path).strip("/")
    if not path:
        raise ClientError(f"{remote_path!r} names no bucket: use name:bucket/prefix")
    return f"s3://{path}/"


# --- the environment every S3 client gets ----------------------------------------------


def aws_env(access: S3Access) -> dict[str, str]:
    """The AWS SDK variables the S3 tools read (s5cmd reads AWS_REGION, the CLI
    AWS_DEFAULT_REGION). Without keys in the remote (env_auth) nothing is set, so the
    tools find the user's own AWS variables or instance role, as rclone would. (With keys,
    the user's own session token is dropped too: see :func:`aws_remove`.)"""
    env = {"AWS_REGION": access.region, "AWS_DEFAULT_REGION": access.region}
    if access.access_key and access.secret_key:
        env[KEY_ID_VARIABLE] = access.access_key
        env[SECRET_VARIABLE] = access.secret_key
        if access.session_token:
            env[TOKEN_VARIABLE] = access.session_token
    return env


def endpoint_placeholder(name: str) -> str:
    """The endpoint written in a user's command for a remote this environment does not
    define: a URL (the tools parse it) that is plainly not one to use."""
    return f"https://<{name}-endpoint>"


def user_access(
    remote: str, tool: str, given: S3Access | None = None
) -> tuple[S3Access, list[str]]:
    """Where a user's command reaches ``remote``'s store, without its keys, and the comment
    lines that go with it: which variables carry the credentials (never their values), and,
    for a remote not defined here (or no rclone to read its config), a placeholder endpoint
    and region to replace. A remote of another type is refused (ClientError), as in a
    measurement."""
    from cloudbench.measure.rclone import RcloneError

    name = remote_name(remote)
    notes = []
    if given is None:
        try:
            options = options_here(remote)
        except (ClientError, RcloneError):  # no rclone here to read its config file
            options = {}
        if options:
            given = s3_access_from(name, options, tool)
        else:
            given = S3Access(name, endpoint_placeholder(name), DEFAULT_REGION, path_style=True)
            notes.append(
                f"# the rclone remote {name} is not defined here: replace "
                f"{given.endpoint} with its S3 endpoint (leave --endpoint-url out for AWS "
                f"itself) and {DEFAULT_REGION} with its region"
            )
    keys = [KEY_ID_VARIABLE, SECRET_VARIABLE] + ([TOKEN_VARIABLE] if given.session_token else [])
    named = f"{', '.join(keys[:-1])} and {keys[-1]}"
    if given.access_key and given.secret_key:
        whose = f"to the keys of the rclone remote {name}"
    elif notes:  # not defined here: whose keys is not known
        whose = "to your keys for the store"
    else:
        whose = f"(or a profile or instance role: the rclone remote {name} uses env_auth)"
    notes.append(f"# credentials: set {named} {whose}; never on the command line")
    return replace(given, access_key=None, secret_key=None, session_token=None), notes


def aws_remove(access: S3Access) -> tuple[str, ...]:
    """The caller's AWS variables the tools must not see: a profile would override the
    remote's keys, and with the remote's keys a session token of the user's own (not the
    remote's) would be sent with them and refused."""
    if access.access_key and access.secret_key and not access.session_token:
        return (*_AWS_SELECTORS, "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN")
    return _AWS_SELECTORS


def endpoint_args(access: S3Access) -> list[str]:
    return ["--endpoint-url", access.endpoint] if access.endpoint else []


@dataclass(frozen=True)
class S3Copy:
    """One S3 client's copy, as its module sees it: everything resolved, nothing secret
    but ``access``'s keys (which go to the environment, never to argv)."""

    binary: str
    access: S3Access
    direction: str  # upload | download
    local: str  # the local directory
    url: str  # s3://bucket/prefix/
    concurrency: int  # objects at once
    files: Sequence[str] | None  # names under both; None: everything under the prefix
    workdir: Path
    streams: int = 1  # parts of one object at once, where the tool can
    instrumented: bool = True  # False: a user's command, no output for cloudbench to read


class S3Client(ExternalClient):
    """A client that speaks S3 only: its credentials and endpoint come from the rclone
    remote's S3 side, handed over in the AWS variables (:func:`aws_env`); its module
    builds only its argv (:meth:`s3_command`)."""

    backend = "s3"

    def s3_command(self, copy: S3Copy) -> tuple[list[str], dict[str, str], dict[Path, str]]:
        """(argv, variables beyond :func:`aws_env`, small files) of one copy."""
        raise NotImplementedError

    def command(self, copy: CopyRequest) -> ToolCommand:
        direction, local, remote = sides(copy.src, copy.dst)
        access = copy.access or s3_access(remote, tool=self.name)
        s3 = S3Copy(
            copy.binary or self.find(), access, direction, local, s3_url(remote),
            max(1, copy.concurrency), copy.files, copy.workdir, max(1, copy.streams),
            copy.instrumented,
        )  # fmt: skip
        argv, extra, out_files = self.s3_command(s3)
        env = {**aws_env(access), **extra}
        return ToolCommand(self.name, argv, env, out_files, aws_remove(access))

    def user_command(self, copy: CopyRequest) -> list[str]:
        """The module's own command line for the whole directory, its binary by name, its
        config files written by ``printf`` lines, its variables in front of it; the remote's
        keys only named in a comment (:func:`user_access`)."""
        _direction, _local, remote = sides(copy.src, copy.dst)
        access, notes = user_access(remote, self.name, copy.access)
        plain = self.binary.name if self.binary else self.name
        cmd = self.command(
            replace(copy, access=access, binary=plain, files=None, instrumented=False)
        )
        return [*notes, *shell_lines(cmd)]

    def check(self, remote_prefixes: Sequence[str], template: str | None) -> list[str]:
        """Installed, and every remote's S3 side readable (an S3 remote, named, its options
        found): one line per problem."""
        problems = super().check(remote_prefixes, template)
        for prefix in remote_prefixes:
            try:
                s3_access(prefix, tool=self.name)
            except ClientError as err:
                problems.append(f"tools: {err}")
        return problems
