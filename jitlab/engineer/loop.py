"""The engineer loop: run a batch, packet its failures, have an engineer propose K patches, measure each by Δ.

    jitlab engineer run --suite toy --harness react --backbone scripted:pick-first --engineer rules \\
        --batch 4 --rounds 1 -k 4 --out runs/eng-toy
    from jitlab.engineer.loop import EngineerConfig, run_engineer
    summary = run_engineer(EngineerConfig(suite="toy", harness="react", backbone="scripted:pick-first"))

Per round: the batch (tasks ``offset .. offset+batch`` of ``split``/``family``, one seed) runs with the current
harness -> ``build_packet`` -> the engineer proposes K patches (hooks.py overlays on the *base* harness) ->
each is checked and validated (jitlab.engineer.patches: static checks, then a sandboxed smoke episode) -> a
valid patch re-runs the same batch -> Δ = success(patched) − success(base) over the (task id, seed) pairs
both runs finished (``pairs`` in the record; a pair one side did not finish is listed in ``unpaired``).
A patch is kept only when its Δ > 0 and the selection rule admits it: the best of the round (highest Δ, ties:
the first proposed) becomes the next round's harness only when ``selection`` (jitlab/selection.py) admits it:
``greedy`` (the default, as before) when its Δ > 0; ``confirm`` when Δ > 0 again on a confirmation batch (the
next ``batch`` tasks of the split after the disjoint one when ``disjoint`` is set, else after the batch; run into
``round<r>/confirm/``); ``paired`` when the exact McNemar test on the batch's pairs gives p < ``selection_level``;
``screen`` never. A round whose best Δ is 0 or less keeps none. Each round records the verdict
(``rounds[*].selection``) and the summary which rule admitted the kept patch (``admitted_by``).
Base and patched runs are run the same way: both in the sandbox (``isolation="sandbox"``),
so isolation cannot skew Δ. Every batch is a ``jitlab.runner.run`` of the batch's slice (``offset``/``limit``),
``concurrency`` episodes at once (the hf engine batches their backbone calls), with one model for the whole loop.
``disjoint`` (tasks ``offset+batch .. offset+2*batch``) and ``test`` (the first N test tasks of the family)
re-measure base vs the kept patch; the base runs there even when no patch was kept (then Δ is 0: the kept
harness is the base). ``summary.json`` lists each measured run directory under ``runs`` (batch, disjoint, test:
``base`` and ``kept``, the latter the base's run when no patch was kept).

Everything is kept under ``out``: ``round<r>/base`` and ``round<r>/<i>-<sha12>`` run directories (the
jitlab run format), ``patches/<sha16>/`` (the patched harness folders), ``round<r>/packet.json``,
``candidates.jsonl`` (one line per candidate: round, engineer, packet sha, patch text, identity, validation,
Δ, both success rates, tokens, run dirs; training data for the engineer) and ``summary.json``.

A rerun with the same ``out`` resumes: finished episodes are not rerun and a candidate already in
``candidates.jsonl`` (same ``id`` = round:index:sha) is not written again.
"""
from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from jitlab.envs.base import checked_tasks, get_suite
from jitlab.errors import ConfigError
from jitlab.fields import CANDIDATES_MAX, ROUNDS_MAX, STEPS_MAX, check_fields
from jitlab.harness import read_files, resolve
from jitlab.llm.base import DEFAULT_BACKBONE, check_options
from jitlab.llm.cache import default_cache
from jitlab.llm.lazy import BackbonePool
from jitlab.run_options import EpisodeOptions, Quiet, RunControls, adjust, derive
from jitlab.runner import RunConfig, run_summarized
from jitlab.runtime import Budget, LLMHandle, RunSpend
from jitlab.store import load, sole_writer

__all__ = ["EngineerConfig", "delta", "evaluate_patch", "run_batch", "run_engineer"]


