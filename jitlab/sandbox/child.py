"""The sandboxed side: loads an untrusted harness and runs a HarnessAgent whose backbone is an RPC proxy.

Started by the parent (jitlab.sandbox.runner), normally under bubblewrap::

    python -s -B -m jitlab.sandbox.child RPC_IN_FD RPC_OUT_FD

Order matters: read the ``start`` message (nonce, limits, folder, mode) -> set rlimits ->
route Python's stdout/stderr to the capped noise pipe -> faulthandler for SIGSYS -> audit hook
-> seccomp filter (built by the parent with libseccomp, loaded here; jitlab.sandbox.seccomp) -> ``hello``. Only after ``hello`` does harness code run (compile, import,
interface check -> ``ready`` or ``fail``); then it serves begin/decide/observe until ``close``.
A failure before ``hello`` is the sandbox's (InfraError in the parent), after it the harness's.

Caveats: everything in this process is reachable by harness code (it can read the nonce and
write to the RPC descriptor itself). That is by design: the parent validates every message and
trusts nothing it could not check. The child exits with ``os._exit`` so interpreter shutdown
(which would touch the SIGSYS handler) never runs.
"""
from __future__ import annotations

import faulthandler
import io
import json
import os
import resource
import signal
import sys
import threading

from jitlab.errors import HarnessError
from jitlab.sandbox import wire
from jitlab.sandbox.diagnostics import from_exception

__all__ = ["main"]

_FORBIDDEN_EVENTS = ("os.system", "os.fork", "os.forkpty", "os.exec", "os.posix_spawn", "os.spawn",
                     "subprocess.Popen", "pty.spawn")


class _Channel:
    """Newline-delimited JSON on two dedicated descriptors."""

    def __init__(self, fd_in: int, fd_out: int):
        self.reader = os.fdopen(fd_in, "rb", buffering=1 << 16)
        self.fd_out = fd_out
        self.nonce = ""
        self.next_id = 0
        # harness threads may call the backbone: one exchange at a time, and only while the parent
        # is serving a request (the serve loop holds the lock while it waits for the next one)
        self.lock = threading.RLock()

    def send(self, op: str, **fields) -> None:
        data = wire.encode({"nonce": self.nonce, "op": op, **fields})
        view = memoryview(data)
        while view:
            view = view[os.write(self.fd_out, view):]

    def recv(self) -> dict:
        line = self.reader.readline()
        if not line:
            os._exit(0)  # the parent went away
        if not self.nonce:  # the start message sets the nonce
            self.nonce = json.loads(line)["nonce"]
        return wire.decode(line, self.nonce)

    def call(self, op: str, **fields):
        """A backbone request: send it, wait for the matching reply."""
        with self.lock:
            self.next_id += 1
            self.send(op, id=self.next_id, **fields)
            reply = self.recv()
        if reply.get("op") != "reply" or reply.get("id") != self.next_id:
            raise RuntimeError(f"sandbox: unexpected reply to {op}: {reply.get('op')!r}")
        if "error" in reply:
            raise _rebuild_error(reply["error"])
        return reply["result"]


def _rebuild_error(error: dict) -> BaseException:
    from jitlab import errors
    kind, message = error.get("type", ""), error.get("message", "")
    if kind == "NotImplementedError":
        return NotImplementedError(message)
    cls = getattr(errors, kind, None)
    if isinstance(cls, type) and issubclass(cls, errors.JitlabError) and cls is not errors.UnknownName:
        return cls(message)
    return RuntimeError(f"{kind}: {message}")


class _ProxyLLM:
    """``ctx.llm`` inside the sandbox: every call goes to the parent's LLMHandle."""

    def __init__(self, channel: _Channel):
        self._channel = channel
        self.prompt_tokens = self.completion_tokens = self.calls = 0
        self.cost = 0.0
        self.step = 0

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def chat(self, messages: list[dict], **params):
        messages = [{"role": str(m["role"]), "content": str(m["content"])} for m in messages]
        completion = wire.completion_from_wire(self._channel.call("chat", messages=messages, params=params))
        self.prompt_tokens += completion.prompt_tokens
        self.completion_tokens += completion.completion_tokens
        self.cost += completion.cost
        self.calls += 1
        return completion

    def score(self, messages: list[dict], candidates: list[str]) -> list[float]:
        messages = [{"role": str(m["role"]), "content": str(m["content"])} for m in messages]
        scores = self._channel.call("score", messages=messages, candidates=[str(c) for c in candidates])
        self.calls += 1
        return [float(s) for s in scores]


class _FdWriter(io.TextIOBase):
    """sys.stdout/sys.stderr for harness code: encodes and writes in chunks straight to fd 2, so a
    huge print neither doubles its memory nor reaches the RPC descriptor."""

    def __init__(self, fd: int):
        self.fd = fd

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        for start in range(0, len(text), 1 << 16):
            view = memoryview(text[start:start + (1 << 16)].encode("utf-8", "replace"))
            while view:
                view = view[os.write(self.fd, view):]
        return len(text)

    def fileno(self) -> int:
        return self.fd

    def flush(self) -> None:
        pass


