"""The sandbox child's seccomp filter: an ALLOWLIST generated with libseccomp (through ``pyseccomp``).

The trusted parent generates the program (once per pid, cached) and hands it to the child in the
``start`` message; the child loads it on itself after Python start-up and BEFORE importing any harness
code, so libseccomp never runs inside the sandbox::

    program = bpf(SANDBOX_PID)     # parent: libseccomp builds the filter, exported as classic BPF
    load(program)                  # child: PR_SET_NO_NEW_PRIVS, then PR_SET_SECCOMP (as seccomp_load does)
    install()                      # both in one process (build for os.getpid(), load)

    python -m jitlab.sandbox.seccomp            # the filter in libseccomp's pseudo code (PFC)
    python -m jitlab.sandbox.seccomp TRACE_DIR  # syscalls in a strace -ff trace that the allowlist lacks

Actions, in libseccomp's terms (the default is the last line):

- ``ALLOW`` the syscalls in :data:`ALLOWED` (what CPython, NumPy, threads and the pipe protocol use),
  some only with checked arguments: ``clone`` only for threads (``CLONE_THREAD`` set, no ``CLONE_NEW*``
  namespace flag), ``socket``/``socketpair`` only for ``AF_UNIX``, ``kill``/``tgkill`` only to the
  process itself (``kill(0)``: its own group), ``prlimit64`` only on itself, ``rt_sigaction`` for any
  signal but SIGSYS and SIGXCPU;
- ``TRAP`` (SIGSYS) the operations the diagnostics name as violations, :data:`DENIED`: new processes
  and programs (``fork``, ``vfork``, ``execve``, ``clone`` without ``CLONE_THREAD`` or with a namespace
  flag), sockets of any family but ``AF_UNIX``, ptrace, mount and the new mount API, namespaces,
  io_uring, bpf, keyrings, perf, module/kexec loading, userfaultfd, clocks, hostname, ...;
- ``KILL_PROCESS`` a change to the handler of SIGSYS or SIGXCPU (so a harness can neither swallow the
  trap nor the CPU limit), and any other architecture (32-bit ``int 0x80`` on x86_64);
- ``ERRNO(ENOSYS)`` for ``clone3`` (glibc then falls back to ``clone``, whose flags a filter can read);
- ``ERRNO(EPERM)`` for everything else, including syscalls the kernel adds later: the call fails,
  Python raises ``PermissionError`` at the harness line, the diagnostic is a ``runtime_error``.

A trapped call raises SIGSYS: the child registered ``faulthandler`` for SIGSYS, so the Python traceback
of the offending line reaches stderr, then faulthandler's chaining resets the SIGSYS handler, which the
filter answers with ``KILL_PROCESS``. The parent sees death by SIGSYS and reports ``sandbox_violation``.
Arguments are compared on all 64 bits (an ALLOW needs the exact value, e.g. ``socket`` domain == 1), or
on the low 32 bits where the kernel reads an ``int`` and the answer is a denial (``rt_sigaction``), so
garbage in a register's upper half cannot slip a call past the filter.

How the list was derived: the sandboxed workloads ran under ``strace --pidns-translation -ff`` with the
previous (hand-built denylist) filter, and every syscall a sandbox child or its threads made after the
filter was installed was collected (``python -m jitlab.sandbox.seccomp TRACE_DIR`` does that). The
workloads: ``jitlab run --suite toy --isolation sandbox --backbone scripted:pick-first`` for all 14
seeds, ``validate()`` (the code generator's and the repair loop's check), a harness that imports NumPy
and runs linear algebra (OpenBLAS threads), threads, ``tempfile``, ``sqlite3``, ``time.sleep``, and the
71 isolation tests in tests/sandbox. They used 36 syscalls: brk, clock_nanosleep, clone (threads),
clone3 (ENOSYS), close, epoll_create1, exit, exit_group, fstat, futex, getdents64, getpid, getrandom,
gettid, ioctl (isatty checks), kill (self), lseek, madvise, mbind (NumPy), mmap, mprotect, munmap,
newfstatat, openat, pread64, read, rseq, rt_sigaction, rt_sigprocmask, sched_getaffinity (OpenBLAS),
set_robust_list, setsid (a test), socket (AF_UNIX), uname, unlink, write. :data:`ALLOWED` adds the
syscalls the same standard-library paths reach with other inputs (``stat`` variants, ``*at`` forms,
``pipe2``, ``dup*``, ``fcntl``, ``select``/``poll``/``epoll`` for asyncio, ``rename``/``mkdir`` in the
private /tmp, clocks and timers, signal masks and stacks, ...); nothing that creates a process, loads
code into the kernel, changes identity or talks to the network.

How to extend it: if a legitimate harness fails with ``PermissionError: [Errno 1] Operation not
permitted`` on an operation Python should allow, trace it and list what is missing::

    strace --pidns-translation -ff -o /tmp/trace/t python -m jitlab.cli run --isolation sandbox ...
    python -m jitlab.sandbox.seccomp /tmp/trace

then add the names to :data:`ALLOWED` (one group per purpose, say why) if they cannot affect anything
outside the process, and rerun tests/sandbox.

Caveats: needs libseccomp (Debian ``libseccomp2``) and the ``pyseccomp`` package; without them, or on a
machine libseccomp does not know, :func:`build` raises :class:`SeccompUnsupported` and the sandbox
refuses to run (SandboxSetupError). Names are resolved per architecture by libseccomp; names a machine
lacks (``open`` on aarch64) are skipped, names newer than the installed libseccomp stay denied. The
filter is loaded by the child rather than handed to bubblewrap with ``--seccomp FD``: bubblewrap would
install it before it execs Python, so ``execve`` would have to stay allowed. The ``kill`` rules name the
child's own pid, which the parent expects to be :data:`SANDBOX_PID` under bubblewrap (the child's pid
when unisolated); a child that finds another pid builds its own filter with libseccomp (~10 ms more).
Signals to other processes and the syscalls no workload needed fail with EPERM rather than a trap: a
harness can catch the error, which changes nothing outside it.

Cost, measured against the hand-built denylist it replaces (CPU time of the filter's part of a child's
start-up, median of 30, 2-core machine under load): 6.0 ms before, 5.5 ms now (imports 5.7 -> 3.5 ms;
loading, which now includes importing ctypes, 0.3 -> 2.0 ms); a child that builds its own: 16.6 ms.
Per syscall, the binary tree libseccomp emits is a little cheaper than the old linear list (100,000
stat/getppid calls from Python: 0.43 us each, 0.44 before, 0.40 with no filter). Whole episodes:
benchmarks/sandbox_overhead.py, numbers in jitlab/sandbox/README.md. The allowlist costs nothing
measurable, so it stays.
"""
from __future__ import annotations