@dataclass
@adjust(defaults={"concurrency": 6})
class EngineerConfig(EpisodeOptions, RunControls, Quiet):
    suite: str = field(default="toy", metadata={"help": "suite name (jitlab suites)"})
    harness: str = field(default="react", metadata={"help": "base harness: seed name or folder (never edited)"})
    backbone: str = field(default=DEFAULT_BACKBONE, metadata={"help": "backbone the harness runs with"})
    backbone_options: dict = field(default_factory=dict, metadata={"help": "extra backend options (api_base, ...); "
                                                                          "also given to an engineer backbone of the "
                                                                          "same kind"})
    engineer: str = field(default="rules", metadata={"help": "'rules' (offline rule teacher), 'interventions' "
                                                             "(mined from the batch's run, offline) or a backbone "
                                                             "that writes patches (embedded, hf:..., litellm:...)"})
    engineer_tokens: int = field(default=512, metadata={"help": "new tokens per patch a backbone engineer writes",
                                                        "min": 16})
    split: str = field(default="dev", metadata={"help": "split of the batch"})
    family: str | None = field(default=None, metadata={"help": "only tasks of this family"})
    batch: int = field(default=6, metadata={"help": "tasks in the batch", "min": 1})
    offset: int = field(default=0, metadata={"help": "index of the batch's first task in the split", "min": 0})
    rounds: int = field(default=1, metadata={"help": "engineer rounds (each from the kept patch)", "min": 1, **ROUNDS_MAX})
    k: int = field(default=4, metadata={"help": "patches proposed per round", "min": 1, **CANDIDATES_MAX})
    disjoint: bool = field(default=False, metadata={"help": "also measure Δ on the next batch of the same split"})
    test: int = field(default=0, metadata={"help": "also measure Δ on the first N test tasks (0: no)", "min": 0})
    smoke_steps: int = field(default=3, metadata={"help": "steps of a patch's sandboxed smoke episode", "min": 0, **STEPS_MAX})
    out: str = field(default="runs/engineer", metadata={"help": "output directory", "nonempty": True})
    selection: str = field(default="greedy", metadata={"help": "rule that admits the best patch (jitlab/selection.py): "
                                                               "greedy (Δ > 0 on the batch) | screen | confirm | paired",
                                                       "choices": ("greedy", "screen", "confirm", "paired")})
    selection_level: float = field(default=0.05, metadata={"help": "level of the paired rule's exact McNemar test",
                                                           "min_exclusive": 0, "max": 0.5})

    def __post_init__(self):
        check_fields(self)
        from jitlab.selection import check_rule
        check_rule(self.selection, self.selection_level)


def _slices(cfg: EngineerConfig) -> dict[str, tuple[str, int, int]]:
    """Where each batch of the loop comes from, as (split, first task, tasks): the batch itself and, as the config
    asks for them, the disjoint batch, the confirmation batch (after the disjoint one when both are set) and the
    test tasks (see the module docstring)."""
    slices = {"batch": (cfg.split, cfg.offset, cfg.batch)}
    if cfg.disjoint:
        slices["disjoint"] = (cfg.split, cfg.offset + cfg.batch, cfg.batch)
    if cfg.selection == "confirm":
        slices["confirm"] = (cfg.split, cfg.offset + cfg.batch * (2 if cfg.disjoint else 1), cfg.batch)
    if cfg.test:
        slices["test"] = ("test", 0, cfg.test)
    return slices


def _tasks(cfg: EngineerConfig, split: str, start: int, n: int, label: str = "batch") -> list:
    """Tasks ``start .. start + n - 1`` of ``split``; ConfigError naming the batch (``label``) when there are none."""
    tasks = checked_tasks(get_suite(cfg.suite), split, cfg.family)[start: start + n]
    if not tasks:
        what = "" if label == "batch" else f" for the {label} batch"
        raise ConfigError(f"no {split} tasks {start}..{start + n - 1}{what} in suite {cfg.suite} family {cfg.family}; "
                          "lower --offset/--batch")
    return tasks


