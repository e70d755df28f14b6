"""Engineer training (issue 13): cold-start SFT on verified, non-regressive patches, then GRPO with Δ success as the
reward, on the train stages' infrastructure (configs, resumable phases, manifest, adapter link, stage3's GRPO trainer).

    jitlab engineer run --suite toy --harness react --backbone scripted:pick-first --engineer rules -k 4 --out runs/eng
    jitlab train engineer data --set loops=[runs/eng] --out runs/train/eng-data
    jitlab train engineer sft --set data=runs/train/eng-data --set steps=20 --out runs/train/eng-sft
    jitlab train engineer grpo --set data=runs/train/eng-data --set policy=runs/train/eng-sft/adapter --out runs/train/eng-grpo
    jitlab engineer run ... --engineer hf:runs/train/eng-grpo/adapter          # the trained engineer in the loop

Data (``build_engineer_data``): from each loop folder's ``candidates.jsonl``, per packet (round) the valid patches with
Δ >= ``min_delta``, largest Δ first, at most ``per_packet`` (distinct patches): ``sft.jsonl`` rows (prompt: the packet
rendered exactly as the model engineer sees it, jitlab.engineer.proposer.render_prompt with the patch in use;
completion: the patch in one ```python block, what the engineer's reply parser takes). Every packet is also a GRPO
prompt in ``packets.jsonl``, with what re-running it needs: the loop's run settings (suite, harness, backbone, seed,
step and token caps), its task ids and the patch in use when it was built. A loop on the test split is refused.

SFT (``run_engineer_sft``): SFTTrainer, completion-only loss (TRL's default for prompt-completion rows), a fresh LoRA.

GRPO (``run_engineer_grpo``): per step one packet, K = ``num_generations`` sampled replies; each reply's patch is
scored exactly as the loop scores a candidate (jitlab.engineer.loop.evaluate_patch: static checks and a sandboxed
smoke episode, then the packet's tasks re-run with the patch in the sandbox, replay cache on) and its reward is
Δ = success(patched) − success(reference) on the same task ids and seed, the reference being the packet's harness
(base + the patch in use) run the same way into ``runs/<packet id>/base`` once. An invalid patch gets
``invalid_reward`` (<= −1, the lowest). TRL normalises the rewards within each group (its default ``scale_rewards``).
Run folders are resumable, so a patch sampled twice is not re-run. ``micro_batch`` splits each group's loss forward
and backward into micro-batches with gradient accumulation (stage3.grpo_batching), so the peak memory scales with the
micro-batch, not with K (17.2 GB at K = 16 on a 2.2k-token packet with recomputation, whole groups). The summary's
``groups`` is the share of groups with non-zero advantage (jitlab.train.evo.signal_share: a group of equal rewards
teaches nothing; ``nonzero_advantage_share`` per step in the logs). Files: ``grpo/`` (checkpoints, ``runs/``
TensorBoard, log_history.jsonl, adapter/), ``adapter`` -> grpo/adapter, ``completions.jsonl`` (one row per sampled
patch: packet, sha, valid, diagnostic kind, Δ, reward), ``runs/``, ``patches/``, ``manifest.json``.

Caveat: a reward is as noisy as the batch is small (6 tasks: steps of 1/6); the loop's scripted double gives exact,
deterministic Δ, a sampled executor does not.
"""
from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import asdict
from pathlib import Path

from jitlab.engineer.loop import EngineerConfig, evaluate_patch, run_batch
from jitlab.engineer.patches import apply_patch
from jitlab.engineer.proposer import extract_patch, render_prompt
from jitlab.envs.base import checked_tasks, get_suite
from jitlab.errors import ConfigError
from jitlab.harness import resolve
from jitlab.jit.repair import dev_task_for
from jitlab.llm.hf import load_base
from jitlab.plumbing import json_digest
from jitlab.run_options import EpisodeOptions, derive, option_names
from jitlab.train import common
from jitlab.train.common import fingerprint, fitting, link_adapter, lora_config, open_run, sole_folder, train_phase
from jitlab.train.config import EngineerDataConfig, EngineerGRPOConfig, EngineerSFTConfig, PatchRuns
from jitlab.train.evo import signal_share
from jitlab.train.records import file_sha256, read_jsonl, write_json, write_jsonl
from jitlab.train.stage3 import completion_text, generation_rows, grpo_trainer, policy_chain

