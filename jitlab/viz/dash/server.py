"""Serve the dashboards with Panel's server on 127.0.0.1.

    jitlab dash runs/tw-streaming                         # replay of one run
    jitlab dash runs/tw-react runs/tw-streaming --live    # comparison + a replay tab per run, polling
    python -m jitlab.viz.dash.server runs/tw-streaming --port 5006 --no-show

Every browser session builds its own app from the records (one periodic callback per session in
live mode). Only 127.0.0.1 is bound; nothing is reachable from other machines. A run whose records
cannot be read (corrupt or empty run.sqlite, ...) is shown as an error box naming the file and what to
do, in place of its view (the other runs still show); the same line is printed on the terminal.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from jitlab.errors import ConfigError, JitlabError, StorageError
from jitlab.fields import check_number
from jitlab.plumbing import free_port  # re-exported: the dashboard's port
from jitlab.store import load

__all__ = ["app", "serve", "free_port", "main"]


def app(run_dirs, live: bool = False, poll_s: float = 2.0, window: int = 5, trust_code: bool = False):
    """One run: its replay. Several: a comparison tab plus one replay tab per run."""
    import panel as pn

    from jitlab.viz.dash.compare_view import compare
    from jitlab.viz.dash.replay_view import replay
    from jitlab.viz.figures import expand_runs
    runs = expand_runs(run_dirs)
    if len(runs) == 1:
        return _or_error(lambda: replay(runs[0], live=live, poll_s=poll_s, window=window, trust_code=trust_code))
    tabs = [("compare", _or_error(lambda: compare(runs, live=live, poll_s=poll_s, window=window), "compare"))]
    tabs += [(f"replay {Path(r).name}", _or_error(lambda r=r: replay(r, live=live, poll_s=poll_s, window=window,
                                                                     trust_code=trust_code), f"replay {Path(r).name}"))
             for r in runs]
    return pn.Tabs(*tabs, dynamic=True)


def _or_error(build, name: str = "error"):
    """``build()``, or an error box when the records cannot be read (a blank page says nothing)."""
    import sqlite3

    import panel as pn

    try:
        return build()
    except (JitlabError, sqlite3.DatabaseError, OSError) as exc:
        print(f"jitlab dash: error: {exc}", file=sys.stderr, flush=True)
        return pn.pane.Alert(f"**jitlab dash cannot show this run.** {exc}", alert_type="danger",
                             name=name, sizing_mode="stretch_width")


def serve(run_dirs, port: int = 0, show: bool = True, live: bool = False, poll_s: float = 2.0,
          window: int = 5, trust_code: bool = False, threaded: bool = False):
    """Serve ``app(run_dirs)`` at http://127.0.0.1:PORT/ (blocks unless ``threaded``)."""
    import errno

    import panel as pn

    from jitlab.viz.figures import expand_runs
    check_number("--port", port, "int", min=0, max=65535)
    check_number("--poll-s", poll_s, "float", min_exclusive=0)
    check_number("--window", window, "int", min=1)
    runs = [str(r) for r in expand_runs(run_dirs)]     # fail now, not in the first browser session
    for run in runs:
        try:
            load(run)  # a damaged run.sqlite is one line here, not a page with nothing on it
        except StorageError as exc:
            raise StorageError(f"{exc}; or leave {run} out of `jitlab dash`") from exc
        except ConfigError:
            if not live:  # a live dashboard may watch a run that has not written its records yet
                raise
    port = port or free_port()
    print(f"jitlab dash: http://127.0.0.1:{port}/  ({len(runs)} run{'s' * (len(runs) > 1)}"
          f"{', live' if live else ''})", flush=True)
    try:
        return pn.serve(lambda: app(runs, live, poll_s, window, trust_code), port=port, address="127.0.0.1",
                        websocket_origin=[f"127.0.0.1:{port}", f"localhost:{port}"], show=show,
                        title="jitlab dash", threaded=threaded)
    except OSError as exc:
        if exc.errno not in (errno.EADDRINUSE, errno.EACCES, errno.EADDRNOTAVAIL):
            raise
        raise ConfigError(f"--port {port}: cannot listen on 127.0.0.1:{port} ({exc.strerror or exc}); pass another "
                          "--port, or 0 for a free one") from exc


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m jitlab.viz.dash.server", description=__doc__.splitlines()[0])
    add_arguments(parser)
    args = parser.parse_args(argv)
    serve(args.run_dirs, port=args.port, show=not args.no_show, live=args.live, poll_s=args.poll_s,
          window=args.window, trust_code=args.trust_harness_code)
    return 0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_dirs", nargs="+", help="run directories (or folders of them)")
    parser.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (default: a free one)")
    parser.add_argument("--no-show", action="store_true", help="do not open a browser")
    parser.add_argument("--live", action="store_true", help="poll the records (runs still writing)")
    parser.add_argument("--poll-s", type=float, default=2.0, help="seconds between polls in live mode")
    parser.add_argument("--window", type=int, default=5, help="tasks in the rolling mean/std window")
    parser.add_argument("--trust-harness-code", action="store_true",
                        help="draw anatomy of generated harnesses (imports their code in this process)")


if __name__ == "__main__":
    sys.exit(main())