def run_batch(cfg: EngineerConfig, harness: str | Path, tasks: list, out: str | Path,
              backbones: BackbonePool | None = None, spend: RunSpend | None = None) -> dict:
    """Run ``harness`` on exactly ``tasks`` (a contiguous slice of one split of ``cfg.family``, as ``_tasks`` gives,
    in any order; seed ``cfg.seed``) in the sandbox with ``jitlab.runner.run``, ``cfg.concurrency`` episodes at once,
    recorded in ``out`` (the jitlab run format; resumable), with ``cfg``'s episode options and run controls.
    ``backbones``: the pool the caller's runs share (default: a new one); ``spend``: the RunSpend of the whole command
    (default: the run's own caps). SpendCapReached when a cap is reached. Returns the run's summary with
    ``episodes``: {(task id, seed): success}, ``harness_sha`` and ``run_dir``."""
    from jitlab.selection import successes
    split, ids = tasks[0].split, [t.id for t in tasks]
    index = {t.id: i for i, t in enumerate(checked_tasks(get_suite(cfg.suite), split, cfg.family))}
    at = sorted(index.get(i, -1) for i in ids)  # in any order: a packet lists its task ids sorted by name
    if at[0] < 0 or at != list(range(at[0], at[0] + len(ids))):
        raise ConfigError(f"run_batch: tasks {', '.join(ids)} are not a contiguous slice of suite {cfg.suite} "
                          f"{split} family {cfg.family}; pass a slice of its tasks")
    offset = at[0]
    rc = derive(RunConfig, cfg, suite=cfg.suite, harness=str(harness), backbone=cfg.backbone,
                backbone_options=cfg.backbone_options, split=split, family=cfg.family, offset=offset, limit=len(ids),
                isolation="sandbox", out=str(out), quiet=True)
    run_dir, summary = run_summarized(rc, spend, (backbones or BackbonePool()).get(cfg.backbone, cfg.backbone_options))
    frames = load(run_dir)
    summary["episodes"] = successes(frames["episodes"])
    summary["harness_sha"], summary["run_dir"] = frames["config"]["harness_sha"].iloc[0], str(out)
    return summary


@dataclass
class _Kept:
    """The round's best valid candidate so far: its proposal, its record and its patched run's summary."""
    proposal: object
    record: dict
    run: dict

    @property
    def delta(self) -> float:
        return self.record["delta"]


def _cache(cfg: EngineerConfig):
    return default_cache() if cfg.cache else None


def delta(base: dict, patched: dict) -> dict:
    """Δ success over the (task id, seed) pairs both runs finished; the pairs and any unpaired ones listed."""
    pairs = sorted(set(base["episodes"]) & set(patched["episodes"]))
    unpaired = sorted(set(base["episodes"]) ^ set(patched["episodes"]))
    if not pairs:
        return {"delta": None, "pairs": [], "unpaired": [list(p) for p in unpaired], "base": None, "patched": None}
    b = sum(base["episodes"][p] for p in pairs) / len(pairs)
    a = sum(patched["episodes"][p] for p in pairs) / len(pairs)
    return {"delta": a - b, "base": b, "patched": a, "pairs": [list(p) for p in pairs],
            "unpaired": [list(p) for p in unpaired]}


