"""Progress of long jobs (runs, grids, JIT streams, notebook batches): one layer, three renderings.

    with Progress(len(tasks), "react · textworld", quiet=cfg.quiet, run_dir=out) as bar:
        ...
        bar.update(success=result.success, tokens=llm.tokens, cost=llm.cost)   # once per finished episode

Each update counts one unit done (an episode, a task, a notebook run) and adds its outcome; the display shows
done / total, successes so far, tokens and cost so far, backbone tokens/s (tokens over wall time) and the ETA.

How it renders (``progress_mode``):

- in a Jupyter kernel: a ``tqdm.auto`` widget, always (one widget replaces the per-episode lines, so ``quiet``
  does not hide it); when the job starts, the command and URL of the live dashboard on its run directory;
- in a terminal (stdout and stderr both ttys, no ``CI`` variable): a tqdm bar on stderr, unless ``quiet``;
- otherwise (piped to a file, CI logs): one plain line on stdout per ``every`` units (default: about every
  tenth of the job) and at the end, unless ``quiet``.

``JITLAB_PROGRESS=bar|lines|off`` forces a rendering. A grid wraps its cells in ``group(n_cells, ...)``: a
total bar over cells, to which each cell's own Progress (made in any thread while the group is open) adds
its successes, tokens and cost.

Caveats: core-level (imports no jit/viz/cli); tqdm is imported only when a bar is drawn. Updates are
thread-safe. Tokens include replay-cache hits (their tokens were spent once), so tokens/s overstates the
backbone's speed on a resumed run that mostly hits the cache.
"""
from __future__ import annotations

import os
import shutil
import sys
import threading
import time
from contextlib import contextmanager
from pathlib import Path

from jitlab.paths import repo_relative
from jitlab.plumbing import free_port

__all__ = ["Progress", "group", "progress_mode", "in_notebook", "live_dashboard_hint"]

MODES = ("bar", "lines", "off")
_groups: list[Progress] = []          # open groups, innermost last (module-global: pool threads must see them)
_groups_lock = threading.Lock()


def in_notebook() -> bool:
    """True inside a Jupyter kernel (JupyterLab, papermill); IPython is not imported when it is not loaded."""
    ipython = sys.modules.get("IPython")
    shell = getattr(ipython, "get_ipython", lambda: None)() if ipython else None
    return type(shell).__name__ == "ZMQInteractiveShell"


def progress_mode(quiet: bool = False) -> str:
    """'bar' (tqdm widget or terminal bar), 'lines' (plain periodic lines) or 'off' (module docstring)."""
    forced = os.environ.get("JITLAB_PROGRESS", "").strip().lower()
    if forced in MODES:
        return forced
    if in_notebook():
        return "bar"
    if quiet:
        return "off"
    ttys = all(getattr(s, "isatty", lambda: False)() for s in (sys.stdout, sys.stderr))
    return "bar" if ttys and not os.environ.get("CI") else "lines"


def live_dashboard_hint(run_dir: str | Path) -> str:
    """The command serving the live dashboard on ``run_dir`` and the URL it will answer on. The run directory is
    named relative to the repository root (where the commands are typed) when it lies under it, so a notebook's
    executed copy holds no machine's absolute path."""
    port = free_port()
    return (f"live dashboard: run `jitlab dash --live {repo_relative(run_dir)} --port {port}` in a terminal, "
            f"then open http://127.0.0.1:{port}/")