import collections
import errno
import functools
import itertools
import os
import re
import signal
import sys
import threading
from pathlib import Path

__all__ = ["ALLOWED", "DENIED", "SANDBOX_PID", "SeccompUnsupported", "build", "bpf", "pfc", "load", "install",
           "traced", "missing"]

# the pid of the sandboxed Python inside bubblewrap's pid namespace (bwrap's own init is pid 1): the parent
# builds the filter for it; a child that finds another pid builds its own (see jitlab/sandbox/child.py)
SANDBOX_PID = 2


class SeccompUnsupported(OSError):
    """This machine cannot build or take the filter (no libseccomp, unknown architecture, load failed)."""


# ---- the allowlist, by purpose (names as in the kernel's syscall tables; libseccomp maps them per arch) ----
_MEMORY = ("brk", "mmap", "munmap", "mremap", "mprotect", "madvise", "msync", "mbind", "get_mempolicy")
_FILES = ("read", "write", "readv", "writev", "pread64", "pwrite64", "preadv", "pwritev", "preadv2", "pwritev2",
          "open", "openat", "openat2", "creat", "close", "close_range", "lseek", "dup", "dup2", "dup3", "pipe",
          "pipe2", "fcntl", "flock", "ioctl", "fsync", "fdatasync", "ftruncate", "truncate", "fadvise64",
          "fallocate", "sendfile", "copy_file_range", "memfd_create", "stat", "fstat", "lstat", "newfstatat",
          "statx", "statfs", "fstatfs", "access", "faccessat", "faccessat2", "readlink", "readlinkat",
          "getdents", "getdents64", "getcwd", "chdir", "fchdir", "umask", "utimensat", "utime", "utimes",
          "futimesat", "chmod", "fchmod", "fchmodat", "rename", "renameat", "renameat2", "mkdir", "mkdirat",
          "rmdir", "unlink", "unlinkat", "link", "linkat", "symlink", "symlinkat", "getxattr", "lgetxattr",
          "fgetxattr", "listxattr", "llistxattr", "flistxattr")