def evaluate_patch(cfg: EngineerConfig, base_folder: Path, text: str, tasks: list, reference: dict, suite, dev_task,
                   out: Path, run_dir, backbones: BackbonePool | None = None,
                   spend: RunSpend | None = None) -> tuple[dict, dict | None]:
    """One candidate as the loop scores it: write base + patch to ``out/patches/<sha16>``, validate it (static checks,
    then a sandboxed smoke episode on ``dev_task``), and when valid re-run ``tasks`` with it into ``run_dir(sha)``
    (resumable; replay cache per ``cfg.cache``). Returns (record fields: sha, folder, validation and, when valid, the
    ``delta`` fields against ``reference`` (a run_batch summary), run_dir, tokens; the patched run's summary or None).
    ``backbones``: the pool the loop's runs share (default: a new one); ``spend``: the command's RunSpend (run_batch)."""
    from jitlab.engineer.patches import apply_patch, patch_identity, validate_patch
    from jitlab.jit.repair import RepairConfig
    repair_cfg = RepairConfig(smoke_steps=cfg.smoke_steps, allow_unisolated=cfg.allow_unisolated, seed=cfg.seed)
    sha = patch_identity(base_folder, text)
    folder = apply_patch(base_folder, text, out / "patches" / sha[:16])
    backbones = backbones or BackbonePool()
    llm = LLMHandle(backbones.get(cfg.backbone, cfg.backbone_options),
                    Budget(max_tokens=repair_cfg.smoke_max_tokens), _cache(cfg), seed=cfg.seed, phase="select", spend=spend)
    validation = validate_patch(base_folder, text, suite, dev_task, llm, out / "validate", repair_cfg)
    record = {"sha": sha, "folder": str(folder), "validation": validation.as_dict()}
    if not validation.ok:
        return record, None
    patched = run_batch(cfg, folder, tasks, run_dir(sha), backbones, spend)
    record |= {**delta(reference, patched), "run_dir": patched["run_dir"], "tokens_per_task": patched["tokens_per_task"],
               "base_tokens_per_task": reference["tokens_per_task"]}
    return record, patched


def _append(path: Path, record: dict) -> None:
    """One line per candidate: a resumed loop (same round, index and sha) does not write it again."""
    record["id"] = f"{record['round']}:{record['index']}:{record['sha']}"
    if path.exists() and any(json.loads(line).get("id") == record["id"] for line in path.read_text().splitlines()
                             if line.strip()):
        return
    with open(path, "a") as fh:
        fh.write(json.dumps(record, sort_keys=True, default=str) + "\n")


def _select(cfg: EngineerConfig, best: _Kept, current_run: dict, current_text: str, base_folder: Path, rdir: Path,
            out: Path, backbones: BackbonePool, spend: RunSpend | None = None):
    """The selection rule's verdict on the round's best patch against the incumbent (jitlab/selection.py); the
    ``confirm`` rule first runs both on the confirmation batch."""
    from jitlab.selection import judge
    confirm = None
    if cfg.selection == "confirm" and best.delta > 0:
        tasks = _tasks(cfg, *_slices(cfg)["confirm"])
        incumbent = base_folder if not current_text else out / "patches" / current_run["harness_sha"][:16]
        inc = run_batch(cfg, incumbent, tasks, rdir / "confirm" / "incumbent", backbones, spend)
        cand = run_batch(cfg, best.record["folder"], tasks, rdir / "confirm" / best.record["sha"][:12], backbones, spend)
        confirm = (inc["episodes"], cand["episodes"])
    return judge(cfg.selection, current_run["episodes"], best.run["episodes"], confirm, cfg.selection_level)


@dataclass
class _Setup:
    """What every round of one loop shares, checked before anything is written."""
    cfg: EngineerConfig
    backbones: BackbonePool
    suite: object
    base_folder: Path
    tasks: list
    dev_task: object
    say: Callable
    spend: RunSpend | None = None  # the caps of the whole command, every run and the engineer's calls

    @property
    def out(self) -> Path:
        return Path(self.cfg.out)


def _setup(cfg: EngineerConfig, backbones: BackbonePool | None, spend: RunSpend | None = None) -> _Setup:
    """The loop's suite, base harness folder and batch; a bad config, harness folder or backbone is refused here."""
    from jitlab.jit.repair import dev_task_for
    check_fields(cfg)
    backbones = backbones or BackbonePool()
    suite = get_suite(cfg.suite)
    base_folder = resolve(cfg.harness)
    read_files(base_folder)  # a broken harness folder (a missing file, not UTF-8) is refused before out is written
    check_options(cfg.backbone, cfg.backbone_options)  # so is a bad backbone or option
    slices = {label: _tasks(cfg, *where, label) for label, where in _slices(cfg).items()}  # all, before any run
    tasks = slices["batch"]
    say = (lambda *a: None) if cfg.quiet else (lambda *a: print(*a, flush=True))
    spend = spend if spend is not None else cfg.command_spend(cfg.out)
    return _Setup(cfg, backbones, suite, base_folder, tasks, dev_task_for(suite, tasks[0]), say, spend)


