"""The trusted side of the sandbox: start the child under bubblewrap, broker its backbone calls,
enforce wall-clock and output limits, and turn every failure into one typed Diagnostic.

Use::

    from jitlab.sandbox import SandboxConfig, SandboxedAgent, validate
    result = validate("path/to/candidate")                 # compile + import + interface check
    agent = SandboxedAgent("path/to/candidate", llm)       # llm: the parent's LLMHandle
    episode = run_episode(env, agent, llm, budget)          # same loop as for HarnessAgent
    agent.close()

The child (``python -m jitlab.sandbox.child``) runs in new user/pid/net/ipc/uts namespaces as
uid 65534 with a cleared environment; ``/usr``, the Python install, the venv and the jitlab
package are read-only (``jitlab/envs`` is hidden except ``base.py``: suite code can rebuild
answers), the candidate folder is read-only at ``/sandbox/harness``, and a size-capped tmpfs
at ``/tmp`` is the only writable place. Inside, rlimits and a seccomp filter
(:mod:`jitlab.sandbox.seccomp`: an allowlist this side generates with libseccomp, sent in the
``start`` message) apply before any harness code is imported. The environment,
scorer, bank and backbone never enter the child: it asks for ``chat``/``score`` over the pipe
and the parent calls its own LLMHandle, so accounting, budgets and the cache stay trusted.

A new child starts for each episode (``begin``) and stops at the end (``observe`` of a final
observation, ``close``, or garbage collection). Without bubblewrap or user namespaces the
runner refuses (SandboxSetupError, an InfraError) unless ``allow_unisolated=True``, which runs
the same child without namespaces and says so in ``agent.isolation`` and a warning.

Two wall clocks bound each request: ``wall_s`` (backbone time does not count against it) and, when
``run_episode`` hands the agent the episode's clock (``limit_wall``), what is left of the episode's
``max_wall_s``: a harness that hangs in ``act()`` or at import ends at its episode budget as ``budget``
(BudgetExceeded), not at the sandbox's fixed limit.

Caveats: ``--die-with-parent`` is tied to the *thread* that started the child: start episodes
from threads that outlive them (a thread pool is fine). Diagnostics' file/line for crashes and
violations come from the child's stderr and are best effort.
"""
from __future__ import annotations

import functools
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import warnings
import weakref
from dataclasses import dataclass, field
from pathlib import Path

import jitlab
from jitlab.errors import BudgetExceeded, ConfigError, InfraError
from jitlab.harness import resolve
from jitlab.protocol import Agent, Decision
from jitlab.sandbox import seccomp, wire
from jitlab.sandbox.diagnostics import CHILD_KINDS, Diagnostic, SandboxHarnessError, SandboxSetupError, location_from_text, trim

__all__ = ["SandboxConfig", "SandboxedAgent", "SandboxResult", "validate", "probe", "require_isolation",
           "ISOLATED", "UNISOLATED"]

ISOLATED = "bwrap+seccomp+rlimits"
UNISOLATED = "NONE (allow_unisolated): no namespaces, host filesystem visible; seccomp+rlimits only"
INSIDE_FOLDER = "/sandbox/harness"
_MIB = 1 << 20


@dataclass
class SandboxConfig:
    """Limits and switches of one sandboxed child."""
    wall_s: float = field(default=60.0, metadata={"help": "wall-clock limit per request (load, begin, decide, "
                                                          "observe); time spent in backbone calls is not counted"})
    start_timeout_s: float = field(default=30.0, metadata={"help": "limit for the child to start and install its "
                                                                   "limits (exceeding it is an InfraError)"})
    cpu_s: int = field(default=60, metadata={"help": "CPU seconds for the child's whole life (RLIMIT_CPU)"})
    memory_mb: int = field(default=1024, metadata={"help": "address-space limit of the child (RLIMIT_AS), MiB"})
    output_limit_bytes: int = field(default=1 * _MIB, metadata={"help": "cap on the child's stdout+stderr; "
                                                                        "more is output_limit"})
    message_limit_bytes: int = field(default=8 * _MIB, metadata={"help": "cap on one protocol message"})
    tmpfs_mb: int = field(default=16, metadata={"help": "size of the writable /tmp tmpfs, MiB (also RLIMIT_FSIZE)"})
    nofile: int = field(default=64, metadata={"help": "open-file limit of the child (RLIMIT_NOFILE)"})
    allowed_params: tuple[str, ...] = field(
        default=("temperature", "top_p", "top_k", "max_tokens", "max_new_tokens", "stop", "seed",
                 "presence_penalty", "frequency_penalty", "repetition_penalty", "do_sample"),
        metadata={"help": "backbone chat parameters a harness may set (others, e.g. api_base, are protocol_error)"})
    hide_suites: bool = field(default=True, metadata={"help": "hide jitlab/envs (suite code, task data) from the "
                                                              "child except envs/__init__.py and envs/base.py"})
    allow_unisolated: bool = field(default=False, metadata={"help": "run WITHOUT bubblewrap when it is unavailable "
                                                                    "(recorded loudly); never for untrusted code "
                                                                    "you care about"})
    bwrap: str = field(default="bwrap", metadata={"help": "bubblewrap executable"})
    python: str = field(default=sys.executable, metadata={"help": "Python interpreter for the child"})


