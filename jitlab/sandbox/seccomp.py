"""A seccomp-BPF filter for the sandbox child, built by hand (struct + ctypes, no libseccomp).

The child installs it on itself after Python start-up and BEFORE importing any harness code::

    from jitlab.sandbox.seccomp import install
    install()        # PR_SET_NO_NEW_PRIVS, then PR_SET_SECCOMP with the program from build()

What it denies (everything else is allowed):

- new processes and programs: ``fork``, ``vfork``, ``clone`` without ``CLONE_THREAD`` (threads stay
  allowed), ``execve``, ``execveat``; ``clone3`` fails with ENOSYS so glibc falls back to ``clone``;
- sockets of any family but ``AF_UNIX``;
- kernel attack surface and escapes: io_uring, ptrace, process_vm_*, mount and the new mount API,
  pivot_root, chroot, unshare, setns, bpf, keyctl/add_key/request_key, perf_event_open, module
  and kexec loading, userfaultfd, open_by_handle_at, kcmp, pidfd_getfd, swap, reboot, clocks,
  hostname, quotactl, personality, acct, syslog, iopl/ioperm;
- signals to other processes (``kill`` only to itself or its own group, ``tgkill`` only to its
  own threads, ``tkill``/``rt_sigqueueinfo``/``pidfd_send_signal`` never);
- changing the handler of SIGSYS or SIGXCPU (so a harness cannot swallow the trap or the CPU limit).

A denied call raises SIGSYS (``SECCOMP_RET_TRAP``): the child registered ``faulthandler`` for SIGSYS,
so the Python traceback of the offending line reaches stderr, then faulthandler's chaining touches
the SIGSYS handler, which this filter answers with ``KILL_PROCESS``. The parent sees death by SIGSYS
and reports ``sandbox_violation``. A wrong architecture (e.g. 32-bit ``int 0x80`` on x86_64) or an
x32 syscall kills at once.

Caveats: syscall tables for x86_64 and aarch64 only (checked against the kernel headers);
on other machines ``build`` raises :class:`SeccompUnsupported` and the sandbox refuses to run.
"""
from __future__ import annotations

import ctypes
import os
import platform
import signal
import struct

__all__ = ["build", "install", "SeccompUnsupported", "DENIED"]


class SeccompUnsupported(OSError):
    """This machine or kernel cannot take the filter (unknown architecture, prctl failed)."""


# classic BPF opcodes
_LD_W_ABS = 0x20     # BPF_LD | BPF_W | BPF_ABS
_JEQ = 0x15          # BPF_JMP | BPF_JEQ | BPF_K
_JGE = 0x35          # BPF_JMP | BPF_JGE | BPF_K
_JSET = 0x45         # BPF_JMP | BPF_JSET | BPF_K
_RET = 0x06          # BPF_RET | BPF_K

_KILL_PROCESS = 0x80000000
_TRAP = 0x00030000
_ERRNO = 0x00050000
_ALLOW = 0x7FFF0000

_PR_SET_NO_NEW_PRIVS = 38
_PR_SET_SECCOMP = 22
_SECCOMP_MODE_FILTER = 2
_CLONE_THREAD = 0x00010000
_AF_UNIX = 1
_X32_BIT = 0x40000000

# offsets into struct seccomp_data: int nr; u32 arch; u64 ip; u64 args[6] (low word first: little endian)
_OFF_NR, _OFF_ARCH = 0, 4


def _arg(i: int) -> int:
    return 16 + 8 * i