__all__ = ["PatchEvaluator", "build_engineer_data", "patch_reward", "run_engineer_grpo", "run_engineer_sft"]

# the loop settings a packet's re-run needs (jitlab.engineer.loop.EngineerConfig fields): what it ran and the episode
# options it ran under
_RUN_FIELDS = ("suite", "harness", "backbone", "backbone_options", "split", "family", "smoke_steps",
               *option_names(EpisodeOptions))


def _completion(patch: str) -> list[dict]:
    return [{"role": "assistant", "content": f"```python\n{patch.rstrip()}\n```"}]


def _loop(folder: Path) -> tuple[dict, list[dict]]:
    summary, log = folder / "summary.json", folder / "candidates.jsonl"
    if not log.is_file() or not summary.is_file():
        raise ConfigError(f"--loops {folder}: not a finished engineer-loop folder (needs candidates.jsonl and "
                          "summary.json); run `jitlab engineer run --out ...` to its end first")
    config = json.loads(summary.read_text())["config"]
    if config.get("split") == "test":
        raise ConfigError(f"--loops {folder} ran on the test split; the engineer is trained on dev/train batches only")
    return config, read_jsonl(log)


@sole_folder("engineer data")
def build_engineer_data(cfg: EngineerDataConfig, out: str | Path) -> dict:
    """Write ``sft.jsonl``, ``packets.jsonl`` and ``manifest.json`` into ``out`` (see the module docstring)."""
    if not cfg.loops:
        raise ConfigError("no --loops given: pass engineer-loop output folders (--set loops=[runs/eng])")
    out = Path(out)
    sft, packets, hashes = [], [], {}
    dropped = defaultdict(int)
    for loop in map(Path, cfg.loops):
        config, candidates = _loop(loop)
        hashes[str(loop)] = file_sha256(loop / "candidates.jsonl")
        by_round = defaultdict(list)
        for c in candidates:
            by_round[(c["round"], c["packet_sha"])].append(c)
        for (rnd, packet_sha), group in sorted(by_round.items()):
            packet = json.loads((loop / f"round{rnd}" / "packet.json").read_text())
            current = group[0].get("parent_patch") or ""
            prompt = [{"role": "user", "content": render_prompt(packet, current)}]
            run = {k: config[k] for k in _RUN_FIELDS if k in config}
            packet_id = json_digest([packet_sha, current, run])[:16]
            packets.append({"packet_id": packet_id, "prompt": prompt, "packet_sha": packet_sha, "loop": str(loop),
                            "round": rnd, "task_ids": packet["batch"]["task_ids"], "parent_patch": current,
                            "run": run, "split": config.get("split")})
            kept, seen = [], set()
            for c in sorted(group, key=lambda c: (-(c.get("delta") if c.get("delta") is not None else -9), c["index"])):
                if not c["validation"]["ok"] or c.get("delta") is None:
                    dropped["invalid"] += 1
                elif c["delta"] < cfg.min_delta:
                    dropped["regressive"] += 1
                elif c["sha"] in seen:
                    dropped["duplicate"] += 1
                elif len(kept) >= cfg.per_packet:
                    dropped["over_per_packet"] += 1
                else:
                    seen.add(c["sha"])
                    kept.append(c)
            sft += [{"prompt": prompt, "completion": _completion(c["patch"]), "packet_id": packet_id,
                     "packet_sha": packet_sha, "loop": str(loop), "round": rnd, "index": c["index"], "sha": c["sha"],
                     "delta": c["delta"], "engineer": c.get("engineer"), "split": config.get("split")} for c in kept]
    unique = list({p["packet_id"]: p for p in packets}.values())
    dropped["duplicate_packets"] = len(packets) - len(unique)
    out.mkdir(parents=True, exist_ok=True)
    write_jsonl(out / "sft.jsonl", sft)
    write_jsonl(out / "packets.jsonl", unique)
    manifest = {"kind": "engineer_data", "config": asdict(cfg), "inputs": hashes,
                "counts": {"sft": len(sft), "sft_positive": sum(r["delta"] > 0 for r in sft), "packets": len(unique)},
                "dropped": dict(dropped), "files": {n: file_sha256(out / n) for n in ("sft.jsonl", "packets.jsonl")}}
    write_json(out / "manifest.json", manifest)
    return manifest