@dataclass
class SandboxResult:
    """Outcome of :func:`validate`: ``ok`` or one ``diagnostic``."""
    ok: bool
    diagnostic: Diagnostic | None = None
    isolation: str = ""
    wall_s: float = 0.0
    name: str = ""
    sha: str = ""

    def as_dict(self) -> dict:
        return {"ok": self.ok, "diagnostic": self.diagnostic.as_dict() if self.diagnostic else None,
                "isolation": self.isolation, "wall_s": self.wall_s, "name": self.name, "sha": self.sha}


# ---- isolation check ------------------------------------------------------------------------------

_PROBES: dict[tuple, tuple[bool, str]] = {}


@functools.lru_cache(maxsize=8)
def _bwrap_help(bwrap: str) -> str:
    try:
        return subprocess.run([bwrap, "--help"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return ""


def _mounts(config: SandboxConfig, folder: str | None) -> list[str]:
    # the writable tmpfs comes first: bwrap applies mounts in order, so a venv or checkout that lives
    # under /tmp (CI clones, pytest dirs) is bound on top of it instead of being hidden by it
    args = ["--proc", "/proc", "--dev", "/dev", "--size", str(config.tmpfs_mb * _MIB), "--tmpfs", "/tmp"]
    args += ["--ro-bind", "/usr", "/usr"]
    for top in ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"):
        if os.path.islink(top):
            args += ["--symlink", os.readlink(top), top]
        elif os.path.isdir(top):
            args += ["--ro-bind", top, top]
    for name in ("/etc/ld.so.cache", "/etc/localtime"):
        if os.path.exists(name):
            args += ["--ro-bind", name, name]
    roots = {os.path.realpath(p) for p in (sys.base_prefix, sys.prefix)} | {sys.prefix}
    roots.add(str(Path(os.path.realpath(config.python)).parent.parent))
    for root in sorted(roots):
        if not root.startswith("/usr/") and os.path.isdir(root):
            args += ["--ro-bind", root, root]
    package = Path(jitlab.__file__).resolve().parent
    args += ["--ro-bind", str(package), str(package)]
    envs = package / "envs"
    if config.hide_suites and envs.is_dir():
        args += ["--tmpfs", str(envs)]
        for keep in ("__init__.py", "base.py"):
            args += ["--ro-bind", str(envs / keep), str(envs / keep)]
        args += ["--remount-ro", str(envs)]
    if folder:
        args += ["--ro-bind", folder, INSIDE_FOLDER]
    return args


def _env(config: SandboxConfig, home: str) -> dict[str, str]:
    package = Path(jitlab.__file__).resolve().parent
    return {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(package.parent), "PYTHONHASHSEED": "0",
            "PYTHONDONTWRITEBYTECODE": "1", "HOME": home, "LANG": "C.UTF-8"}


def _bwrap_argv(config: SandboxConfig, folder: str | None) -> list[str]:
    args = [config.bwrap, "--unshare-user", "--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts",
            "--unshare-cgroup-try", "--uid", "65534", "--gid", "65534", "--hostname", "sandbox",
            "--die-with-parent", "--new-session", "--cap-drop", "ALL"]
    if "--disable-userns" in _bwrap_help(config.bwrap):
        args.append("--disable-userns")
    args += ["--clearenv"]
    for key, value in _env(config, "/tmp").items():
        args += ["--setenv", key, value]
    args += _mounts(config, folder)
    args += ["--chdir", "/tmp", "--remount-ro", "/", "--"]
    return args


def probe(config: SandboxConfig | None = None) -> tuple[bool, str]:
    """Can bubblewrap build the sandbox here? ``(ok, reason)``; cached per bwrap/python pair."""
    config = config or SandboxConfig()
    key = (config.bwrap, config.python, config.hide_suites)
    if key in _PROBES:
        return _PROBES[key]
    if shutil.which(config.bwrap) is None:
        result = (False, f"bubblewrap ({config.bwrap!r}) is not installed or not on PATH")
    else:
        argv = _bwrap_argv(config, None) + [config.python, "-s", "-B", "-c", "import jitlab.sandbox.seccomp"]
        try:
            run = subprocess.run(argv, capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL,
                                 env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")})
            result = (run.returncode == 0, "ok" if run.returncode == 0 else
                      f"bubblewrap could not start a sandbox (exit {run.returncode}): {run.stderr.strip()[-500:]}; "
                      "are unprivileged user namespaces disabled (sysctl kernel.unprivileged_userns_clone, "
                      "user.max_user_namespaces)?")
        except (OSError, subprocess.SubprocessError) as exc:
            result = (False, f"bubblewrap failed to run: {exc}")
    _PROBES[key] = result
    return result


def require_isolation(config: SandboxConfig) -> str:
    """The isolation label to record, or SandboxSetupError when isolation is impossible and not waived."""
    ok, reason = probe(config)
    if ok:
        return ISOLATED
    if config.allow_unisolated:
        warnings.warn(f"jitlab sandbox: running harness code WITHOUT isolation (allow_unisolated=True): {reason}",
                      RuntimeWarning, stacklevel=3)
        return UNISOLATED
    raise SandboxSetupError(
        f"refusing to run untrusted harness code: {reason}. Install bubblewrap (apt-get install bubblewrap) "
        "and allow unprivileged user namespaces, or pass allow_unisolated=True to run it without isolation "
        f"(recorded as {UNISOLATED!r}).")


# ---- the child process ----------------------------------------------------------------------------

class _ChildFailed(Exception):
    def __init__(self, diagnostic: Diagnostic):
        super().__init__(str(diagnostic))
        self.diagnostic = diagnostic


class _Noise(threading.Thread):
    """Drains the child's stdout+stderr, keeps a tail, kills the child past the output cap."""

    def __init__(self, fd: int, limit: int, on_exceed):
        super().__init__(daemon=True, name="jitlab-sandbox-noise")
        self.fd, self.limit, self.on_exceed = fd, limit, on_exceed
        self.total, self.exceeded = 0, False
        self._tail = bytearray()

    def run(self) -> None:
        try:
            while True:
                data = os.read(self.fd, 1 << 16)
                if not data:
                    break
                self.total += len(data)
                self._tail += data
                del self._tail[:-(1 << 16)]
                if self.total > self.limit and not self.exceeded:
                    self.exceeded = True
                    self.on_exceed()
        finally:
            os.close(self.fd)

    def tail(self) -> str:
        return bytes(self._tail).decode("utf-8", "replace")


class _Child:
    """One sandboxed child: start, exchange messages under deadlines, kill, classify its death."""

    def __init__(self, folder: Path, config: SandboxConfig, isolation: str, mode: str):
        import secrets
        self.folder, self.config, self.isolation, self.mode = folder, config, isolation, mode
        self.isolated = isolation == ISOLATED
        self.inside = INSIDE_FOLDER if self.isolated else str(folder)
        self.nonce = secrets.token_hex(16)
        self.proc: subprocess.Popen | None = None
        self.kill_reason: Diagnostic | None = None
        self.loading_file: str | None = None
        self.phase = "start"
        self._buffer = bytearray()
        self._workdir: str | None = None
        self._lock = threading.Lock()

    # -- lifecycle --
    def start(self) -> None:
        p2c_r, self.w = os.pipe()
        self.r, c2p_w = os.pipe()
        noise_r, noise_w = os.pipe()
        child_fds = (p2c_r, c2p_w)
        tail = ["-s", "-B", "-m", "jitlab.sandbox.child", str(p2c_r), str(c2p_w)]
        try:
            if self.isolated:
                # bwrap itself gets a minimal environment too: its init process stays in the sandbox
                # and /proc/1/environ would show whatever bwrap was started with
                argv = _bwrap_argv(self.config, str(self.folder)) + [self.config.python] + tail
                env, cwd = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}, None
            else:
                self._workdir = tempfile.mkdtemp(prefix="jitlab-unisolated-")
                argv, env, cwd = [self.config.python] + tail, _env(self.config, self._workdir), self._workdir
            self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=noise_w, stderr=noise_w,
                                         pass_fds=child_fds, start_new_session=True, env=env, cwd=cwd)
        except OSError as exc:
            for fd in (self.w, self.r, noise_r):
                os.close(fd)
            raise SandboxSetupError(f"could not start the sandbox child: {exc}") from exc
        finally:
            for fd in (p2c_r, c2p_w, noise_w):
                os.close(fd)
        os.set_blocking(self.w, False)
        self.noise = _Noise(noise_r, self.config.output_limit_bytes, self._output_exceeded)
        self.noise.start()
        deadline = time.monotonic() + self.config.start_timeout_s
        limits = {"memory_mb": self.config.memory_mb, "cpu_s": self.config.cpu_s, "fsize_mb": self.config.tmpfs_mb,
                  "nofile": self.config.nofile}
        # the seccomp filter is generated here (libseccomp, once per pid) and loaded by the child
        pid = seccomp.SANDBOX_PID if self.isolated else self.proc.pid
        try:
            program = seccomp.bpf(pid)
        except seccomp.SeccompUnsupported as exc:
            self.kill()
            raise SandboxSetupError(f"cannot build the sandbox's seccomp filter: {exc}") from None
        try:
            self.send({"op": "start", "folder": self.inside, "mode": self.mode, "limits": limits,
                       "seccomp": {"pid": pid, "bpf": program.hex()}}, deadline)
            self.recv(("hello",), deadline)
        except _ChildFailed as failed:
            self.kill()
            raise SandboxSetupError(f"the sandbox child did not start ({failed.diagnostic.message}); child output: "
                                    f"{trim(self.noise.tail().strip(), 1500) or '(none)'}") from None
        self.phase = "load"

    def _output_exceeded(self) -> None:
        self._set_reason(Diagnostic("output_limit", f"the harness wrote more than {self.config.output_limit_bytes} "
                                    "bytes to stdout/stderr", phase=self.phase))
        self._killpg()

    def _set_reason(self, diagnostic: Diagnostic) -> None:
        with self._lock:
            if self.kill_reason is None:
                self.kill_reason = diagnostic

    def _killpg(self) -> None:
        # only before the leader is reaped: afterwards its pid (and group id) may belong to someone else
        if self.proc is not None and self.proc.returncode is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass

    def kill(self) -> None:
        """Kill the whole process group and reap it; safe to call twice."""
        if self.proc is None:
            return
        self._killpg()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        self.noise.join(timeout=2)
        for name in ("w", "r"):
            fd = getattr(self, name, None)
            if fd is not None:
                try:
                    os.close(fd)
                except OSError:
                    pass
                setattr(self, name, None)
        if self._workdir:
            shutil.rmtree(self._workdir, ignore_errors=True)
            self._workdir = None

    def close(self) -> None:
        """Ask the child to exit, then make sure the whole group is gone."""
        if self.proc is not None and self.proc.poll() is None and self.w is not None:
            try:
                self.send({"op": "close"}, time.monotonic() + 1)
                self.proc.wait(timeout=1)
            except (_ChildFailed, subprocess.TimeoutExpired):
                pass
        self.kill()

    # -- messages --
    def send(self, message: dict, deadline: float) -> None:
        data = memoryview(wire.encode({"nonce": self.nonce, **message}))
        while data:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                self._fail(self._timeout())
            _, writable, _ = select.select([], [self.w], [], min(remaining, 0.5))
            if writable:
                try:
                    data = data[os.write(self.w, data):]
                except BlockingIOError:
                    continue
                except BrokenPipeError:
                    self._fail(self._death())

    def recv(self, allowed: tuple[str, ...], deadline: float) -> dict:
        line = self._line(deadline)
        try:
            return wire.check(wire.decode(line, self.nonce), allowed)
        except wire.WireError as exc:
            self._fail(Diagnostic("protocol_error", f"bad message from the child: {exc}", phase=self.phase))

    def _line(self, deadline: float) -> bytes:
        limit = self.config.message_limit_bytes
        while True:
            end = self._buffer.find(b"\n")
            if end >= 0:
                line = bytes(self._buffer[:end])
                del self._buffer[:end + 1]
                if len(line) > limit:
                    self._fail(Diagnostic("output_limit", f"a protocol message exceeded {limit} bytes",
                                          phase=self.phase))
                return line
            if len(self._buffer) > limit:
                self._fail(Diagnostic("output_limit", f"a protocol message exceeded {limit} bytes", phase=self.phase))
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                self._fail(self._timeout())
            readable, _, _ = select.select([self.r], [], [], min(remaining, 0.5))
            if readable:
                data = os.read(self.r, 1 << 16)
                if not data:
                    self._fail(self._death())
                self._buffer += data

    def _timeout(self) -> Diagnostic:
        return Diagnostic("timeout_wall", f"no answer within the wall-clock limit of {self.config.wall_s}s "
                          f"({self.phase})", file=self.loading_file if self.phase == "load" else None,
                          phase=self.phase)

    def _fail(self, diagnostic: Diagnostic):
        self._set_reason(diagnostic)
        self.kill()
        raise _ChildFailed(self.kill_reason)

    def _death(self) -> Diagnostic:
        """Why did the child stop talking? Wait for its exit status and classify it."""
        try:
            self.proc.wait(timeout=2)
        except subprocess.TimeoutExpired:
            return Diagnostic("protocol_error", "the child closed its protocol channel but kept running",
                              phase=self.phase)
        self.noise.join(timeout=2)
        if self.kill_reason is not None:
            return self.kill_reason
        rc = self.proc.returncode
        sig = -rc if rc < 0 else (rc - 128 if self.isolated and rc > 128 else None)
        tail = self.noise.tail()
        file, line = location_from_text(tail, self.inside)
        if file is None and self.phase == "load":
            file = self.loading_file
        where = f" while importing {self.loading_file}" if self.phase == "load" and self.loading_file else ""
        if sig == signal.SIGSYS:
            denied = [ln.split("denied ", 1)[1] for ln in tail.splitlines() if ln.startswith("jitlab-sandbox: denied ")]
            what = f" ({denied[-1]})" if denied else ""
            return Diagnostic("sandbox_violation", f"the harness attempted an operation the sandbox denies{what}: "
                              "new processes, exec, non-Unix sockets, ptrace, mount, namespaces, signal handlers "
                              f"for SIGSYS/SIGXCPU and similar are forbidden{where}",
                              file=file, line=line, traceback=tail[-2000:], phase=self.phase)
        if sig == signal.SIGXCPU:
            return Diagnostic("timeout_cpu", f"the child used up its CPU limit of {self.config.cpu_s}s{where}",
                              file=file, line=line, phase=self.phase)
        if sig == signal.SIGKILL:
            return Diagnostic("timeout_cpu", "the child was killed by SIGKILL: the hard CPU limit "
                              f"({self.config.cpu_s + 1}s) or the kernel{where}", file=file, line=line,
                              phase=self.phase)
        if "MemoryError" in tail or "Cannot allocate memory" in tail or "out of memory" in tail:
            return Diagnostic("memory_limit", f"the child ran out of memory (limit {self.config.memory_mb} MiB){where}",
                              file=file, line=line, traceback=tail[-2000:], phase=self.phase)
        try:
            how = f"was killed by {signal.Signals(sig).name}" if sig else f"exited with status {rc}"
        except ValueError:
            how = f"exited with status {rc}"
        return Diagnostic("crash", f"the child {how}{where} (os._exit, sys.exit outside a request, or a fatal "
                          "error)", file=file, line=line, traceback=tail[-2000:], phase=self.phase)

    def load(self, deadline: float | None = None) -> tuple[str, str]:
        """Wait for ``ready`` after ``hello``: the harness compiles, imports and constructs (by ``deadline``,
        a ``time.monotonic()`` value; default: ``wall_s`` from now)."""
        deadline = time.monotonic() + self.config.wall_s if deadline is None else deadline
        for _ in range(_MAX_PROGRESS):
            message = self.recv(("progress", "ready", "fail"), deadline)
            if message["op"] == "progress":
                self.loading_file = message["file"]
            elif message["op"] == "fail":
                self._fail(self.child_diagnostic(message["diagnostic"]))
            else:
                self.phase = "ready"
                return message["name"], message["sha"]
        self._fail(Diagnostic("protocol_error", "too many progress messages while loading", phase="load"))

    def child_diagnostic(self, data: dict) -> Diagnostic:
        """A diagnostic the child reported about itself: kinds only the parent may decide become protocol_error."""
        kind = data["kind"] if data["kind"] in CHILD_KINDS else "protocol_error"
        message = data["message"] if kind == data["kind"] else f"the child reported kind {data['kind']!r}: " \
                                                               f"{data['message']}"
        return Diagnostic(kind, message, file=data["file"], line=data["line"], traceback=data["traceback"],
                          phase=self.phase)


_MAX_PROGRESS = 8  # messages allowed while loading: one progress per module file, then ready


# ---- public entry points --------------------------------------------------------------------------

def validate(harness, config: SandboxConfig | None = None) -> SandboxResult:
    """Compile, import and interface-check a harness folder inside the sandbox.
    Raises SandboxSetupError (an InfraError) when the sandbox itself cannot be set up."""
    config = config or SandboxConfig()
    folder = resolve(harness)
    isolation = require_isolation(config)
    start = time.perf_counter()
    child = _Child(folder, config, isolation, mode="validate")
    child.start()
    try:
        name, sha = child.load()
        result = SandboxResult(ok=True, isolation=isolation, name=name, sha=sha)
    except _ChildFailed as failed:
        result = SandboxResult(ok=False, diagnostic=failed.diagnostic, isolation=isolation)
    finally:
        child.close()
    result.wall_s = time.perf_counter() - start
    return result


class SandboxedAgent(Agent):
    """The sandboxed counterpart of ``HarnessAgent``: begin/decide/observe run in a child process.

    ``harness``: a seed name or a folder. ``llm``: the parent's LLMHandle (or anything with
    chat/score). After a failure, ``diagnostic`` holds the Diagnostic and the HarnessError raised
    carries it too. ``isolation`` names what protected the run; ``stats`` sums, over episodes: child
    start-up to ``ready`` (``start_s``), shutdown (``stop_s``), requests and their time outside
    backbone calls (``requests``, ``request_s``), brokered backbone calls and their time (``llm_*``).
    """

    def __init__(self, harness, llm, config: SandboxConfig | None = None):
        self.config = config or SandboxConfig()
        self.folder = resolve(harness)
        self.llm = llm
        self.isolation = require_isolation(self.config)
        self.diagnostic: Diagnostic | None = None
        self.name = self.sha = ""
        self.stats = {"episodes": 0, "start_s": 0.0, "stop_s": 0.0, "requests": 0, "request_s": 0.0, "llm_calls": 0,
                      "llm_s": 0.0}
        self._child: _Child | None = None
        self._finalizer = None
        self._pending: BaseException | None = None
        self._clock = None  # the episode's WallClock (limit_wall), or None: wall_s alone bounds a request
        self._episode_bound = False  # the last deadline handed out was the episode budget's, not wall_s

    def limit_wall(self, clock) -> None:
        """Bound every request of the coming episode by ``clock.left()`` too (``run_episode`` calls it)."""
        self._clock = clock

    def _deadline(self, request_s: float) -> float:
        """The ``time.monotonic()`` deadline of a request with ``request_s`` seconds of ``wall_s`` left: the
        sooner of that and the end of the episode's wall budget."""
        now = time.monotonic()
        left = self._clock.left() if self._clock is not None else float("inf")
        self._episode_bound = left < request_s
        return now + min(request_s, max(left, 0.0))

    def _budget_verdict(self, diagnostic: Diagnostic) -> None:
        """A request that timed out at the episode's budget ends the episode as ``budget``, like the loop's check."""
        if diagnostic.kind == "timeout_wall" and self._episode_bound and self._pending is None:
            self._pending = self._clock.exceeded()

    # -- agent protocol --
    def begin(self, task, obs) -> None:
        self.close()
        self.diagnostic = None
        start = time.perf_counter()
        self._child = _Child(self.folder, self.config, self.isolation, mode="agent")
        self._child.start()
        self._finalizer = weakref.finalize(self, self._child.kill)
        self._pending = None
        try:
            self.name, self.sha = self._child.load(self._deadline(self.config.wall_s))
        except _ChildFailed as failed:
            self._budget_verdict(failed.diagnostic)
            self._failed(failed.diagnostic)
        self.stats["episodes"] += 1
        self.stats["start_s"] += time.perf_counter() - start
        self._request("begin", {"task": wire.json_safe(wire.task_to_wire(task)), "obs": wire.obs_to_wire(obs)})

    def decide(self, step: int) -> Decision:
        return wire.decision_from_wire(self._request("decide", {"step": int(step)}))

    def observe(self, decision: Decision, obs, step: int) -> None:
        sent = {"tool": str(decision.tool), "args": wire.json_safe(decision.args), "thought": str(decision.thought),
                "data": wire.json_safe(decision.data)}
        self._request("observe", {"decision": sent, "obs": wire.obs_to_wire(obs), "step": int(step)})
        if obs.done:
            self.close()

    def close(self) -> None:
        """Stop the child (a new one starts at the next ``begin``)."""
        if self._child is not None:
            start = time.perf_counter()
            self._child.close()
            self._child = None
            self.stats["stop_s"] += time.perf_counter() - start
        if self._finalizer is not None:
            self._finalizer.detach()
            self._finalizer = None

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- internals --
    def _request(self, op: str, fields: dict):
        child = self._child
        if child is None:
            raise InfraError(f"SandboxedAgent.{op} called with no running child (call begin first, once per episode)")
        child.phase = op
        self._pending = None
        start = time.perf_counter()
        paused = 0.0
        try:
            child.send({"op": op, **fields}, self._deadline(self.config.wall_s))
            while True:
                deadline = self._deadline(self.config.wall_s - (time.perf_counter() - start - paused))
                message = child.recv(("chat", "score", "done", "fail"), deadline)
                kind = message["op"]
                if kind in ("chat", "score"):
                    llm_start = time.perf_counter()
                    reply = self._serve(message, child)
                    paused += time.perf_counter() - llm_start
                    child.send(reply, time.monotonic() + self.config.wall_s)
                elif kind == "fail":
                    self._failed(child.child_diagnostic(message["diagnostic"]))
                else:
                    result = message["result"]
                    wants_decision = op == "decide"
                    if wants_decision != (result is not None):
                        child._fail(Diagnostic("protocol_error", f"{op}: the child answered with the wrong result "
                                               "shape", phase=op))
                    return result
        except _ChildFailed as failed:
            self._budget_verdict(failed.diagnostic)
            self._failed(failed.diagnostic)
        finally:
            self.stats["requests"] += 1
            self.stats["request_s"] += time.perf_counter() - start - paused
            self.stats["llm_s"] += paused

    def _serve(self, message: dict, child: _Child) -> dict:
        reply = {"op": "reply", "id": message["id"]}
        self.stats["llm_calls"] += 1
        bad = sorted(set(message.get("params", {})) - set(self.config.allowed_params))
        if bad:
            child._fail(Diagnostic("protocol_error", f"chat parameter(s) {', '.join(bad)} not allowed; "
                                   f"allowed: {', '.join(self.config.allowed_params)}", phase=child.phase))
        try:
            if message["op"] == "chat":
                completion = self.llm.chat(message["messages"], **message["params"])
                reply["result"] = wire.completion_to_wire(completion)
            else:
                reply["result"] = [float(s) for s in self.llm.score(message["messages"], message["candidates"])]
        except (BudgetExceeded, InfraError, ConfigError) as exc:
            # the trusted side's own verdicts: the harness sees the error, the episode gets the real one
            self._pending = self._pending or exc
            reply["error"] = {"type": type(exc).__name__, "message": str(exc)}
        except Exception as exc:  # the backbone's failure (e.g. no score()): the harness may handle it, as in-process
            reply["error"] = {"type": type(exc).__name__, "message": str(exc)}
        return reply

    def _failed(self, diagnostic: Diagnostic):
        self.diagnostic = diagnostic
        self.close()
        if self._pending is not None:
            raise self._pending
        raise SandboxHarnessError(diagnostic)