_WAITING = ("select", "pselect6", "poll", "ppoll", "epoll_create", "epoll_create1", "epoll_ctl", "epoll_wait",
            "epoll_pwait", "epoll_pwait2", "eventfd", "eventfd2", "nanosleep", "clock_nanosleep", "pause",
            "sched_yield", "futex", "futex_waitv", "timerfd_create", "timerfd_settime", "timerfd_gettime")
# no set* that takes a pid (sched_setaffinity, setpriority): unisolated, it would reach the parent
_THREADS = ("set_robust_list", "set_tid_address", "rseq", "exit", "exit_group", "sched_getaffinity",
            "sched_getparam", "sched_getscheduler", "sched_get_priority_max", "sched_get_priority_min", "getpriority")
_SIGNALS = ("rt_sigprocmask", "rt_sigreturn", "rt_sigpending", "rt_sigsuspend", "rt_sigtimedwait", "sigaltstack",
            "restart_syscall", "alarm", "getitimer", "setitimer")
_INFO = ("getpid", "getppid", "gettid", "getuid", "geteuid", "getgid", "getegid", "getresuid", "getresgid",
         "getgroups", "getpgrp", "getpgid", "getsid", "setsid", "getrlimit", "getrusage", "times", "sysinfo",
         "uname", "getrandom", "getcpu", "clock_gettime", "clock_getres", "gettimeofday", "time")
# Unix sockets only (socket/socketpair are checked below): asyncio's self-pipe, a harness's own socketpair
_UNIX_SOCKETS = ("sendmsg", "recvmsg", "sendto", "recvfrom", "sendmmsg", "recvmmsg", "shutdown", "getsockopt",
                 "setsockopt", "getsockname", "getpeername")
ALLOWED = _MEMORY + _FILES + _WAITING + _THREADS + _SIGNALS + _INFO + _UNIX_SOCKETS

# trapped (SIGSYS -> sandbox_violation): what the diagnostics call forbidden, and the classic escape routes
DENIED = ("fork", "vfork", "execve", "execveat", "ptrace", "process_vm_readv", "process_vm_writev",
          "mount", "umount2", "pivot_root", "chroot", "unshare", "setns", "fsopen", "fsconfig", "fsmount",
          "move_mount", "open_tree", "fspick", "mount_setattr", "bpf", "keyctl", "add_key", "request_key",
          "io_uring_setup", "io_uring_enter", "io_uring_register", "perf_event_open", "kexec_load",
          "kexec_file_load", "init_module", "finit_module", "delete_module", "swapon", "swapoff", "reboot",
          "acct", "userfaultfd", "open_by_handle_at", "name_to_handle_at", "kcmp", "pidfd_getfd",
          "pidfd_send_signal", "lookup_dcookie", "syslog", "iopl", "ioperm", "settimeofday", "clock_settime",
          "adjtimex", "clock_adjtime", "sethostname", "setdomainname", "quotactl", "personality", "uselib",
          "fanotify_init", "tkill", "rt_sigqueueinfo", "rt_tgsigqueueinfo")

# allowed or trapped depending on their arguments (rules in build())
_CHECKED = ("clone", "clone3", "socket", "socketpair", "kill", "tgkill", "prlimit64", "rt_sigaction")
_CLONE_THREAD = 0x00010000
# CLONE_NEWNS, NEWCGROUP, NEWUTS, NEWIPC, NEWUSER, NEWPID, NEWNET (CLONE_NEWTIME is clone3/unshare only)
_CLONE_NEW = (0x00020000, 0x02000000, 0x04000000, 0x08000000, 0x10000000, 0x20000000, 0x40000000)
_AF_UNIX = 1
_LOW32 = 0xFFFFFFFF
_ALL64 = 0xFFFFFFFFFFFFFFFF


def _blocks(lo: int, hi: int) -> list[tuple[int, int]]:
    """``(mask, value)`` pairs whose MASKED_EQ tests on all 64 bits cover exactly ``lo..hi``."""
    out = []
    while lo <= hi:
        size = lo & -lo if lo else 1 << 63
        while size > hi - lo + 1:
            size //= 2
        out.append((_ALL64 & ~(size - 1), lo))
        lo += size
    return out


