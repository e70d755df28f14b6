"""TEST FIXTURE, not a result: writes fake static/streaming JIT run directories through
jitlab.store.RunStore, in the record format of docs/records.md (episodes.extra with mode,
stream_index, gen/repair/exec tokens, harness_dir, nearest_reference, bank sizes, frontier).

The numbers are synthetic (seeded random, streaming made to improve along the stream) so figures
and dashboards have JIT runs to draw before jitlab's JIT inference writes real ones. Every run's
config says ``"fixture": "tests/viz/dash/jit_runs_fixture.py"``.
"""
from __future__ import annotations

import random
from pathlib import Path
from types import SimpleNamespace

from jitlab.harness import harness_sha, read_files, seed_bank_dir
from jitlab.store import RunStore, summarize

__all__ = ["make_jit_run", "make_fixed_run"]


def _save_harness(run_dir: Path, files: dict[str, str]) -> str:
    sha = harness_sha(files)
    folder = run_dir / "harnesses" / sha
    if not folder.exists():
        folder.mkdir(parents=True)
        for name, text in files.items():
            (folder / name).write_text(text)
    return sha


def make_jit_run(out, mode: str, n: int = 12, suite: str = "toy", backbone: str = "scripted:pick-hash",
                 seed: int = 0, running: int = 0, start: int = 0, generator: str = "compose") -> Path:
    """Write (or extend) a fake JIT run with tasks ``start..start+n-1``; the last ``running`` of them
    are left unfinished (status ``running``, as a run still writing leaves them)."""
    out = Path(out)
    store = RunStore(out, {"suite": suite, "split": "dev", "backbone": backbone, "mode": mode, "harness": "jit", "seed": seed,
                           "generator": generator, "fixture": "tests/viz/dash/jit_runs_fixture.py"})
    rng = random.Random(f"{mode}-{seed}")
    for _ in range(start * 3):
        rng.random()
    ref_files = read_files(seed_bank_dir() / "react")
    ref_sha = _save_harness(out, ref_files)
    frontier = [ref_sha]
    for i in range(start, start + n):
        files = dict(ref_files)
        files["prompt.yaml"] = ref_files["prompt.yaml"].replace(
            "You are an agent solving a task step by step.",
            f"You are an agent solving a task step by step.\n  Fixture variant {mode}-{i}: check the goal first.")
        sha = _save_harness(out, files)
        task = SimpleNamespace(id=f"{suite}-dev-{i}", family="chain", split="dev")
        episode = store.start_episode(f"jit-{mode}-{i}", sha, task, seed, 0, "fixture")
        if i >= start + n - running:
            continue
        p_success = 0.35 + (0.5 * i / max(n, 1) if mode == "streaming" else 0.1)
        success = rng.random() < p_success
        gen, rep, exe = 300 + rng.randint(0, 200), rng.choice([0, 0, 150]), 400 + rng.randint(0, 600)
        tool_calls = rng.randint(2, 8)
        for step in range(tool_calls):
            store.log_step(episode, {"step": step, "tool": "act", "args": {"command": "go east"},
                                     "observation": "fixture observation", "done": step == tool_calls - 1})
        tokens = gen + rep + exe
        cost = tokens * 1e-6
        store.log_call(episode, {"step": 0, "phase": "generate", "kind": "chat", "key": f"k{i}", "backbone": backbone,
                                 "prompt_tokens": gen, "completion_tokens": 0, "cost": gen * 1e-6, "latency_s": 0.0,
                                 "cached": False, "messages": [], "text": "fixture"})
        if success and mode == "streaming":
            frontier = (frontier + [sha])[-3:]
        extra = {"mode": mode, "stream_index": i, "generator": generator, "gen_tokens": gen, "select_tokens": 0,
                 "repair_tokens": rep, "exec_tokens": exe, "gen_cost": gen * 1e-6, "repair_cost": rep * 1e-6,
                 "exec_cost": exe * 1e-6, "repair_rounds": int(rep > 0), "n_candidates": 3, "valid_candidates": 2,
                 "harness_dir": f"harnesses/{sha}", "references": [ref_sha], "nearest_reference": ref_sha,
                 "bank_size_before": 13 + i, "bank_size_after": 14 + i, "frontier": list(frontier)}
        result = {"status": "ok", "success": success, "reward": float(success), "steps": tool_calls,
                  "wall_s": 0.1, "tool_calls": tool_calls, "extra": extra}
        llm = SimpleNamespace(prompt_tokens=tokens - 50, completion_tokens=50, cost=cost, calls=1)
        store.finish_episode(episode, result, llm)
    store.close()
    if not running:
        summarize(out)
    return out


def make_fixed_run(out, harness: str = "react", limit: int = 10, backbone: str = "scripted:pick-hash") -> Path:
    """A real fixed-harness run on the toy suite with a scripted test-double backbone."""
    from jitlab.runner import RunConfig, run
    return run(RunConfig(suite="toy", harness=harness, backbone=backbone, limit=limit, out=str(out), quiet=True))