def _read(data: str | Path, name: str) -> tuple[list[dict], str]:
    path = Path(data) / name
    if not path.is_file():
        raise ConfigError(f"data {data}: no {name}; build it with `jitlab train engineer data --out {data} ...`")
    rows = read_jsonl(path)
    if not rows:
        raise ConfigError(f"{path} holds no row: the loops gave no valid non-regressive patch (or no packet); run "
                          "more loop rounds or lower min_delta")
    if any(r.get("split") == "test" for r in rows):
        raise ConfigError(f"{path} holds test-split rows; the engineer never trains on test: rebuild the data")
    return rows, file_sha256(path)


@sole_folder("engineer SFT")
def run_engineer_sft(cfg: EngineerSFTConfig, out: str | Path) -> dict:
    """Cold-start SFT into ``out`` (resumable); returns the manifest. Adapter: ``out/adapter``."""
    if cfg.threads:
        import torch
        torch.set_num_threads(cfg.threads)
    common.check_reporters(cfg)
    rows, sha = _read(cfg.data, "sft.jsonl")
    out = Path(out)
    manifest = open_run(out, "engineer_sft", fingerprint(cfg, {"sft.jsonl": sha}),
                        {"config": asdict(cfg), "counts": {"sft": len(rows)}})

    def sft_trainer(folder: Path):
        from datasets import Dataset
        from trl import SFTConfig, SFTTrainer

        tokenizer, model = load_base(cfg.base)
        kept = fitting(tokenizer, rows, cfg.max_length, "engineer sft")
        dataset = Dataset.from_list([{"prompt": r["prompt"], "completion": r["completion"]} for r in kept])
        args = SFTConfig(**common.training_arguments(cfg, folder, cfg.steps, cfg.epochs, cfg.learning_rate, len(kept)),
                         packing=False)
        return SFTTrainer(model=model, args=args, train_dataset=dataset, processing_class=tokenizer,
                          peft_config=lora_config(cfg)), len(rows) - len(kept)
    manifest["phases"]["sft"] = train_phase("sft", out, sft_trainer, rows, cfg.base, [])
    manifest["adapter"] = link_adapter(out, out / "sft" / "adapter")
    write_json(out / "manifest.json", manifest)
    return manifest


class PatchEvaluator:
    """Score a patch on a packet as the engineer loop scores a candidate (module docstring); ``out`` holds the runs.
    ``controls`` (jitlab.train.config.PatchRuns, e.g. the EngineerGRPOConfig) sets how its runs go: concurrency,
    retries, the wall budget of each episode, the spend caps of all of them together, isolation."""

    def __init__(self, packets: list[dict], out: Path, controls=None):
        self.packets = {p["packet_id"]: p for p in packets}
        self.out, self.controls = Path(out), controls if controls is not None else PatchRuns()
        self.spend = self.controls.command_spend(self.out)
        self._ctx: dict[str, tuple] = {}

    def context(self, packet_id: str) -> tuple:
        """(loop config, base folder, tasks, suite, dev task, reference run summary) of a packet, built once."""
        if packet_id not in self._ctx:
            p = self.packets[packet_id]
            run = dict(p["run"])
            run["allow_unisolated"] = run.get("allow_unisolated") or self.controls.allow_unisolated
            run.pop("max_wall_s", None)   # the evaluator's own: the reference and every patch run under it
            cfg = derive(EngineerConfig, self.controls, **run, out=str(self.out), quiet=True)
            suite = get_suite(cfg.suite)
            split = checked_tasks(suite, cfg.split, cfg.family)
            at = {t.id: i for i, t in enumerate(split)}
            missing = [i for i in p["task_ids"] if i not in at]
            if missing:
                raise ConfigError(f"packet {packet_id} ({p['loop']}): task {missing[0]} is not in suite {cfg.suite} "
                                  f"{cfg.split}; rebuild the data")
            # the loop's batch is a slice of the split; a task whose episode never finished is not in the packet,
            # so the span of the listed ones is re-run (Δ counts only pairs both runs finished)
            span = sorted(at[i] for i in p["task_ids"])
            tasks = split[span[0]: span[-1] + 1]
            base = resolve(cfg.harness)
            folder = base if not p["parent_patch"] else apply_patch(base, p["parent_patch"],
                                                                    self.out / "patches" / f"parent-{packet_id}")
            reference = run_batch(cfg, folder, tasks, self.out / "runs" / packet_id / "base", spend=self.spend)
            self._ctx[packet_id] = (cfg, base, tasks, suite, dev_task_for(suite, tasks[0]), reference)
        return self._ctx[packet_id]

    def score(self, packet_id: str, text: str) -> dict:
        """The candidate record (sha, validation, delta, ...) of patch ``text`` on packet ``packet_id``."""
        cfg, base, tasks, suite, dev_task, reference = self.context(packet_id)
        record, _ = evaluate_patch(cfg, base, text, tasks, reference, suite, dev_task, self.out,
                                   lambda sha: self.out / "runs" / packet_id / sha[:12], spend=self.spend)
        return record