def _engineer(cfg: EngineerConfig, backbones: BackbonePool, spend: RunSpend | None = None):
    """The engineer that proposes patches: an offline one, or a backbone (given the harness backbone's options when
    it is of the same kind)."""
    from jitlab.engineer.proposer import OFFLINE, make_engineer
    same_kind = cfg.engineer.partition(":")[0] == cfg.backbone.partition(":")[0]
    engineer_backbone = None if cfg.engineer in OFFLINE else backbones.get(cfg.engineer,
                                                                            cfg.backbone_options if same_kind else {})
    return make_engineer(cfg.engineer, None if engineer_backbone is None else (
        lambda i: LLMHandle(engineer_backbone, Budget.unlimited(), _cache(cfg), seed=i, phase="engineer", spend=spend)),
        **({} if engineer_backbone is None else {"max_new_tokens": cfg.engineer_tokens}))


def _round(s: _Setup, engineer, r: int, current_text: str, current_run: dict) -> tuple[_Kept | None, object, str, int]:
    """Round ``r``: the packet of the current run, K proposals scored against it, the selection rule's verdict on
    the best. Returns the best candidate (None when no patch was valid with Δ ≥ 0), the verdict (None without a
    best), the packet's sha and the number of proposals."""
    from jitlab.engineer.packets import build_packet, packet_json
    cfg, rdir = s.cfg, s.out / f"round{r}"
    packet_dir = Path(current_run["run_dir"])
    packet = build_packet(packet_dir)
    text = packet_json(packet)
    (rdir / "packet.json").parent.mkdir(parents=True, exist_ok=True)
    (rdir / "packet.json").write_text(text)
    packet_sha = hashlib.sha256(text.encode()).hexdigest()[:16]
    proposals = engineer.propose(packet, cfg.k, current_text, run_dir=packet_dir)
    best = None
    for i, proposal in enumerate(proposals):
        record, patched = _candidate(s, r, i, proposal, current_text, current_run, packet_sha)
        d = record.get("delta")
        if patched is not None and d is not None and d >= 0 and (best is None or d > best.delta):
            best = _Kept(proposal, record, patched)
    verdict = None if best is None else _select(cfg, best, current_run, current_text, s.base_folder, rdir, s.out,
                                                 s.backbones, s.spend)
    if verdict is not None:
        s.say(f"round {r} selection ({cfg.selection}): {verdict.reason}")
    return best, verdict, packet_sha, len(proposals)


def _candidate(s: _Setup, r: int, i: int, proposal, current_text: str, current_run: dict,
               packet_sha: str) -> tuple[dict, dict | None]:
    """Candidate ``i`` of round ``r``: scored (evaluate_patch) and appended to ``candidates.jsonl``. Returns its record
    and its patched run's summary (None when the patch is invalid)."""
    cfg, rdir, packet_dir = s.cfg, s.out / f"round{r}", Path(current_run["run_dir"])
    start = time.perf_counter()
    scored, patched = evaluate_patch(cfg, s.base_folder, proposal.text, s.tasks, current_run, s.suite, s.dev_task,
                                     s.out, lambda sha: rdir / f"{i}-{sha[:12]}", s.backbones, s.spend)
    record = {"round": r, "index": i, "engineer": cfg.engineer, "name": proposal.name, "note": proposal.note,
              "reply": proposal.reply,
              "packet_sha": packet_sha, "packet": str(rdir / "packet.json"), "base_harness": str(s.base_folder),
              "parent_patch": current_text, "patch": proposal.text, **scored,
              "suite": cfg.suite, "backbone": cfg.backbone, "seed": cfg.seed}
    if patched is not None:
        record["base_run_dir"] = str(packet_dir)
    record["wall_s"] = round(time.perf_counter() - start, 3)
    _append(s.out / "candidates.jsonl", record)
    shown = f"Δ={record['delta']:+.2f}" if record.get("delta") is not None else \
        f"invalid: {(record['validation'].get('diagnostic') or {}).get('kind', '')}"
    s.say(f"round {r} candidate {i} {proposal.name} {record['sha'][:12]}: {shown}")
    return record, patched


