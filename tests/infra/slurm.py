"""Throw-away Slurm cluster (munged + slurmctld + one slurmd per node) for tests.

Several nodes on one host: each slurmd runs in a UTS namespace of its own (``unshare
--uts``) with the node's name as its hostname, on a port of its own, so ``srun --nodes=3``
places tasks on node1..node3 and each task sees its node's name in ``hostname`` and
``SLURMD_NODENAME``, as on a real cluster. They share this machine's cores, memory,
filesystem and network (127.0.0.1): placement is real, isolation is not.

Why this exists: the workflow's scheduler code paths (the Snakemake slurm
executor plugin, and the PBS scripts under ``profiles/tesseract``, which can be
exercised here through Slurm's torque/PBS wrappers ``qsub``/``qstat``/``qdel``)
can only be tested against a real scheduler.

Design decisions (all deliberate):

* Nothing is written to ``/etc``.  Every file lives under ``workdir``.  Clients
  find the cluster via ``SLURM_CONF`` (see :attr:`SlurmCluster.env`); the
  daemons get the same file via ``-f``.
* snakemake-executor-plugin-slurm-jobstep strips every ``SLURM_*`` variable
  except a few job ids (so ``SLURM_CONF`` too) before calling ``srun`` inside a
  job; srun would then look for the site's ``/etc/slurm/slurm.conf``. Inside
  this cluster's jobs, a TaskProlog puts a one-line ``srun`` first on PATH that
  sets ``SLURM_CONF`` to this cluster's file when it is unset and execs the
  real srun: the stand-in for a site's default config file, so several clusters
  run side by side (one per pytest-xdist worker) and nothing outside ``workdir``
  is written.
* munged listens on a private socket (``AuthInfo=socket=...``) and slurmctld
  and slurmd use free TCP ports instead of 6817/6818, so a stale or foreign
  Slurm/munge on the machine can neither break nor be hijacked by the test
  cluster.
* The daemons run in the foreground (``-F``/``-D``) as our children, so we
  know their pids.  The pids are also recorded in a registry file in the temp
  dir so that daemons leaked by a previous, crashed run are killed (by pid,
  after checking their command line) before a new cluster starts.
* Every wait is bounded.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from tests.infra.skewclock import faked_clock_env

REQUIRED_BINARIES: tuple[str, ...] = (
    "munged",
    "slurmctld",
    "slurmd",
    "sbatch",
    "squeue",
    "sinfo",
    "scancel",
    "scontrol",
    "unshare",
)
PARTITION = "debug"
CLUSTER_NAME = "cloudbench"
NODES = 3  # enough for 1, 2 and 3 clients on distinct nodes
NODE_PREFIX = "node"
#: A job submitted with this variable set to 1 (the PBS profile tests set it; qsub -V passes
#: it on) gets the variables real PBS sets, from a TaskProlog: Slurm's torque wrappers set
#: none. Other jobs of the same cluster are plain Slurm jobs.
PBS_STANDIN_VARIABLE = "CLOUDBENCH_TEST_PBS"
#: A job submitted with this variable set to ``<node>:<seconds>`` (``node2:1``) has that
#: node's tasks see a wall clock that many seconds behind: the stand-in for a node whose
#: clock is off (NTP down), from a TaskProlog that preloads libfaketime
#: (tests/infra/skewclock.py). Other nodes, and jobs without it, keep the real clock.
CLOCK_BEHIND_VARIABLE = "CLOUDBENCH_TEST_CLOCK_BEHIND"
#: The stand-in for PBS's pbsdsh (srun underneath), for PATH in PBS tests.
PBS_BIN = Path(__file__).resolve().parent / "pbs"
#: Registry of daemons started by this module (any run, any workdir), used to
#: kill leftovers of crashed runs.  Only pids whose cmdline still matches are
#: ever signalled.
REGISTRY = Path(tempfile.gettempdir()) / "cloudbench-test-slurm-daemons.json"
#: Unix socket paths are limited to 108 bytes; slurmd puts sockets into its
#: spool dir, so long workdirs get a short side directory for sockets.
_MAX_SOCKET_DIR_LEN = 60


class SlurmStartError(RuntimeError):
    """The test cluster did not come up; the message includes log tails."""


def missing_binaries() -> list[str]:
    """Names of required Slurm/munge executables not found on PATH."""
    return [b for b in REQUIRED_BINARIES if shutil.which(b) is None]


@dataclass
class SlurmCluster:
    """A running single-node test cluster.  Use :func:`start_slurm` to create.

    It is a context manager: ``with start_slurm(tmp) as cluster: ...`` stops it
    on exit.  :meth:`stop` is idempotent.
    """

    workdir: Path
    conf_path: Path
    partition: str
    hostname: str
    #: The node names (node1..nodeN), each a slurmd with that name as its hostname.
    nodes: tuple[str, ...]
    cores: int
    memory_mb: int
    #: Environment variables clients (sbatch, squeue, qsub, snakemake...) need.
    env: dict[str, str]
    #: Log files: munged, slurmctld, slurmd (+ the daemons' stdout/stderr).
    log_paths: dict[str, Path]
    pids: dict[str, int] = field(default_factory=dict)
    #: True if a job's nested ``srun`` without SLURM_CONF reaches this cluster (always:
    #: the TaskProlog's srun on PATH).
    nested_srun_ok: bool = True
    _procs: dict[str, subprocess.Popen] = field(default_factory=dict, repr=False)
    _extra_dirs: list[Path] = field(default_factory=list, repr=False)
    _stopped: bool = field(default=False, repr=False)

    # -- helpers for tests -------------------------------------------------
    def client_env(self, extra: Mapping[str, str] | None = None) -> dict[str, str]:
        """``os.environ`` + :attr:`env` (+ ``extra``), ready for subprocess."""
        env = dict(os.environ)
        env.update(self.env)
        if extra:
            env.update(extra)
        return env

    def run(
        self,
        args: Sequence[str],
        timeout: float = 30,
        check: bool = True,
        **kwargs,
    ) -> subprocess.CompletedProcess:
        """Run a client command against this cluster (text mode, captured)."""
        kwargs.setdefault("env", self.client_env())
        return subprocess.run(
            list(args),
            capture_output=True,
            text=True,
            timeout=timeout,
            check=check,
            **kwargs,
        )

    def job_ids(self) -> list[str]:
        """Ids of all jobs slurmctld still knows about (any state)."""
        out = self.run(["squeue", "-h", "-t", "all", "-o", "%i"], check=False)
        return [line.strip() for line in out.stdout.splitlines() if line.strip()]

    def active_job_ids(self, timeout: float = 30) -> list[str]:
        """Ids of pending/running/completing jobs."""
        out = self.run(
            ["squeue", "-h", "-t", "PD,R,CG,S,CF", "-o", "%i"],
            timeout=timeout,
            check=False,
        )
        return [line.strip() for line in out.stdout.splitlines() if line.strip()]

    def logs_tail(self, lines: int = 30) -> str:
        """Last lines of every log, for error messages."""
        return _logs_tail(self.log_paths, lines)

    # -- lifecycle ---------------------------------------------------------
    def stop(self, timeout: float = 30) -> None:
        """Cancel all jobs, then stop slurmd, slurmctld and munged (bounded)."""
        if self._stopped:
            return
        self._stopped = True
        deadline = time.monotonic() + timeout
        try:
            if self._procs.get("slurmctld") and self._procs["slurmctld"].poll() is None:
                subprocess.run(
                    ["scancel", "--full", "--partition", self.partition],
                    env=self.client_env(),
                    capture_output=True,
                    timeout=10,
                    check=False,
                )
                while time.monotonic() < deadline - 10 and self.active_job_ids(5):
                    time.sleep(0.5)
        except (subprocess.SubprocessError, OSError):
            pass  # best effort; the daemons are killed below regardless
        for name in (*(f"slurmd@{n}" for n in self.nodes), "slurmctld", "munged"):
            proc = self._procs.get(name)
            if proc is not None:
                _terminate(proc, max(1.0, min(8.0, deadline - time.monotonic())))
        # job processes / step daemons of our cluster that survived (they
        # carry our conf path in their environment); nothing else is touched.
        for pid in _our_job_pids(self.conf_path):
            _kill_pid(pid)
        _registry_remove(set(self.pids.values()))
        for d in self._extra_dirs:
            shutil.rmtree(d, ignore_errors=True)

    def __enter__(self) -> SlurmCluster:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


# ---------------------------------------------------------------------------
def start_slurm(workdir: Path, timeout: float = 60, nodes: int = NODES) -> SlurmCluster:
    """Write config + munge key into ``workdir``, start the daemons, wait idle.

    Raises :class:`SlurmStartError` (after stopping whatever started) if a
    node is not ``idle`` within ``timeout`` seconds.
    """
    missing = missing_binaries()
    if missing:
        raise SlurmStartError(f"missing binaries: {', '.join(missing)}")
    if os.geteuid() != 0:
        raise SlurmStartError("the test cluster must be started as root")
    kill_stale_daemons()

    workdir = Path(workdir).resolve()
    dirs = {n: workdir / n for n in ("etc", "log", "run", "state")}
    for d in dirs.values():
        d.mkdir(parents=True, exist_ok=True)
    extra_dirs: list[Path] = []
    sockdir = workdir / "sock"
    if len(str(sockdir)) > _MAX_SOCKET_DIR_LEN:
        sockdir = Path(tempfile.mkdtemp(prefix="slurm-", dir="/tmp"))
        extra_dirs.append(sockdir)
    sockdir.mkdir(parents=True, exist_ok=True)
    spool = sockdir / "slurmd"
    spool.mkdir(exist_ok=True)
    for d in (*dirs.values(), sockdir, workdir):
        d.chmod(0o755)  # munged refuses group/world-writable dirs

    key = dirs["etc"] / "munge.key"
    if not key.exists():
        key.write_bytes(os.urandom(1024))
    key.chmod(0o400)
    munge_socket = sockdir / "munge.socket"

    host = socket.gethostname().split(".")[0]
    cores = len(os.sched_getaffinity(0))
    memory_mb = _memory_mb()
    names = tuple(f"{NODE_PREFIX}{k}" for k in range(1, nodes + 1))
    ctld_port, *slurmd_ports = _free_ports(1 + nodes)
    logs = {
        "munged": dirs["log"] / "munged.log",
        "slurmctld": dirs["log"] / "slurmctld.log",
        **{f"slurmd@{n}": dirs["log"] / f"slurmd.{n}.log" for n in names},
    }
    conf = dirs["etc"] / "slurm.conf"
    prolog = dirs["etc"] / "task-prolog.sh"
    shim = dirs["etc"] / "bin"
    _srun_shim(shim, conf)
    prolog.write_text(_task_prolog(conf, dirs["run"] / "pbs-nodefiles", shim))
    prolog.chmod(0o755)
    conf.write_text(
        _slurm_conf(
            host=host,
            cores=cores,
            memory_mb=memory_mb,
            ctld_port=ctld_port,
            nodes=names,
            slurmd_ports=slurmd_ports,
            munge_socket=munge_socket,
            state=dirs["state"],
            spool=spool,
            run=dirs["run"],
            logs=logs,
            plugstack=dirs["etc"] / "plugstack.conf",
            task_prolog=prolog,
        )
    )
    # an empty plugstack.conf keeps /etc/slurm/plugstack.conf(.d) out
    (dirs["etc"] / "plugstack.conf").write_text("")

    cluster = SlurmCluster(
        workdir=workdir,
        conf_path=conf,
        partition=PARTITION,
        hostname=host,
        nodes=names,
        cores=cores,
        memory_mb=memory_mb,
        env={"SLURM_CONF": str(conf)},
        log_paths=dict(logs),
        _extra_dirs=extra_dirs,
    )
    daemon_env = cluster.client_env()
    commands = {
        "munged": [
            "munged",
            "-F",
            "--force",
            f"--socket={munge_socket}",
            f"--key-file={key}",
            f"--pid-file={dirs['run'] / 'munged.pid'}",
            f"--seed-file={dirs['state'] / 'munged.seed'}",
        ],
        "slurmctld": ["slurmctld", "-D", "-c", "-f", str(conf)],
        # each node: its own UTS namespace, its name as hostname, then exec slurmd (same pid)
        **{
            f"slurmd@{n}": [
                "unshare",
                "--uts",
                "sh",
                "-c",
                f'hostname {n} && exec slurmd -D -N {n} -f "$0"',
                str(conf),
            ]
            for n in names
        },
    }
    try:
        for name, cmd in commands.items():
            # munged -F logs to stderr only, so its stderr *is* its log
            path = logs["munged"] if name == "munged" else dirs["log"] / f"{name}.stdout"
            out = open(path, "ab")
            if name != "munged":
                cluster.log_paths[f"{name}.stdout"] = path
            proc = subprocess.Popen(
                cmd,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                env=daemon_env,
                start_new_session=True,  # no Ctrl-C from the terminal
            )
            out.close()
            cluster._procs[name] = proc
            cluster.pids[name] = proc.pid
            _registry_add(proc.pid, name.split("@")[0], str(conf))
            if name == "munged":
                _wait_for(lambda: munge_socket.exists(), 15, proc, "munged socket")
            elif name == "slurmctld":
                _wait_for(
                    lambda: _ok(cluster, ["scontrol", "ping"], "UP"),
                    timeout,
                    proc,
                    "slurmctld to answer scontrol ping",
                )
        _wait_for(
            lambda: _node_states(cluster) == ["idle"] * nodes,
            timeout,
            cluster._procs[f"slurmd@{names[-1]}"],
            f"{nodes} node(s) to become idle in sinfo",
        )
    except BaseException as exc:
        tail = cluster.logs_tail()
        cluster.stop(timeout=15)
        if isinstance(exc, SlurmStartError):
            raise SlurmStartError(f"{exc}\n{tail}") from None
        raise
    return cluster


# ---------------------------------------------------------------------------
def _slurm_conf(
    *,
    host: str,
    cores: int,
    memory_mb: int,
    ctld_port: int,
    nodes: Sequence[str],
    slurmd_ports: Sequence[int],
    munge_socket: Path,
    state: Path,
    spool: Path,
    run: Path,
    logs: Mapping[str, Path],
    plugstack: Path,
    task_prolog: Path,
) -> str:
    node_range = _hostlist(nodes)
    node_lines = "\n".join(
        f"NodeName={n} NodeHostname={host} NodeAddr=127.0.0.1 Port={port} "
        f"CPUs={cores} RealMemory={memory_mb} State=UNKNOWN"
        for n, port in zip(nodes, slurmd_ports, strict=True)
    )
    return f"""\
