"""Held-out generation quality of a plan (or code) policy, the before/after number of every stage: per task, one plan
(or file set) from ``plan:<backbone>`` (``code:<backbone>``) prompted with the ``k_references`` references a B0 bank
retrieves for the task (as JIT inference, Stage I's data and Stage III prompt it: a policy is evaluated on the prompt
it was trained on), parsed, validated in the sandbox first try, then repaired for up to ``rounds`` rounds through the
JIT repair loop (jitlab.jit.repair.validate_and_repair). An unparsed reply (no plan; for code, no ``<file name=...>``
block) counts as invalid even though the generator falls back to the nearest reference's files (the repair loop sees
it as a parse_error).

    summary = evaluate_generator("embedded", "runs/eval/base", suite="textworld", limit=10)          # untrained
    summary = evaluate_generator("hf:runs/train/s1/adapter", "runs/eval/stage1", suite="textworld", limit=10)

Writes ``out``/tasks.jsonl (one record per task: parsed, valid first try, repaired, rounds, final diagnostic kind,
generation and repair tokens), repairs.jsonl (the repair loop's transitions) and summary.json (``parse_rate``,
``first_try_valid_rate``, ``repair_success_rate`` among the tasks that needed repair, ``valid_rate`` within the
rounds, tokens per task) and returns the summary. Unlike a static JIT run (``jitlab jit --mode static``) nothing is
executed beyond the validation smoke episode, and ``max_new_tokens`` bounds each reply (a CPU budget).
Caveat: the smoke episodes run on ``executor``; with a scripted test double a candidate's validity says only that
it loads, answers the interface and survives ``smoke_steps`` steps.
"""
from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from jitlab.envs.base import checked_tasks, get_suite
from jitlab.jit.bank import Bank
from jitlab.jit.generate import references
from jitlab.jit.repair import RepairConfig, RepairLog, dev_task_for, validate_and_repair
from jitlab.llm import get_backbone
from jitlab.runtime import Budget, LLMHandle
from jitlab.train.common import policy_generator, sole_folder
from jitlab.train.records import write_json, write_jsonl
from jitlab.train.stage2 import _Pinned

__all__ = ["evaluate_generator"]


@sole_folder("evaluation")   # one process per folder
def evaluate_generator(backbone: str, out: str | Path, suite: str = "textworld", split: str = "test",
                       limit: int | None = 10, rounds: int = 2, max_new_tokens: int = 160,
                       executor: str = "scripted:pick-first", smoke_steps: int = 2,
                       allow_unisolated: bool = False, k_references: int = 3, format: str = "plan",
                       code_references: int = 1, concurrency: int = 1) -> dict:
    """See the module docstring. ``backbone``: the policy (``embedded``, ``hf:<adapter>``); ``executor``: the backbone
    of the validation smoke episodes; ``format``: ``plan`` or ``code`` (the generator is ``<format>:<backbone>``, with
    ``code_references`` for code); ``concurrency``: tasks evaluated at once (their calls batch in the hf engine; not
    part of the settings). A rerun with the same settings returns the recorded summary."""
    out = Path(out)
    settings = {"backbone": backbone, "suite": suite, "split": split, "limit": limit, "rounds": rounds,
                "max_new_tokens": max_new_tokens, "executor": executor, "smoke_steps": smoke_steps,
                "k_references": k_references, "format": format,
                **({"code_references": code_references} if format == "code" else {})}
    summary_path = out / "summary.json"
    if summary_path.is_file():
        done = json.loads(summary_path.read_text())
        if all(done.get(k) == v for k, v in settings.items()):
            return done
    suite_obj = get_suite(suite)
    tasks = checked_tasks(suite_obj, split)[:limit or None]
    model, smoke = get_backbone(backbone), get_backbone(executor)
    generator = policy_generator(format, backbone, code_references, max_new_tokens=max_new_tokens,
                                 repair_max_new_tokens=max_new_tokens)
    config = RepairConfig(max_rounds=rounds, smoke_steps=smoke_steps, allow_unisolated=allow_unisolated)
    (out / "repairs.jsonl").unlink(missing_ok=True)   # a rerun evaluates afresh
    log = RepairLog(out / "repairs.jsonl")
    refs_of = {}
    if k_references:
        with Bank.create(out / "references.sqlite", seeds=True) as bank:
            refs_of = {t.id: references(bank, t.description, k_references) for t in tasks}

    def one(task) -> dict:
        gen = LLMHandle(model, Budget(max_tokens=10 ** 7), None, seed=0, phase="generate")
        fix = LLMHandle(model, Budget(max_tokens=10 ** 7), None, seed=0, phase="repair")
        refs = refs_of.get(task.id, [])
        cand = generator.generate(task.public(), refs, gen)
        outcome = validate_and_repair(
            cand, _Pinned(generator, fix), task.public(), dev_task_for(suite_obj, task), suite_obj,
            lambda phase: LLMHandle(smoke, Budget(max_tokens=10 ** 6), None, seed=0, phase=phase), config,
            out / "validate" / task.id, log=log, context={"policy": backbone, "task_id": task.id})
        first = (outcome.transitions[0]["diagnostic"] or {}) if outcome.transitions else {}
        return {"task_id": task.id, "family": task.family, "parsed": bool(cand.meta.get("parsed_files")),
                "valid_first": outcome.ok and outcome.rounds == 0, "valid": outcome.ok,
                "rounds": outcome.rounds, "outcomes": [t["outcome"] for t in outcome.transitions],
                "first_kind": first.get("kind"), "final_kind": (outcome.validation.diagnostic or {}).get("kind"),
                "gen_tokens": gen.tokens, "repair_tokens": fix.tokens, "references": [r.name for r in refs],
                "prompt_hash": cand.prompt_hash, "reply": cand.meta.get("reply")}
    with ThreadPoolExecutor(max(1, concurrency)) as pool:       # concurrent tasks share the model's batching engine
        records = list(pool.map(one, tasks))
    write_jsonl(out / "tasks.jsonl", records)
    n = len(records)
    needing = [r for r in records if not r["valid_first"]]
    summary = {**settings, "n": n,
               "parse_rate": sum(r["parsed"] for r in records) / n if n else None,
               "first_try_valid_rate": sum(r["valid_first"] for r in records) / n if n else None,
               "tasks_needing_repair": len(needing),
               "repair_success_rate": sum(r["valid"] for r in needing) / len(needing) if needing else None,
               "valid_rate": sum(r["valid"] for r in records) / n if n else None,
               "gen_tokens_per_task": sum(r["gen_tokens"] for r in records) / n if n else None,
               "repair_tokens_per_task": sum(r["repair_tokens"] for r in records) / n if n else None}
    write_json(summary_path, summary)
    return summary