# denied outright; numbers from asm/unistd_64.h (x86_64) and asm-generic/unistd.h (aarch64)
DENIED = ("fork", "vfork", "execve", "execveat", "ptrace", "process_vm_readv", "process_vm_writev",
          "mount", "umount2", "pivot_root", "chroot", "unshare", "setns", "fsopen", "fsconfig", "fsmount",
          "move_mount", "open_tree", "fspick", "mount_setattr", "bpf", "keyctl", "add_key", "request_key",
          "io_uring_setup", "io_uring_enter", "io_uring_register", "perf_event_open", "kexec_load",
          "kexec_file_load", "init_module", "finit_module", "delete_module", "swapon", "swapoff", "reboot",
          "acct", "userfaultfd", "open_by_handle_at", "name_to_handle_at", "kcmp", "pidfd_getfd",
          "pidfd_send_signal", "lookup_dcookie", "syslog", "iopl", "ioperm", "settimeofday", "clock_settime",
          "adjtimex", "clock_adjtime", "sethostname", "setdomainname", "quotactl", "personality", "uselib",
          "fanotify_init", "tkill", "rt_sigqueueinfo", "rt_tgsigqueueinfo")

_TABLES = {
    "x86_64": (0xC000003E, {
        "fork": 57, "vfork": 58, "clone": 56, "clone3": 435, "execve": 59, "execveat": 322, "ptrace": 101,
        "process_vm_readv": 310, "process_vm_writev": 311, "mount": 165, "umount2": 166, "pivot_root": 155,
        "chroot": 161, "unshare": 272, "setns": 308, "fsopen": 430, "fsconfig": 431, "fsmount": 432,
        "move_mount": 429, "open_tree": 428, "fspick": 433, "mount_setattr": 442, "bpf": 321, "keyctl": 250,
        "add_key": 248, "request_key": 249, "io_uring_setup": 425, "io_uring_enter": 426,
        "io_uring_register": 427, "perf_event_open": 298, "kexec_load": 246, "kexec_file_load": 320,
        "init_module": 175, "finit_module": 313, "delete_module": 176, "swapon": 167, "swapoff": 168,
        "reboot": 169, "acct": 163, "userfaultfd": 323, "open_by_handle_at": 304, "name_to_handle_at": 303,
        "kcmp": 312, "pidfd_getfd": 438, "pidfd_send_signal": 424, "lookup_dcookie": 212, "syslog": 103,
        "iopl": 172, "ioperm": 173, "settimeofday": 164, "clock_settime": 227, "adjtimex": 159,
        "clock_adjtime": 305, "sethostname": 170, "setdomainname": 171, "quotactl": 179, "personality": 135,
        "uselib": 134, "fanotify_init": 300, "tkill": 200, "rt_sigqueueinfo": 129, "rt_tgsigqueueinfo": 297,
        "socket": 41, "socketpair": 53, "rt_sigaction": 13, "kill": 62, "tgkill": 234}),
    "aarch64": (0xC00000B7, {
        "clone": 220, "clone3": 435, "execve": 221, "execveat": 281, "ptrace": 117, "process_vm_readv": 270,
        "process_vm_writev": 271, "mount": 40, "umount2": 39, "pivot_root": 41, "chroot": 51, "unshare": 97,
        "setns": 268, "fsopen": 430, "fsconfig": 431, "fsmount": 432, "move_mount": 429, "open_tree": 428,
        "fspick": 433, "mount_setattr": 442, "bpf": 280, "keyctl": 219, "add_key": 217, "request_key": 218,
        "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427, "perf_event_open": 241,
        "kexec_load": 104, "kexec_file_load": 294, "init_module": 105, "finit_module": 273,
        "delete_module": 106, "swapon": 224, "swapoff": 225, "reboot": 142, "acct": 89, "userfaultfd": 282,
        "open_by_handle_at": 265, "name_to_handle_at": 264, "kcmp": 272, "pidfd_getfd": 438,
        "pidfd_send_signal": 424, "lookup_dcookie": 18, "syslog": 116, "settimeofday": 170,
        "clock_settime": 112, "adjtimex": 171, "clock_adjtime": 266, "sethostname": 161,
        "setdomainname": 162, "quotactl": 60, "personality": 92, "fanotify_init": 262, "tkill": 130,
        "rt_sigqueueinfo": 138, "rt_tgsigqueueinfo": 240, "socket": 198, "socketpair": 199,
        "rt_sigaction": 134, "kill": 129, "tgkill": 131}),
}


