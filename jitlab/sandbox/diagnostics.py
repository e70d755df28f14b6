"""Typed diagnostics: every failure of harness code becomes one :class:`Diagnostic`.

Kinds (``KINDS``):

    parse_error         a module does not compile (syntax) or a YAML file does not parse
    import_error        importing a module raised, or a file is missing
    interface_mismatch  a class or method the protocol needs is absent, or a module returned the wrong type
    runtime_error       harness code raised while running
    timeout_wall        a request took longer than the wall-clock limit (the parent killed the child)
    timeout_cpu         the child used up its CPU-time limit (RLIMIT_CPU)
    memory_limit        the child hit its address-space limit (MemoryError)
    output_limit        stdout/stderr or one protocol message exceeded its size cap
    sandbox_violation   a denied operation: new process, exec, non-Unix socket, ptrace, mount, ... (seccomp)
    crash               the child died otherwise (os._exit, a signal, a segfault)
    protocol_error      the child sent something that is not a well-formed message of exact types

A sandbox that cannot be set up is not a diagnostic: it raises ``jitlab.errors.InfraError``
(:class:`SandboxSetupError`) and never reaches the repair loop.

``file`` and ``line`` name the harness location when known (``action.py``, 12). Locations the
parent reads from the child's stderr (faulthandler dumps) are best effort: the child could
print anything there.
"""
from __future__ import annotations

import re
import traceback as _tb
from dataclasses import asdict, dataclass
from pathlib import Path

from jitlab.errors import HarnessError, InfraError

__all__ = ["KINDS", "CHILD_KINDS", "Diagnostic", "SandboxSetupError", "SandboxHarnessError", "from_exception",
           "location_from_text", "trim"]

KINDS = ("parse_error", "import_error", "interface_mismatch", "runtime_error", "timeout_wall", "timeout_cpu",
         "memory_limit", "output_limit", "sandbox_violation", "crash", "protocol_error")
# the kinds a child may report about itself; the others only the parent decides
CHILD_KINDS = ("parse_error", "import_error", "interface_mismatch", "runtime_error", "memory_limit", "protocol_error")

MAX_MESSAGE = 2_000
MAX_TRACEBACK = 4_000


def trim(text: str, limit: int) -> str:
    """Keep the end of ``text`` (the informative part of a traceback) within ``limit`` characters."""
    text = str(text)
    return text if len(text) <= limit else "…" + text[-(limit - 1):]


@dataclass
class Diagnostic:
    """One failure of harness code. ``phase``: load | begin | decide | observe."""
    kind: str
    message: str
    file: str | None = None
    line: int | None = None
    traceback: str = ""
    phase: str = ""

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"unknown diagnostic kind {self.kind!r}; kinds: {', '.join(KINDS)}")
        self.message = trim(self.message, MAX_MESSAGE)
        self.traceback = trim(self.traceback, MAX_TRACEBACK)

    def as_dict(self) -> dict:
        return asdict(self)

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}" if self.file and self.line else (self.file or "")
        return f"{self.kind}{' at ' + where if where else ''}: {self.message}"

    def to_error(self) -> SandboxHarnessError:
        return SandboxHarnessError(self)


class SandboxSetupError(InfraError):
    """The sandbox could not be set up (bubblewrap missing, namespaces disabled, the child did not
    start). Infrastructure, not the harness's fault: retried, never repaired."""


class SandboxHarnessError(HarnessError):
    """A HarnessError carrying the full :class:`Diagnostic` (``.diagnostic``)."""

    def __init__(self, diagnostic: Diagnostic):
        self.diagnostic = diagnostic
        where = f"line {diagnostic.line}: " if diagnostic.line else ""
        super().__init__(f"{diagnostic.kind}: {where}{diagnostic.message}", file=diagnostic.file, kind=diagnostic.kind)


def _harness_frames(tb, folder: str | None):
    frames = _tb.extract_tb(tb)
    if folder:
        inside = [i for i, f in enumerate(frames) if f.filename.startswith(folder.rstrip("/") + "/")]
        if inside:
            return frames[inside[0]:], frames[inside[-1]]
    return frames[-6:], None


def from_exception(exc: BaseException, folder: str | None = None, phase: str = "",
                   kind: str | None = None) -> Diagnostic:
    """Map an exception raised by harness code (in the child) to a Diagnostic. ``folder`` is the
    harness folder: frames outside it (jitlab internals) are trimmed off the traceback."""
    file = line = None
    if isinstance(exc, HarnessError):
        kind = kind or (exc.kind if exc.kind in KINDS else "runtime_error")
        file = exc.file
        cause = exc.__cause__
        if isinstance(cause, SyntaxError):
            line = cause.lineno
        tb_source = cause if cause is not None else exc
        message = str(exc)
    else:
        if kind is None:
            kind = "memory_limit" if isinstance(exc, MemoryError) else "runtime_error"
        tb_source = exc
        message = f"{type(exc).__name__}: {exc}"
    frames, last = _harness_frames(tb_source.__traceback__, folder)
    if last is not None:
        file, line = file or Path(last.filename).name, line or last.lineno
    lines = _tb.format_list(frames) + _tb.format_exception_only(type(tb_source), tb_source)
    text = "".join(lines)
    if folder:
        text = text.replace(folder.rstrip("/") + "/", "")
    return Diagnostic(kind=kind, message=message, file=file, line=line, traceback=text, phase=phase)


_FRAME = re.compile(r'File "([^"]+)", line (\d+)')


def location_from_text(text: str, folder: str | None) -> tuple[str | None, int | None]:
    """The innermost harness frame in a traceback or faulthandler dump (most recent call first)."""
    if not folder:
        return None, None
    prefix = folder.rstrip("/") + "/"
    tail = text[text.rfind("most recent call first"):] if "most recent call first" in text else text
    hits = [(m.group(1), int(m.group(2))) for m in _FRAME.finditer(tail) if m.group(1).startswith(prefix)]
    if not hits:
        return None, None
    name, line = hits[0] if "most recent call first" in text else hits[-1]
    return Path(name).name, line
