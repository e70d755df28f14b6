"""Sandbox overhead: per-episode start cost and per-step RPC cost, as shares of episode wall time.

    .venv/bin/python benchmarks/sandbox_overhead.py [--tasks 10] [--latency-ms 0,50] [--harnesses tiny,react,numpy]
                                                    [--json out.json]

For each harness (a tiny test harness written to a temp folder, the same importing NumPy, and the
``react`` seed) and each simulated backbone latency, it plays the toy suite's dev tasks twice in the same process: once
in-process (``HarnessAgent``) and once sandboxed (``SandboxedAgent``: bubblewrap + seccomp +
rlimits), with the same scripted backbone (``scripted:pick-first``, a TEST DOUBLE; ``--latency-ms``
adds a sleep per call to stand in for a real model). It reports, per episode:

    start_ms     child start to ``ready`` (bwrap, Python start-up, imports, harness load)
    stop_ms      child shutdown at the end of the episode
    rpc_ms/step  (sandboxed wall - in-process wall - start - stop) / steps: pipe round trips
                 (decide, chat, observe), JSON and checks
    start%, rpc%  those costs as shares of the sandboxed episode's wall time

Caveats: the toy suite steps in microseconds and the scripted backbone answers at once, so the
0 ms rows are the worst case; with a real model each step costs tens of ms to seconds and the
shares shrink accordingly. Numbers depend on the machine and its load.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

from jitlab.envs.toy import ToySuite
from jitlab.harness import load_harness
from jitlab.llm.scripted import get_scripted
from jitlab.runtime import Budget, HarnessAgent, LLMHandle, run_episode
from jitlab.sandbox import SandboxConfig, SandboxedAgent, probe

_TINY = {
    "memory.py": "from jitlab.protocol import View\n\n\nclass Memory:\n    def reset(self, ctx):\n"
                 "        self.events = []\n\n    def update(self, event, ctx):\n        self.events.append(event)\n\n"
                 "    def view(self, ctx):\n        return View('\\n'.join(e.content for e in self.events[-4:]))\n",
    "planning.py": "from jitlab.protocol import Directive\n\n\nclass Planner:\n    def plan(self, view, ctx):\n"
                   "        return Directive('')\n",
    "tool_policy.py": "class CapabilityPolicy:\n    def select(self, directive, view, registry, ctx):\n"
                      "        return list(registry)\n",
    "action.py": "from jitlab.protocol import Decision\n\n\nclass Action:\n    def act(self, context, ctx):\n"
                 "        options = '\\n'.join('- ' + c for c in context.observation.candidates)\n"
                 "        reply = ctx.llm.chat([{'role': 'user', 'content': context.view.text + '\\n' + options}])\n"
                 "        return Decision('act', {'command': reply.text.split('Action:')[-1].strip()})\n",
    "prompt.yaml": "system: tiny\n",
    "description.yaml": "name: tiny\nlineage: [benchmark]\n",
}


# the tiny harness plus a NumPy import at load: thousands of stat/open/mmap calls through the seccomp filter
_NUMPY = {**_TINY, "memory.py": "import numpy\n" + _TINY["memory.py"], "description.yaml": "name: numpy\n"}


def _write(root: Path, name: str, files: dict) -> Path:
    folder = root / name
    folder.mkdir()
    for file, text in files.items():
        (folder / file).write_text(text)
    return folder


def _play(harness, specs, latency_s: float, sandboxed: bool, config: SandboxConfig) -> list[dict]:
    rows = []
    suite = ToySuite()
    for spec in specs:
        budget = Budget()
        llm = LLMHandle(get_scripted("pick-first", delay_s=latency_s), budget)
        if sandboxed:
            agent = SandboxedAgent(harness, llm, config)
        else:
            agent = HarnessAgent(load_harness(harness), llm)
        start = time.perf_counter()
        result = run_episode(suite.make_env(spec), agent, llm, budget)
        if sandboxed:
            agent.close()  # counted: a finished episode's child must be gone
        wall = time.perf_counter() - start
        if result.status != "ok":
            raise RuntimeError(f"{spec.id}: episode failed: {result.error}")
        row = {"task": spec.id, "steps": result.steps, "wall_s": wall}
        if sandboxed:
            row.update(start_s=agent.stats["start_s"], stop_s=agent.stats["stop_s"])
        rows.append(row)
    return rows


def bench(harness, name: str, specs, latency_ms: float, config: SandboxConfig) -> dict:
    latency_s = latency_ms / 1000
    _play(harness, specs[:1], latency_s, True, config)  # warm the page cache and the probe
    direct = _play(harness, specs, latency_s, False, config)
    boxed = _play(harness, specs, latency_s, True, config)
    per_episode = []
    for d, b in zip(direct, boxed):
        rpc = max(0.0, b["wall_s"] - d["wall_s"] - b["start_s"] - b["stop_s"])
        per_episode.append({"in_process_s": d["wall_s"], "sandboxed_s": b["wall_s"], "start_s": b["start_s"],
                            "stop_s": b["stop_s"], "rpc_per_step_s": rpc / b["steps"], "steps": b["steps"],
                            "start_share": b["start_s"] / b["wall_s"], "rpc_share": rpc / b["wall_s"]})
    med = {k: statistics.median(e[k] for e in per_episode) for k in per_episode[0]}
    return {"harness": name, "latency_ms": latency_ms, "episodes": len(per_episode), **med}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tasks", type=int, default=10, help="toy dev tasks per configuration")
    parser.add_argument("--latency-ms", default="0,50", help="comma-separated simulated backbone latencies")
    parser.add_argument("--harnesses", default="tiny,react,numpy", help="comma-separated: tiny, react, numpy "
                                                                        "(the tiny harness importing NumPy)")
    parser.add_argument("--json", default=None, help="also write the rows to this file")
    args = parser.parse_args(argv)
    ok, reason = probe()
    if not ok:
        print(f"bubblewrap sandbox unavailable: {reason}", file=sys.stderr)
        return 2
    config = SandboxConfig()
    specs = ToySuite().tasks("dev")[: args.tasks]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        known = {"tiny": lambda: _write(Path(tmp), "tiny", _TINY), "react": lambda: "react",
                 "numpy": lambda: _write(Path(tmp), "numpy", _NUMPY)}
        harnesses = {name: known[name]() for name in args.harnesses.split(",")}
        for latency in [float(x) for x in args.latency_ms.split(",")]:
            for name, harness in harnesses.items():
                rows.append(bench(harness, name, specs, latency, config))
    print(f"medians over {args.tasks} toy episodes each; backbone: scripted:pick-first (test double) + latency")
    print(f"{'harness':8} {'lat_ms':>6} {'steps':>5} {'inproc_ms':>9} {'sandbox_ms':>10} {'start_ms':>8} "
          f"{'stop_ms':>7} {'rpc_ms/step':>11} {'start%':>6} {'rpc%':>6}")
    for r in rows:
        print(f"{r['harness']:8} {r['latency_ms']:6.0f} {r['steps']:5.0f} {r['in_process_s'] * 1e3:9.1f} "
              f"{r['sandboxed_s'] * 1e3:10.1f} {r['start_s'] * 1e3:8.1f} {r['stop_s'] * 1e3:7.1f} "
              f"{r['rpc_per_step_s'] * 1e3:11.2f} {r['start_share'] * 100:6.1f} {r['rpc_share'] * 100:6.1f}")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