def _ins(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k & 0xFFFFFFFF)


def _when(nr: int, body: list[bytes]) -> list[bytes]:
    """``if syscall == nr: body`` (body must end in returns; the accumulator holds nr on entry)."""
    return [_ins(_JEQ, nr, 0, len(body))] + body


def build(pid: int | None = None, machine: str | None = None) -> bytes:
    """The filter program (a packed ``struct sock_filter[]``). ``pid``: the process's own pid, the
    only target ``kill``/``tgkill`` may signal (defaults to ``os.getpid()``)."""
    machine = machine or platform.machine()
    if machine not in _TABLES:
        raise SeccompUnsupported(f"no seccomp syscall table for {machine!r} (have {', '.join(_TABLES)}); "
                                 "the sandbox cannot run untrusted code on this machine")
    arch, nr = _TABLES[machine]
    pid = os.getpid() if pid is None else pid
    prog = [_ins(_LD_W_ABS, _OFF_ARCH), _ins(_JEQ, arch, 1, 0), _ins(_RET, _KILL_PROCESS),
            _ins(_LD_W_ABS, _OFF_NR)]
    if machine == "x86_64":
        prog += [_ins(_JGE, _X32_BIT, 0, 1), _ins(_RET, _KILL_PROCESS)]
    for name in DENIED:
        if name in nr:
            prog += _when(nr[name], [_ins(_RET, _TRAP)])
    prog += _when(nr["clone3"], [_ins(_RET, _ERRNO | 38)])  # ENOSYS: glibc falls back to clone
    prog += _when(nr["clone"], [_ins(_LD_W_ABS, _arg(0)), _ins(_JSET, _CLONE_THREAD, 0, 1),
                                _ins(_RET, _ALLOW), _ins(_RET, _TRAP)])
    for name in ("socket", "socketpair"):
        prog += _when(nr[name], [_ins(_LD_W_ABS, _arg(0)), _ins(_JEQ, _AF_UNIX, 0, 1),
                                 _ins(_RET, _ALLOW), _ins(_RET, _TRAP)])
    prog += _when(nr["rt_sigaction"], [_ins(_LD_W_ABS, _arg(0)), _ins(_JEQ, signal.SIGSYS, 2, 0),
                                       _ins(_JEQ, signal.SIGXCPU, 1, 0), _ins(_RET, _ALLOW),
                                       _ins(_RET, _KILL_PROCESS)])
    prog += _when(nr["kill"], [_ins(_LD_W_ABS, _arg(0)), _ins(_JEQ, pid, 2, 0), _ins(_JEQ, 0, 1, 0),
                               _ins(_RET, _TRAP), _ins(_RET, _ALLOW)])
    prog += _when(nr["tgkill"], [_ins(_LD_W_ABS, _arg(0)), _ins(_JEQ, pid, 0, 1),
                                 _ins(_RET, _ALLOW), _ins(_RET, _TRAP)])
    prog.append(_ins(_RET, _ALLOW))
    if len(prog) > 4096:
        raise SeccompUnsupported("seccomp program too long")
    return b"".join(prog)


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def install(pid: int | None = None) -> None:
    """Install the filter on the calling thread (call it before any thread exists)."""
    program = build(pid)
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
    if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise SeccompUnsupported(f"prctl(PR_SET_NO_NEW_PRIVS) failed: {os.strerror(ctypes.get_errno())}")
    buffer = ctypes.create_string_buffer(program, len(program))
    fprog = _SockFprog(len(program) // 8, ctypes.cast(buffer, ctypes.c_void_p))
    if libc.prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.addressof(fprog), 0, 0) != 0:
        raise SeccompUnsupported(f"prctl(PR_SET_SECCOMP) failed: {os.strerror(ctypes.get_errno())}")