def _duration(seconds: float) -> str:
    seconds = int(seconds)
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m" if seconds >= 3600 else f"{seconds // 60}m{seconds % 60:02d}s"


class Progress:
    """Progress of one job of ``total`` units; use as a context manager (or call ``close``)."""

    def __init__(self, total: int, desc: str = "", quiet: bool = False, unit: str = "episode", every: int | None = None,
                 run_dir: str | Path | None = None, mode: str | None = None, _group: bool = False):
        self.total, self.desc, self.unit = int(total), desc, unit
        self.mode = mode or (progress_mode(quiet) if self.total else "off")   # a resumed, finished job: nothing to show
        self.every = every or max(1, round(self.total / 10))
        self.done = self.successes = self.episodes = self.tokens = 0
        self.cost = 0.0
        self.started = time.monotonic()
        self._lock = threading.Lock()
        self._printed = 0                 # `done` at the last plain line
        with _groups_lock:
            self._parent = None if _group or not _groups else _groups[-1]
        self._bar = None
        if self.mode == "bar":
            from tqdm.auto import tqdm
            # a terminal that reports a 0 x 0 size (a pty with no size: `script`, some CI runners) makes tqdm draw
            # nothing; shutil falls back to $COLUMNS / $LINES or 80 x 24 there
            size = shutil.get_terminal_size()
            shape = {} if in_notebook() else {"ncols": size.columns, "nrows": size.lines}
            self._bar = tqdm(total=self.total, desc=desc, unit=unit, leave=True, **shape)
        if run_dir is not None and self._parent is None and self.total and in_notebook() \
                and os.environ.get("JITLAB_PROGRESS") != "off":  # a grid names its root once, not each cell
            print(live_dashboard_hint(run_dir), flush=True)

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def update(self, n: int = 1, success: bool | None = None, tokens: int = 0, cost: float = 0.0) -> None:
        """``n`` units done; ``success`` / ``tokens`` / ``cost``: their outcome (for a group, of its children)."""
        with self._lock:
            self.done += n
            self._add(success, tokens, cost)
            self._show()
        if self._parent is not None:
            self._parent.absorb(success, tokens, cost)

    def absorb(self, success: bool | None = None, tokens: int = 0, cost: float = 0.0) -> None:
        """Add a child's episode outcome without counting a unit of this job (a grid's total over cells)."""
        with self._lock:
            self._add(success, tokens, cost)
            self._show(lines=False)

    def _add(self, success, tokens, cost) -> None:
        self.episodes += success is not None
        self.successes += bool(success)
        self.tokens += int(tokens or 0)
        self.cost += float(cost or 0.0)

    def stats(self) -> str:
        """'ok 3/5 · 12,345 tok · $0.0012 · 45 tok/s' (what the bar's postfix and the plain lines show)."""
        elapsed = max(time.monotonic() - self.started, 1e-9)
        return (f"ok {self.successes}/{self.episodes} · {self.tokens:,} tok · ${self.cost:.4f} · "
                f"{self.tokens / elapsed:.0f} tok/s")

    def line(self) -> str:
        elapsed = time.monotonic() - self.started
        eta = elapsed / self.done * (self.total - self.done) if self.done else None
        pct = f" ({100 * self.done / self.total:.0f}%)" if self.total else ""
        return (f"progress{' ' + self.desc if self.desc else ''}: {self.done}/{self.total} {self.unit}s{pct} · "
                f"{self.stats()} · elapsed {_duration(elapsed)} · eta {_duration(eta) if eta is not None else '?'}")

    def _show(self, lines: bool = True) -> None:
        if self._bar is not None:
            self._bar.set_postfix_str(self.stats(), refresh=False)
            self._bar.n = self.done
            self._bar.refresh()
        elif self.mode == "lines" and lines and (self.done - self._printed >= self.every or self.done >= self.total):
            self._printed = self.done
            print(self.line(), flush=True)

    def write(self, text: str) -> None:
        """Print a line (an episode's result) without breaking the bar."""
        if self._bar is not None:
            self._bar.write(text)
        else:
            print(text, flush=True)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None
        elif self.mode == "lines" and self._printed != self.done:
            self._printed = self.done
            print(self.line(), flush=True)


@contextmanager
def group(total: int, desc: str = "total", quiet: bool = False, unit: str = "run", run_dir: str | Path | None = None):
    """A total bar over ``total`` sub-jobs; every Progress made while it is open adds its outcomes to it.
    ``run_dir``: the folder holding the sub-jobs' run directories (named in the live-dashboard hint)."""
    bar = Progress(total, desc, quiet=quiet, unit=unit, run_dir=run_dir, _group=True)
    with _groups_lock:
        _groups.append(bar)
    try:
        yield bar
    finally:
        with _groups_lock:
            _groups.remove(bar)
        bar.close()
