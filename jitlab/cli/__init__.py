"""The ``jitlab`` command: one parser, one file per command group, options generated from the config dataclasses.

    jitlab run --suite toy --harness react --backbone scripted:pick-first --limit 2
    jitlab jit --suite toy --mode streaming --backbone scripted:pick-hash --limit 4
    python -m jitlab.cli --help

Files: ``options.py`` (dataclass fields -> options), ``run.py`` (run, show, suites, harnesses), ``jit.py``,
``bank.py``, ``viz.py`` (figures, dash, batch), ``compare.py``, ``train.py``, ``engineer.py``. The command modules import only
``options.py`` (no circle); each imports its heavy dependencies inside the command, so ``jitlab --help`` stays fast
(no torch, transformers, litellm or panel import). Errors of the jitlab hierarchy print as one line (exit 2).
Output piped into a reader that stops early (``jitlab show RUN | head``) is no error: a command that only reads,
or prints after its work, ends quietly (exit 0); one still working (a run) stops with one line saying so (exit 141,
what the shell reports for a writer stopped by its pipe).
"""
from __future__ import annotations

import argparse
import sys

from jitlab.cli.bank import add_bank_commands
from jitlab.cli.compare import add_compare_commands
from jitlab.cli.engineer import add_engineer_commands
from jitlab.cli.jit import add_jit_commands
from jitlab.cli.run import add_run_commands
from jitlab.cli.train import add_train_commands
from jitlab.cli.viz import add_viz_commands
from jitlab.errors import JitlabError

__all__ = ["build_parser", "main"]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="jitlab", description="Research workbench for LLM agent harnesses.")
    sub = parser.add_subparsers(dest="command", required=True)
    add_run_commands(sub)
    add_jit_commands(sub)
    add_bank_commands(sub)
    add_viz_commands(sub)
    add_compare_commands(sub)
    add_train_commands(sub)
    add_engineer_commands(sub)
    return parser


def _oserror_line(exc: OSError, out=None) -> str:
    """One line for an OSError nothing more precise caught: the error, the file (else the command's ``--out``,
    where it was writing), what to do."""
    import errno
    import socket
    if isinstance(exc, socket.gaierror | socket.herror):  # a host or port, not a file
        return f"a network address was refused ({exc.strerror or exc}); check the host and --port given"
    where = " -> ".join(str(f) for f in (exc.filename, exc.filename2) if f) or (
        f"a file under {out}" if out else "a file jitlab read or wrote")
    todo = {errno.ENOSPC: "free space, then rerun the same command (a run resumes where it stopped)",
            errno.EACCES: "check its permissions or choose another path", errno.EPERM: "choose another path",
            errno.EROFS: "choose a path on a writable file system", errno.EEXIST: "something is in the way; "
            "choose another path", errno.ENOTDIR: "a parent of it is a file; choose "
            "another path", errno.EISDIR: "it is a directory; pass a file", errno.ENOENT: "check the path"}
    return f"{where}: {exc.strerror or exc}" + (f"; {todo[exc.errno]}" if exc.errno in todo else "")


# commands whose output is their result or comes after their work: a reader that closes the pipe early loses nothing
_PRINT_AFTER_WORK = {"show", "compare", "suites", "harnesses", "export", "figures", "bank"}


def _stdout_closed() -> bool:
    """Whether standard output is a pipe whose reader has gone (what a BrokenPipeError on it means)."""
    import select
    try:
        sys.stdout.flush()
    except (BrokenPipeError, ValueError):
        return True
    except OSError:
        return False
    try:
        poll = select.poll()
        poll.register(sys.stdout.fileno(), select.POLLOUT)
        return any(events & (select.POLLERR | select.POLLHUP) for _, events in poll.poll(0))
    except (OSError, ValueError, AttributeError):
        return False


def _reader_left(args) -> int:
    """Standard output's reader has gone: no more output (none at exit either); 0 when the command's work was done."""
    import os
    try:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):
        pass
    if args.command in _PRINT_AFTER_WORK:
        return 0
    print("jitlab: stopped: the program reading its output exited (broken pipe); what finished is recorded: rerun the "
          "same command to resume", file=sys.stderr)
    return 141


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    import os
    import sqlite3
    import warnings

    shown = warnings.formatwarning  # jitlab's warnings (a cache or bank moved aside) as one line each
    warnings.formatwarning = lambda message, category, *rest, **kw: f"jitlab: warning: {message}\n"
    try:
        rc = args.func(args)
        sys.stdout.flush()   # here, not at exit: a reader that has gone is caught below
        return rc
    except JitlabError as exc:
        print(f"jitlab: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        if os.environ.get("JITLAB_DEBUG"):
            raise
        print("\njitlab: interrupted; what finished is recorded, episodes in flight rerun: rerun the same command to "
              "resume", file=sys.stderr)
        return 130
    # Backstop for user mistakes no precise check caught (a file where a folder goes, a full disk, a damaged
    # database): one line, not a traceback. JITLAB_DEBUG=1 shows the traceback.
    except (OSError, sqlite3.DatabaseError) as exc:
        if isinstance(exc, BrokenPipeError) and _stdout_closed():   # `jitlab show RUN | head`: not an error
            return _reader_left(args)
        if os.environ.get("JITLAB_DEBUG"):
            raise
        out = getattr(args, "out", None)
        if isinstance(exc, OSError):
            line = _oserror_line(exc, out)
        elif "disk is full" in str(exc):
            line = (f"no space left on the device writing an SQLite file{f' under {out}' if out else ''} ({exc}); "
                    "free space, then rerun the same command (a run resumes where it stopped)")
        else:
            line = (f"an SQLite file jitlab read or wrote failed ({exc}); if it is a run's run.sqlite, rerun with "
                    "--new-run (the old file is kept beside it); if it is the replay cache, delete "
                    "$JITLAB_HOME/replay.sqlite")
        print(f"jitlab: error: {line} (JITLAB_DEBUG=1 shows the traceback)", file=sys.stderr)
        return 2
    finally:
        warnings.formatwarning = shown

