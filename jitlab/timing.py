"""Where a run's time goes: each episode's wall time split into model compute, queueing for the model, backbone
overhead, harness code, sandbox start/stop, environment calls and the loop's bookkeeping, recorded in the episode's
``extra`` (``time``) and summed over a run by ``jitlab show RUN --time``.

    timer = EpisodeTime(agent, llm)            # jitlab.runtime.run_episode keeps one per episode
    obs = timer.agent_call(agent.decide, step)
    timer.as_dict(wall_s)                      # {"compute_s": ..., "queue_s": ..., ..., "other_s": ...}
    time_breakdown(load(run_dir)["episodes"])  # one row per part: seconds, share of episode time, per episode

Caveats: with concurrent episodes the parts are episode-seconds, not machine seconds (ten episodes queueing for one
model all count their wait). A sandboxed harness's code and its RPC to the parent are one part (the child does not
report its own time). ``setup_s`` (making the environment and the agent: a TextWorld game's generation) lies
outside the episode's wall time and is listed apart, as is a JIT task's ``choose_s`` (generating, validating,
selecting and repairing its harness, from the JIT record). Runs made before this breakdown have none.
"""
from __future__ import annotations

import json
import time

__all__ = ["OUTSIDE", "PARTS", "EpisodeTime", "time_breakdown"]

# the parts that add up to an episode's wall time, in the order shown, with their labels
PARTS = {"compute_s": "model compute", "queue_s": "queue for the model",
         "backbone_other_s": "backbone outside compute (render, tokenise, pipe)",
         "harness_s": "harness code (a sandboxed one: with its RPC)", "sandbox_s": "sandbox start/stop",
         "env_s": "environment steps", "other_s": "episode loop and records"}
# time a task takes outside its episode's wall time: making its environment and agent, and a JIT choosing its harness
OUTSIDE = {"setup_s": "environment and agent set-up (outside the wall time)",
           "choose_s": "JIT: choosing the harness (generate, validate, select, repair; outside the wall time)"}


class EpisodeTime:
    """Where an episode's wall time went: environment calls (``env_s``), the agent's begin/decide/observe
    (``agent_s``), and inside those the backbone calls (the LLMHandle's ``latency_s``, ``queue_s``, ``compute_s``)
    and a sandbox child's start and stop (``sandbox_s``, from SandboxedAgent.stats). ``as_dict`` derives the parts
    that add up to the episode's wall time: model compute, queue for the model, backbone overhead outside compute
    (prompt rendering, tokenisation, the engine pipe), harness code (for a sandboxed harness: with its RPC), sandbox
    start/stop, environment, and the loop's own bookkeeping (records, hooks: ``other_s``)."""

    def __init__(self, agent, llm):
        self.agent, self.llm, self.env_s, self.agent_s = agent, llm, 0.0, 0.0
        self._sandbox0 = self._sandbox()

    def _sandbox(self) -> float:
        stats = getattr(self.agent, "stats", None)
        return stats.get("start_s", 0.0) + stats.get("stop_s", 0.0) if isinstance(stats, dict) else 0.0

    def agent_call(self, fn, *args):
        """``fn(*args)`` (an agent method), its time added to ``agent_s``."""
        start = time.perf_counter()
        try:
            return fn(*args)
        finally:
            self.agent_s += time.perf_counter() - start

    def as_dict(self, wall_s: float) -> dict:
        llm = self.llm
        latency, queue, compute = (float(getattr(llm, k, 0.0)) for k in ("latency_s", "queue_s", "compute_s"))
        sandbox = self._sandbox() - self._sandbox0
        parts = {"compute_s": compute, "queue_s": queue, "backbone_other_s": max(0.0, latency - queue - compute),
                 "harness_s": max(0.0, self.agent_s - latency - sandbox), "sandbox_s": sandbox, "env_s": self.env_s}
        parts["other_s"] = max(0.0, wall_s - self.env_s - self.agent_s)
        return {k: round(v, 4) for k, v in parts.items()}


def time_breakdown(episodes):
    """A DataFrame of where the finished episodes' time went: one row per part of ``PARTS`` plus ``setup_s``, with
    the seconds summed over episodes, the share of the summed episode wall time and the mean per episode; None when
    no episode recorded a breakdown (a run from before it)."""
    import pandas as pd

    extras = [e for e in (json.loads(x or "{}") for x in episodes.get("extra", [])) if e.get("time")]
    if not extras:
        return None
    times = [e["time"] for e in extras]
    wall = sum(sum(t.get(k, 0.0) for k in PARTS) for t in times)
    rows = [{"part": label, "seconds": sum(t.get(key, 0.0) for t in times), "share": None} for key, label in PARTS.items()]
    for row in rows:
        row["share"] = row["seconds"] / wall if wall else None
    rows.append({"part": OUTSIDE["setup_s"], "seconds": sum(t.get("setup_s", 0.0) for t in times), "share": None})
    if any(e.get("choose_s") is not None for e in extras):      # a JIT run's episodes
        rows.append({"part": OUTSIDE["choose_s"], "seconds": sum(e.get("choose_s") or 0.0 for e in extras),
                     "share": None})
    for row in rows:
        row["per_episode_s"] = row["seconds"] / len(times)
    return pd.DataFrame(rows)