# generated by tests/infra/slurm.py -- {len(nodes)} node(s) on one host
ClusterName={CLUSTER_NAME}
SlurmctldHost={host}(127.0.0.1)
SlurmctldPort={ctld_port}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={munge_socket}
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SwitchType=switch/none
MpiDefault=none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
DefMemPerCPU=1000
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
JobAcctGatherType=jobacct_gather/none
# squeue-based status polling (snakemake slurm plugin without sacct) only sees
# jobs for MinJobAge seconds after they end; keep it >= 3 x the plugin's
# init-seconds-before-status-checks (default 40 s).
MinJobAge=300
ReturnToService=2
KillWait=5
SchedulerParameters=sched_interval=1
StateSaveLocation={state}
SlurmdSpoolDir={spool}/%n
SlurmctldPidFile={run}/slurmctld.pid
SlurmdPidFile={run}/slurmd.%n.pid
SlurmctldLogFile={logs["slurmctld"]}
SlurmdLogFile={Path(logs["slurmctld"]).parent}/slurmd.%n.log
SlurmctldDebug=info
SlurmdDebug=info
PlugStackConfig={plugstack}
TaskProlog={task_prolog}
MailProg=/bin/true
{node_lines}
PartitionName={PARTITION} Nodes={node_range} Default=YES MaxTime=INFINITE State=UP
"""


def _srun_shim(folder: Path, conf: Path) -> None:
    """``folder/srun``: the real srun, with ``SLURM_CONF`` set to ``conf`` if it is unset
    (where a site's clients would read /etc/slurm/slurm.conf)."""
    real = shutil.which("srun") or "/usr/bin/srun"
    folder.mkdir(parents=True, exist_ok=True)
    shim = folder / "srun"
    shim.write_text(f'#!/bin/sh\nexport SLURM_CONF="${{SLURM_CONF:-{conf}}}"\nexec {real} "$@"\n')
    shim.chmod(0o755)


def _task_prolog(conf: Path, nodefiles: Path, shim: Path) -> str:
    """A TaskProlog (its ``export`` lines reach every task): the srun shim first on PATH;
    the tasks on the node named by ``CLOUDBENCH_TEST_CLOCK_BEHIND`` a wall clock behind;
    and jobs submitted through qsub with ``CLOUDBENCH_TEST_PBS=1`` get the variables a PBS
    server sets: PBS_JOBID, PBS_JOBNAME, PBS_O_WORKDIR, PBS_ARRAY_INDEX, and PBS_NODEFILE
    (one line per node)."""
    behind = "".join(f'echo "export {k}={v}"\n' for k, v in faked_clock_env("$seconds").items())
    return f"""#!/bin/sh
echo "export PATH={shim}:$PATH"
case "${{{CLOCK_BEHIND_VARIABLE}:-}}" in
"$SLURMD_NODENAME":*)
    seconds="${{{CLOCK_BEHIND_VARIABLE}#*:}}"
{behind};;
esac
[ "${{{PBS_STANDIN_VARIABLE}:-}}" = 1 ] || exit 0
mkdir -p {nodefiles}
f={nodefiles}/$SLURM_JOB_ID.nodes
if [ ! -s "$f" ]; then
    SLURM_CONF={conf} scontrol show hostnames "$SLURM_JOB_NODELIST" > "$f.$$" && mv "$f.$$" "$f"
fi
echo "export PBS_JOBID=$SLURM_JOB_ID"
echo "export PBS_JOBNAME=$SLURM_JOB_NAME"
echo "export PBS_O_WORKDIR=$SLURM_SUBMIT_DIR"
echo "export PBS_NODEFILE=$f"
[ -z "${{SLURM_ARRAY_TASK_ID:-}}" ] || echo "export PBS_ARRAY_INDEX=$SLURM_ARRAY_TASK_ID"
"""


def _memory_mb() -> int:
    """MemTotal in MiB, as slurmd detects it (must not exceed it)."""
    text = Path("/proc/meminfo").read_text()
    kib = int(re.search(r"^MemTotal:\s+(\d+)", text, re.M).group(1))
    return max(512, kib // 1024 - 64)


def _free_ports(n: int) -> list[int]:
    socks, ports = [], []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind(("", 0))
            socks.append(s)
            ports.append(s.getsockname()[1])
    finally:
        for s in socks:
            s.close()
    return ports


def _ok(cluster: SlurmCluster, args: Sequence[str], needle: str) -> bool:
    try:
        out = cluster.run(args, timeout=10, check=False)
    except subprocess.TimeoutExpired:
        return False
    return out.returncode == 0 and needle in out.stdout


def _hostlist(nodes: Sequence[str]) -> str:
    """node1..node3 as Slurm writes them: node[1-3] (one node: its name)."""
    if len(nodes) == 1:
        return nodes[0]
    return f"{NODE_PREFIX}[1-{len(nodes)}]"


def _node_states(cluster: SlurmCluster) -> list[str]:
    try:
        out = cluster.run(["sinfo", "-h", "-N", "-o", "%t"], timeout=10, check=False)
    except subprocess.TimeoutExpired:
        return []
    return out.stdout.split()


def _wait_for(pred, timeout: float, proc: subprocess.Popen, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return
        if proc.poll() is not None:
            raise SlurmStartError(
                f"{proc.args[0]} exited with {proc.returncode} while waiting for {what}"
            )
        time.sleep(0.3)
    raise SlurmStartError(f"timed out after {timeout:.0f}s waiting for {what}")


def _terminate(proc: subprocess.Popen, grace: float) -> None:
    if proc.poll() is not None:
        return
    try:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        proc.kill()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
    except ProcessLookupError:
        pass


def _kill_pid(pid: int, grace: float = 3.0) -> None:
    """SIGTERM, then SIGKILL after ``grace`` seconds; ignores vanished pids."""
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        if not _alive(pid):
            return
        time.sleep(0.1)
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[-1].split()[0] != "Z"


def _cmdline(pid: int) -> list[str]:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return []
    return [a.decode(errors="replace") for a in raw.split(b"\0") if a]


def _our_job_pids(conf: Path) -> list[int]:
    """slurmstepd and job processes belonging to the cluster using ``conf``.

    Both carry ``SLURM_CONF=<conf>`` in their environment (inherited from our
    slurmd / from the submitting client); job processes also ``SLURM_JOB_ID``.
    """
    needle = f"SLURM_CONF={conf}".encode()
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            env = (entry / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if needle not in env:
            continue
        cmd = _cmdline(int(entry.name))
        is_stepd = bool(cmd) and "slurmstepd" in cmd[0]
        if is_stepd or any(v.startswith(b"SLURM_JOB_ID=") for v in env):
            pids.append(int(entry.name))
    return pids


# -- registry of started daemons (for leftovers of crashed runs) -------------
def _registry_load() -> list[dict]:
    try:
        data = json.loads(REGISTRY.read_text())
        return data if isinstance(data, list) else []
    except (OSError, ValueError):
        return []


def _registry_save(entries: list[dict]) -> None:
    tmp = REGISTRY.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps(entries))
    tmp.replace(REGISTRY)


def _start_time(pid: int) -> str:
    """Kernel start time of ``pid`` (guards against pid reuse), '' if gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()[19]
    except (OSError, IndexError):
        return ""


@contextmanager
def _registry_locked() -> Iterator[None]:
    """The registry to oneself: clusters of several pytest-xdist workers start and stop at
    the same time, and each rewrites the file."""
    with open(REGISTRY.with_suffix(".lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _registry_add(pid: int, name: str, conf: str) -> None:
    with _registry_locked():
        entries = _registry_load()
        entries.append(
            {
                "pid": pid,
                "name": name,
                "conf": conf,
                "owner": os.getpid(),
                "owner_start": _start_time(os.getpid()),
            }
        )
        _registry_save(entries)


def _registry_remove(pids: set[int]) -> None:
    with _registry_locked():
        _registry_save([e for e in _registry_load() if e.get("pid") not in pids])


def kill_stale_daemons() -> list[int]:
    """Kill daemons (and their jobs) left behind by earlier, crashed runs.

    Only pids recorded in :data:`REGISTRY` whose command line still names the
    same daemon are signalled, plus processes of jobs of *that* cluster (found
    by ``SLURM_CONF=<its conf>`` + ``SLURM_JOB_ID`` in their environment), so
    unrelated processes are never touched; and only if the Python process that
    started them is gone (a concurrently running test session is left alone).
    Returns the killed pids.
    """
    with _registry_locked():
        return _kill_stale_daemons()


def _kill_stale_daemons() -> list[int]:
    killed: list[int] = []
    keep: list[dict] = []
    stale: dict[str, dict[str, list[int]]] = {}  # conf -> {daemon name: pids}
    for entry in _registry_load():
        pid, name, conf = entry.get("pid"), entry.get("name", ""), entry.get("conf", "")
        if not isinstance(pid, int) or not conf:
            continue
        owner = entry.get("owner")
        if isinstance(owner, int) and _start_time(owner) == entry.get("owner_start"):
            keep.append(entry)  # its owner still runs: not stale
            continue
        cmd = _cmdline(pid)
        if cmd and Path(cmd[0]).name == name and _alive(pid):
            stale.setdefault(conf, {}).setdefault(name, []).append(pid)
    for conf, daemons in stale.items():
        if "slurmctld" in daemons and "munged" in daemons:
            # jobs die cleanly only through the scheduler
            env = dict(os.environ, SLURM_CONF=conf)
            try:
                subprocess.run(
                    ["scancel", "--full", "--partition", PARTITION],
                    env=env,
                    capture_output=True,
                    timeout=10,
                    check=False,
                )
                deadline = time.monotonic() + 10  # until its queue is empty, not a fixed pause
                while (
                    time.monotonic() < deadline
                    and subprocess.run(
                        ["squeue", "-h", "-t", "PD,R,CG,S,CF", "-o", "%i"],
                        env=env,
                        capture_output=True,
                        text=True,
                        timeout=10,
                        check=False,
                    ).stdout.strip()
                ):
                    time.sleep(0.2)
            except (subprocess.SubprocessError, OSError):
                pass
        for name in ("slurmd", "slurmctld", "munged"):
            for pid in daemons.get(name, ()):
                _kill_pid(pid)
                killed.append(pid)
        for pid in _our_job_pids(Path(conf)):
            _kill_pid(pid)
            killed.append(pid)
    _registry_save(keep)
    return killed


def _logs_tail(paths: Mapping[str, Path], lines: int) -> str:
    parts = []
    for name, path in paths.items():
        try:
            text = Path(path).read_text(errors="replace").splitlines()[-lines:]
        except OSError:
            continue
        parts.append(f"--- {name} ({path}) ---\n" + "\n".join(text))
    return "\n".join(parts)