def _held_out(s: _Setup, summary: dict, current_text: str, current_run: dict) -> None:
    """Base vs the kept patch on the ``disjoint`` and ``test`` tasks, into ``summary`` (``delta_<label>`` and
    ``runs[<label>]``); the base always runs: a table's base rows need its held-out runs too."""
    cfg, out = s.cfg, s.out
    checks = [(label, _tasks(cfg, *where)) for label, where in _slices(cfg).items() if label in ("disjoint", "test")]
    for label, held in checks:
        b = run_batch(cfg, s.base_folder, held, out / label / "base", s.backbones, s.spend)
        p = b if not current_text else run_batch(cfg, out / "patches" / current_run["harness_sha"][:16], held,
                                                   out / label / "patched", s.backbones, s.spend)
        summary[f"delta_{label}"] = delta(b, p)
        summary["runs"][label] = {"base": b["run_dir"], "kept": p["run_dir"]}
        s.say(f"{label}: base {b['success_rate']:.2f} -> {'patched' if current_text else 'no patch kept'} "
              f"{p['success_rate']:.2f}")


def run_engineer(cfg: EngineerConfig, backbones: BackbonePool | None = None, spend: RunSpend | None = None) -> dict:
    """Run the loop (see the module docstring); returns the summary written to ``out/summary.json``. ``backbones``:
    the pool its runs share, one loaded model per name (default: a new one; pass one to share it across loops).
    ``spend``: the RunSpend the caps count against (default: ``cfg``'s ``max_cost`` / ``max_tokens_total`` over
    everything recorded under ``out`` and ``max_wall_total_s`` from now, jitlab.run_options); when a cap is reached
    SpendCapReached is raised and a rerun (with a higher spend cap, when one stopped it) resumes."""
    s = _setup(cfg, backbones, spend)
    engineer = _engineer(cfg, s.backbones, s.spend)
    with sole_writer(s.out, f"engineer loop folder {s.out}"):   # one loop per folder
        return _loop(s, engineer)


def _loop(s, engineer) -> dict:
    """The rounds and the held-out measures of :func:`run_engineer`, its folder held."""
    cfg = s.cfg
    current_text, current_run = "", run_batch(cfg, s.base_folder, s.tasks, s.out / "round0" / "base", s.backbones,
                                              s.spend)
    base_run = current_run
    s.say(f"base {s.base_folder.name}: success {current_run['success_rate']:.2f} on {len(s.tasks)} tasks")
    rounds = []
    for r in range(cfg.rounds):
        best, verdict, packet_sha, candidates = _round(s, engineer, r, current_text, current_run)
        kept = verdict is not None and verdict.admitted and best.delta > 0
        rounds.append({"round": r, "packet_sha": packet_sha, "candidates": candidates,
                       "kept": best.record["sha"] if kept else None, "delta": best.delta if best else None,
                       "selection": verdict.as_dict() if verdict is not None else None})
        if kept:
            current_text, current_run = best.proposal.text, best.run
    summary = {"config": asdict(cfg), "base_sha": base_run["harness_sha"], "base_success": base_run["success_rate"],
               "kept_patch": current_text, "kept_sha": current_run["harness_sha"] if current_text else None,
               "success": current_run["success_rate"], "delta_batch": delta(base_run, current_run)["delta"],
               "rounds": rounds, "runs": {"batch": {"base": base_run["run_dir"], "kept": current_run["run_dir"]}},
               "admitted_by": cfg.selection if current_text else None}
    _held_out(s, summary, current_text, current_run)
    (s.out / "summary.json").write_text(json.dumps(summary, indent=2, sort_keys=True, default=str))
    return summary