def patch_reward(evaluator: PatchEvaluator, invalid_reward: float = -1.0, on_batch=None, group_size: int | None = None):
    """The GRPO reward function: each completion's patch (jitlab.engineer.proposer.extract_patch) scored on its row's
    ``packet_id``; Δ when valid, else ``invalid_reward``. ``on_batch(records)`` sees one record per completion; given
    ``group_size`` (the trainer's K), ``nonzero_advantage_share`` of the batch's groups goes to the step's logs."""

    def delta(prompts, completions, packet_id, **kwargs):
        records = []
        for completion, pid in zip(completions, packet_id):
            text = extract_patch(completion_text(completion))
            r = evaluator.score(pid, text)
            valid = r["validation"]["ok"] and r.get("delta") is not None
            records.append({"packet_id": pid, "sha": r["sha"], "valid": valid, "delta": r.get("delta"),
                            "kind": (r["validation"].get("diagnostic") or {}).get("kind"),
                            "reward": r["delta"] if valid else invalid_reward, "run_dir": r.get("run_dir"),
                            "patch": text})
        log_metric = kwargs.get("log_metric")     # TRL's hook: extra keys in the step's logs (and TensorBoard)
        if callable(log_metric) and records:
            log_metric("valid_rate", sum(r["valid"] for r in records) / len(records))
            share = signal_share([r["reward"] for r in records], group_size)["share"] if group_size else None
            if share is not None:
                log_metric("nonzero_advantage_share", share)
        if on_batch is not None:
            on_batch(records)
        return [r["reward"] for r in records]
    return delta


@sole_folder("engineer GRPO")
def run_engineer_grpo(cfg: EngineerGRPOConfig, out: str | Path) -> dict:
    """GRPO of the engineer into ``out`` (resumable); returns the manifest. Adapter: ``out/adapter``."""
    if cfg.threads:
        import torch
        torch.set_num_threads(cfg.threads)
    common.check_reporters(cfg)
    packets, sha = _read(cfg.data, "packets.jsonl")
    packets = packets[:cfg.packets] if cfg.packets else packets
    out = Path(out)
    base, below = policy_chain(cfg, "the engineer's cold-start adapter, e.g. runs/train/eng-sft/adapter")
    hashes = {"packets.jsonl": sha, "policy": [file_sha256(Path(b) / "adapter_model.safetensors") for b in below]}
    manifest = open_run(out, "engineer_grpo", fingerprint(cfg, hashes), {
        "config": asdict(cfg), "base": base, "below": [str(b) for b in below],
        "packets": [p["packet_id"] for p in packets]})
    evaluator = PatchEvaluator(packets, out, cfg)
    log_path = out / "completions.jsonl"
    logged = read_jsonl(log_path) if log_path.is_file() else []

    def on_batch(records):
        first = len(logged) // cfg.num_generations
        logged.extend({**r, "group": first + i // cfg.num_generations} for i, r in enumerate(records))
        write_jsonl(log_path, logged)

    # cycled to fill a generation batch: fewer packets than grad_accum would train zero steps (stage3's caveat)
    rows = generation_rows([{"prompt": p["prompt"], "packet_id": p["packet_id"]} for p in packets], cfg)
    reward = patch_reward(evaluator, cfg.invalid_reward, on_batch, cfg.num_generations)
    manifest["phases"]["grpo"] = train_phase(
        "grpo", out, lambda folder: (grpo_trainer(cfg, folder, rows, [reward], base), 0), rows, base, below)
    manifest["adapter"] = link_adapter(out, out / "grpo" / "adapter")
    valid = [r for r in logged if r["valid"]]
    manifest["summary"] = {"candidates": len(logged), "valid": len(valid),
                           "positive": sum(r["delta"] > 0 for r in valid),
                           "mean_reward": sum(r["reward"] for r in logged) / len(logged) if logged else None,
                           "groups": signal_share([r["reward"] for r in logged], cfg.num_generations)}
    write_json(out / "manifest.json", manifest)
    return manifest