_PYSECCOMP = None


def _lib():
    """pyseccomp, imported on first use: a child handed a finished program never loads libseccomp."""
    global _PYSECCOMP
    if _PYSECCOMP is None:
        try:
            import pyseccomp
        except (ImportError, RuntimeError, OSError) as exc:  # RuntimeError: pyseccomp's "Unable to find libseccomp"
            raise SeccompUnsupported(f"libseccomp is not usable ({exc}); install the Python package 'pyseccomp' "
                                     "and the system library (apt-get install libseccomp2)") from exc
        _PYSECCOMP = pyseccomp
    return _PYSECCOMP


def build(pid: int | None = None):
    """The filter as a ``pyseccomp.SyscallFilter`` (not loaded). ``pid``: the process's own pid as it sees
    it, the only target ``kill``/``tgkill`` may signal (defaults to ``os.getpid()``)."""
    sc = _lib()
    pid = os.getpid() if pid is None else pid
    try:
        arch = sc.system_arch()
        if arch == 0:
            raise SeccompUnsupported("libseccomp does not know this machine's architecture")
        f = sc.SyscallFilter(sc.ERRNO(errno.EPERM))
        f.set_attr(sc.Attr.ACT_BADARCH, sc.KILL_PROCESS)
        f.set_attr(sc.Attr.CTL_OPTIMIZE, 2)  # a binary tree over syscall numbers, not a linear chain

        def rule(action: int, name: str, *args) -> None:
            nr = sc.resolve_syscall(sc.Arch.NATIVE, name)
            if nr != -1:  # -1: newer than this libseccomp, so it stays denied (a name this arch lacks
                f.add_rule(action, nr, *args)  # has a negative pseudo number, which libseccomp skips itself)

        def cmp(op: int, a: int, b: int = 0):
            return sc.Arg(0, op, a, b)

        for name in ALLOWED:
            rule(sc.ALLOW, name)
        for name in DENIED:
            rule(sc.TRAP, name)
        rule(sc.ERRNO(errno.ENOSYS), "clone3")
        new = sum(_CLONE_NEW)
        rule(sc.ALLOW, "clone", cmp(sc.MASKED_EQ, _CLONE_THREAD | new, _CLONE_THREAD))
        rule(sc.TRAP, "clone", cmp(sc.MASKED_EQ, _CLONE_THREAD, 0))
        for flag in _CLONE_NEW:
            rule(sc.TRAP, "clone", cmp(sc.MASKED_EQ, flag, flag))
        for name in ("socket", "socketpair"):
            rule(sc.ALLOW, name, cmp(sc.EQ, _AF_UNIX))
            rule(sc.TRAP, name, cmp(sc.NE, _AF_UNIX))
        for target in (pid, 0):
            rule(sc.ALLOW, "kill", cmp(sc.EQ, target))
        rule(sc.ALLOW, "tgkill", cmp(sc.EQ, pid))
        rule(sc.ALLOW, "prlimit64", cmp(sc.EQ, 0))
        guarded = sorted((signal.SIGSYS, signal.SIGXCPU))
        for sig in guarded:
            rule(sc.KILL_PROCESS, "rt_sigaction", cmp(sc.MASKED_EQ, _LOW32, sig))
        edges = [0] + guarded + [65]  # signals 1..64 but the guarded ones, upper half zero
        for lo, hi in itertools.pairwise(edges):
            for mask, value in _blocks(lo + 1, hi - 1):
                rule(sc.ALLOW, "rt_sigaction", cmp(sc.MASKED_EQ, mask, value))
    except OSError as exc:
        if isinstance(exc, SeccompUnsupported):
            raise
        raise SeccompUnsupported(f"libseccomp could not build the sandbox filter: {exc}") from exc
    return f


def _export(pid: int | None, method: str) -> bytes:
    fd = os.memfd_create("jitlab-seccomp")
    try:
        with os.fdopen(fd, "w+b") as out:
            getattr(build(pid), method)(out)
            out.seek(0)
            return out.read()
    except OSError as exc:
        if isinstance(exc, SeccompUnsupported):
            raise
        raise SeccompUnsupported(f"libseccomp could not export the sandbox filter: {exc}") from exc