def _limits(limits: dict) -> None:
    mib = 1 << 20
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_AS, (limits["memory_mb"] * mib, limits["memory_mb"] * mib))
    cpu = max(1, int(limits["cpu_s"]))
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
    resource.setrlimit(resource.RLIMIT_FSIZE, (limits["fsize_mb"] * mib, limits["fsize_mb"] * mib))
    resource.setrlimit(resource.RLIMIT_NOFILE, (limits["nofile"], limits["nofile"]))
    resource.setrlimit(resource.RLIMIT_MEMLOCK, (0, 0))


def _audit(event: str, args) -> None:
    # seccomp enforces; this only makes the denial happen where faulthandler can name the Python line
    if event in _FORBIDDEN_EVENTS or (event == "socket.__new__" and len(args) > 1 and args[1] != 1):
        os.write(2, f"\njitlab-sandbox: denied {event}\n".encode())
        os.kill(os.getpid(), signal.SIGSYS)


def _load(channel: _Channel, folder: str):
    """Compile, import and interface-check the harness; HarnessError / any exception -> fail."""
    from jitlab import harness as harness_mod
    for name, text in harness_mod.read_files(folder).items():
        if name.endswith(".py"):
            try:
                compile(text, os.path.join(folder, name), "exec", dont_inherit=True)
            except SyntaxError as exc:
                raise HarnessError(f"syntax error line {exc.lineno}: {exc.msg}", file=name,
                                   kind="parse_error") from exc
            except ValueError as exc:  # e.g. null bytes
                raise HarnessError(f"cannot compile: {exc}", file=name, kind="parse_error") from exc
    original = harness_mod._import

    def announced(package, folder_path, file):
        channel.send("progress", file=file)
        return original(package, folder_path, file)

    harness_mod._import = announced
    try:
        return harness_mod.load_harness(folder)
    finally:
        harness_mod._import = original


def _fail(channel: _Channel, exc: BaseException, folder: str, phase: str, kind: str | None = None,
          file: str | None = None) -> None:
    diag = from_exception(exc, folder, phase, kind=kind)
    if file and not diag.file:
        diag.file, diag.traceback = file, ""
        diag.message = f"the decision cannot cross the sandbox: {diag.message}"
    with channel.lock:
        channel.send("fail", diagnostic={"kind": diag.kind, "message": diag.message, "file": diag.file,
                                         "line": diag.line, "traceback": diag.traceback})
    os._exit(0)


def _serve(channel: _Channel, harness, folder: str) -> None:
    from jitlab.runtime import HarnessAgent
    agent = HarnessAgent(harness, _ProxyLLM(channel))
    while True:
        with channel.lock:
            request = channel.recv()
        op = request["op"]
        if op == "close":
            os._exit(0)
        try:
            if op == "begin":
                agent.llm.step = 0
                agent.begin(wire.task_from_wire(request["task"]), wire.obs_from_wire(request["obs"]))
                result = None
            elif op == "decide":
                agent.llm.step = request["step"]
                decision = agent.decide(request["step"])
                try:
                    result = wire.decision_to_wire(decision)
                except (TypeError, ValueError) as exc:
                    _fail(channel, exc, folder, op, kind="protocol_error", file="action.py")
            elif op == "observe":
                decision = wire.decision_from_wire(request["decision"])
                agent.observe(decision, wire.obs_from_wire(request["obs"]), request["step"])
                result = None
            else:
                raise RuntimeError(f"sandbox child: unknown op {op!r}")
        except BaseException as exc:  # harness code is arbitrary; SystemExit included
            _fail(channel, exc, folder, op)
        with channel.lock:
            channel.send("done", result=result)


def main(argv: list[str]) -> None:
    channel = _Channel(int(argv[0]), int(argv[1]))
    start = channel.recv()
    folder, mode = start["folder"], start["mode"]
    _limits(start["limits"])
    sys.stdin = io.StringIO("")
    sys.stdout = sys.stderr = _FdWriter(2)
    faulthandler.enable(file=sys.__stderr__, all_threads=True)
    faulthandler.register(signal.SIGSYS, file=sys.__stderr__, all_threads=True, chain=True)
    # the parent built the filter (libseccomp) for the pid it expected this process to have; with another
    # pid, build it here, before the audit hook (pyseccomp may run ldconfig to find libseccomp)
    from jitlab.sandbox import seccomp
    offered = start.get("seccomp") or {}
    program = bytes.fromhex(offered["bpf"]) if offered.get("pid") == os.getpid() else seccomp.bpf(os.getpid())
    sys.addaudithook(_audit)
    seccomp.load(program)
    channel.send("hello")
    # ---- from here on, harness code runs ----
    try:
        harness = _load(channel, folder)
        harness.build()  # interface check: every module constructs
    except BaseException as exc:
        _fail(channel, exc, folder, "load")
    channel.send("ready", name=str(harness.name), sha=str(harness.sha))
    if mode == "validate":
        os._exit(0)
    _serve(channel, harness, folder)


if __name__ == "__main__":
    try:
        main(sys.argv[1:])
    except BaseException:  # set-up failure before hello: tell the parent on stderr, exit non-zero
        import traceback
        traceback.print_exc(file=sys.__stderr__)
        sys.__stderr__.flush()
        os._exit(70)
