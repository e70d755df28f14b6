"""Panel dashboards over saved run records (they never run experiments).

    import jitlab.viz.dash
    jitlab.viz.dash.replay("runs/tw-streaming")              # Player over the task stream, inline in JupyterLab
    jitlab.viz.dash.compare(["runs/a", "runs/b"])           # runs side by side + Pareto view
    jitlab dash RUN_DIR [RUN_DIR...] [--live]            # served on 127.0.0.1

Importing this package imports nothing heavy; panel/holoviews load on first use.
"""
from __future__ import annotations

from jitlab.viz.dash.server import app as _app
from jitlab.viz.dash.server import serve as _serve

__all__ = ["replay", "compare", "app", "serve"]


def replay(run_dir, live: bool = False, poll_s: float = 2.0, window: int = 5, trust_code: bool = False):
    """Streaming replay of one run (see jitlab/viz/dash/replay_view.py); a servable Panel layout."""
    from jitlab.viz.dash.replay_view import replay as _replay
    return _replay(run_dir, live=live, poll_s=poll_s, window=window, trust_code=trust_code)


def compare(run_dirs, live: bool = False, poll_s: float = 5.0, window: int = 5):
    """Several runs side by side with the Pareto view (see jitlab/viz/dash/compare_view.py)."""
    from jitlab.viz.dash.compare_view import compare as _compare
    return _compare(run_dirs, live=live, poll_s=poll_s, window=window)


def app(run_dirs, live: bool = False, poll_s: float = 2.0, window: int = 5, trust_code: bool = False):
    """Replay for one run, comparison + replay tabs for several (see jitlab/viz/dash/server.py)."""
    return _app(run_dirs, live=live, poll_s=poll_s, window=window, trust_code=trust_code)


def serve(run_dirs, **options):
    """Serve ``app(run_dirs)`` on 127.0.0.1 (see jitlab/viz/dash/server.py)."""
    return _serve(run_dirs, **options)