def bpf(pid: int | None = None) -> bytes:
    """The filter as a classic-BPF program (a packed ``struct sock_filter[]``), ready for :func:`load`."""
    return _bpf(os.getpid() if pid is None else pid)


@functools.lru_cache(maxsize=4)
def _bpf(pid: int) -> bytes:  # the parent builds one program for every sandboxed child (all are SANDBOX_PID)
    with _BUILDING:  # episodes start children from several threads; libseccomp probes the kernel into globals
        return _export(pid, "export_bpf")


_BUILDING = threading.Lock()


def pfc(pid: int | None = None) -> str:
    """The filter in libseccomp's readable pseudo code."""
    return _export(pid, "export_pfc").decode()


_PR_SET_NO_NEW_PRIVS, _PR_SET_SECCOMP, _SECCOMP_MODE_FILTER = 38, 22, 2


def load(program: bytes) -> None:
    """Load a program from :func:`bpf` on the calling thread (before any other thread exists): what
    libseccomp's ``seccomp_load`` does, without loading libseccomp into the sandboxed process."""
    import ctypes

    class SockFprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    if not program or len(program) % 8:
        raise SeccompUnsupported(f"not a seccomp program: {len(program)} bytes")
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
    if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise SeccompUnsupported(f"prctl(PR_SET_NO_NEW_PRIVS) failed: {os.strerror(ctypes.get_errno())}")
    buffer = ctypes.create_string_buffer(program, len(program))
    fprog = SockFprog(len(program) // 8, ctypes.cast(buffer, ctypes.c_void_p))
    if libc.prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.addressof(fprog), 0, 0) != 0:
        raise SeccompUnsupported(f"prctl(PR_SET_SECCOMP) failed: {os.strerror(ctypes.get_errno())}")


def install(pid: int | None = None) -> None:
    """Build the filter for ``pid`` (default: this process) and load it on the calling thread."""
    load(bpf(pid))


# ---- extending the list: read a strace -ff trace -------------------------------------------------------

# the successful load (libseccomp first probes the kernel with SECCOMP_SET_MODE_FILTER and a NULL program)
_INSTALLED = re.compile(r"^(?:prctl\(PR_SET_SECCOMP|seccomp\(SECCOMP_SET_MODE_FILTER).*\{len=.*= 0$", re.MULTILINE)
_CALL = re.compile(r"^([a-z_0-9]+)\(")
_NEW_TASK = re.compile(r"^(?:clone|clone3|fork|vfork)\(.*= (\d+)(?: /\* (\d+) in strace's PID NS \*/)?$")


def traced(directory: str | Path) -> collections.Counter:
    """Syscall counts of every process in ``strace --pidns-translation -ff -o DIR/t`` output after it installed
    a seccomp filter, and of the threads it started afterwards (files ``t.<tid>``)."""
    files = {int(p.suffix[1:]): p for p in Path(directory).glob("*.*") if p.suffix[1:].isdigit()}
    todo, seen, counts = [], set(), collections.Counter()
    for tid, path in files.items():
        text = path.read_text(errors="replace")
        found = _INSTALLED.search(text)
        if found:
            todo.append((tid, text[text.find("\n", found.start()) + 1:]))
    while todo:
        tid, text = todo.pop()
        if tid in seen:
            continue
        seen.add(tid)
        for line in text.splitlines():
            call = _CALL.match(line)
            if call:
                counts[call.group(1)] += 1
            task = _NEW_TASK.match(line)
            child = int(task.group(2) or task.group(1)) if task else None  # the host tid names its file
            if child in files:
                todo.append((child, files[child].read_text(errors="replace")))
    return counts


def missing(counts: collections.Counter) -> list[str]:
    """The traced syscalls the filter does not simply allow (denied, argument-checked, or not listed)."""
    return sorted(set(counts) - set(ALLOWED))


if __name__ == "__main__":
    if len(sys.argv) > 1:
        seen_calls = traced(sys.argv[1])
        for name, n in sorted(seen_calls.items()):
            verdict = ("allowed" if name in ALLOWED else "trapped" if name in DENIED else
                       "arguments checked" if name in _CHECKED else "NOT LISTED (EPERM)")
            print(f"{name:24s} {n:8d}  {verdict}")
        print("not simply allowed (argument-checked, trapped or missing):", " ".join(missing(seen_calls)) or "none")
    else:
        print(pfc())
