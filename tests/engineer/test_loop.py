"""The engineer loop on the toy suite with a scripted test double (pick-first repeats one command): Δ is measured
by re-running the same task ids and seeds in the sandbox, a known-good rule patch gains, a no-op patch gains 0."""
import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent.parent / "sandbox"))
from sandbox_helpers import requires_bwrap  # noqa: E402

from jitlab.cli import main  # noqa: E402
from jitlab.engineer.loop import EngineerConfig, delta, run_batch  # noqa: E402
from jitlab.engineer.packets import build_packet  # noqa: E402
from jitlab.engineer.patches import NOOP_PATCH, apply_patch  # noqa: E402
from jitlab.engineer.proposer import make_engineer, render_prompt  # noqa: E402
from jitlab.engineer.rules import propose_rules, rule_fields, rule_patch  # noqa: E402
from jitlab.envs.toy import ToySuite  # noqa: E402
from jitlab.llm.scripted import ScriptedBackbone  # noqa: E402
from jitlab.runtime import LLMHandle  # noqa: E402
from jitlab.store import load  # noqa: E402


def _pairs(run_dir):
    eps = load(run_dir)["episodes"]
    return sorted((r.task_id, int(r.seed)) for r in eps[eps["final"]].itertuples())


@requires_bwrap
def test_delta_is_measured_on_the_same_tasks_and_seeds(tmp_path):
    cfg = EngineerConfig(suite="toy", harness="react", backbone="scripted:pick-first", seed=3, out=str(tmp_path))
    tasks = ToySuite().tasks("dev")[:4]
    base = run_batch(cfg, "react", tasks, tmp_path / "base")
    noop = run_batch(cfg, apply_patch("react", NOOP_PATCH, tmp_path / "noop"), tasks, tmp_path / "noop-run")
    good = run_batch(cfg, apply_patch("react", rule_patch({"block_after": 1}), tmp_path / "good"), tasks,
                     tmp_path / "good-run")
    expected = [(t.id, 3) for t in tasks]
    for run in (base, noop, good):
        assert _pairs(run["run_dir"]) == expected
        assert run["isolation"] == ["bwrap+seccomp+rlimits"]  # base and patched run the same way
    control, gain = delta(base, noop), delta(base, good)
    assert control["delta"] == 0.0 and control["pairs"] == [list(p) for p in expected] and not control["unpaired"]
    assert gain["pairs"] == control["pairs"] and gain["delta"] > 0  # measured: pick-first alone wins nothing here
    assert gain["delta"] == good["success_rate"] - base["success_rate"]


@requires_bwrap
def test_a_batch_runs_concurrently_and_records_what_it_records_one_at_a_time(tmp_path):
    tasks = ToySuite().tasks("dev")[2:7]  # not from the split's start: the runner's offset selects them
    harness = apply_patch("react", rule_patch({"block_after": 1}), tmp_path / "h")  # wins some tasks, in varied steps
    runs = {}
    for n in (1, 3):
        cfg = EngineerConfig(suite="toy", backbone="scripted:pick-first", seed=1, concurrency=n, cache=False,
                             out=str(tmp_path))
        runs[n] = run_batch(cfg, harness, tasks, tmp_path / f"c{n}")
    frames = {n: load(r["run_dir"]) for n, r in runs.items()}
    rows = {n: sorted(f["episodes"][["task_id", "seed", "status", "success", "steps"]].itertuples(index=False))
            for n, f in frames.items()}
    assert [r[0] for r in rows[1]] == [t.id for t in tasks] and rows[1] == rows[3]
    assert len({(r.success, r.steps) for r in rows[1]}) > 1  # the rows differ, so equal rows are telling
    actions = {n: f["steps"].merge(f["episodes"][["id", "task_id"]], left_on="episode_id", right_on="id")
               .sort_values(["task_id", "step"])[["task_id", "step", "tool", "args"]].values.tolist()
               for n, f in frames.items()}
    assert actions[1] == actions[3] and runs[1]["episodes"] == runs[3]["episodes"]
    assert runs[1]["harness_sha"] == runs[3]["harness_sha"] and runs[3]["isolation"] == ["bwrap+seccomp+rlimits"]
    eps = frames[3]["episodes"].sort_values("started")
    assert any(b < a for a, b in zip(eps["finished"], eps["started"].iloc[1:])), "no two episodes overlapped"


@requires_bwrap
def test_a_batch_is_a_slice_of_the_split_in_any_order(tmp_path):
    from jitlab.errors import ConfigError
    cfg = EngineerConfig(suite="toy", backbone="scripted:pick-first", out=str(tmp_path))
    tasks = ToySuite().tasks("dev")
    first = run_batch(cfg, "react", tasks[3:5], tmp_path / "r")
    again = run_batch(cfg, "react", tasks[3:5][::-1], tmp_path / "r")  # the same run: it resumes, nothing reruns
    assert again["episodes"] == first["episodes"] and len(load(tmp_path / "r")["episodes"]) == 2
    with pytest.raises(ConfigError, match="toy-dev-3, toy-dev-5 are not a contiguous slice"):
        run_batch(cfg, "react", [tasks[3], tasks[5]], tmp_path / "gap")


def test_delta_uses_only_pairs_both_runs_finished():
    base = {"episodes": {("a", 0): False, ("b", 0): True, ("c", 0): False}}
    patched = {"episodes": {("a", 0): True, ("b", 0): True}}
    d = delta(base, patched)
    assert d["pairs"] == [["a", 0], ["b", 0]] and d["unpaired"] == [["c", 0]] and d["delta"] == 0.5


def test_rule_teacher_chooses_and_parameterises_from_the_packet():
    packet = {"failure_counts": {"refused": 3, "repeated_action": 3, "no_reward": 1, "step_budget_end": 3},
              "failures": [{"kinds": {"repeated_action": 6}, "outcome": {"steps": 8}}] * 3,
              "tasks": {"t": {"tools": [{"name": "act"}]}}}
    proposals = propose_rules(packet, k=4)
    assert [p.name for p in proposals] == ["block_after", "correct_invalid", "hint_after", "block_after+correct_invalid"]
    assert rule_fields(proposals[0].text) == {"block_after": 1} and rule_fields(proposals[2].text) == {"hint_after": 4}
    assert propose_rules(packet, k=4) == proposals  # deterministic
    packet["tasks"]["t"]["tools"].append({"name": "commit_answer"})  # DBBench-like: force the commit
    assert any(rule_fields(p.text).get("commit_margin") == 1 for p in propose_rules(packet, k=8))
    later = propose_rules(packet, k=2, current={"block_after": 1})
    assert all(rule_fields(p.text)["block_after"] == 1 and len(rule_fields(p.text)) == 2 for p in later)


def test_model_engineer_renders_the_packet_and_extracts_the_patch(tmp_path):
    from jitlab.runner import RunConfig, run
    packet = build_packet(run(RunConfig(suite="toy", harness="react", backbone="scripted:pick-first", limit=2,
                                        out=str(tmp_path / "r"), quiet=True)))
    prompt = render_prompt(packet, current=NOOP_PATCH)
    assert "toy-dev-0" in prompt and "repeated_action" in prompt and "class Hooks" in prompt
    double = ScriptedBackbone(lambda messages: f"Here it is:\n```python\n{NOOP_PATCH}```\nDone.", name="engineer")
    engineer = make_engineer("scripted:engineer", lambda i: LLMHandle(double, seed=i))
    proposals = engineer.propose(packet, k=2)
    assert [p.text for p in proposals] == [NOOP_PATCH, NOOP_PATCH] and double.calls == 2
    cut = ScriptedBackbone(lambda messages: f"```python\n{NOOP_PATCH}", name="cut")  # cut off at max tokens
    assert make_engineer("scripted:cut", lambda i: LLMHandle(cut, seed=i)).propose(packet, k=1)[0].text == NOOP_PATCH


@requires_bwrap
def test_engineer_loop_keeps_every_candidate_and_the_best_patch(tmp_path):
    out = tmp_path / "eng"
    argv = ["engineer", "run", "--suite", "toy", "--harness", "react", "--backbone", "scripted:pick-first",
            "--engineer", "rules", "--batch", "3", "-k", "2", "--rounds", "1", "--disjoint", "--out", str(out), "--quiet"]
    assert main(argv) == 0
    assert main(argv) == 0  # a rerun resumes: nothing runs again, no candidate is written twice
    lines = [json.loads(line) for line in (out / "candidates.jsonl").read_text().splitlines()]
    assert len(lines) == 2 and all(line["validation"]["ok"] for line in lines)
    base_pairs = [list(p) for p in _pairs(out / "round0" / "base")]
    for line in lines:
        assert line["pairs"] == base_pairs and Path(line["run_dir"]).is_dir() and line["patch"]
    summary = json.loads((out / "summary.json").read_text())
    best = max(line["delta"] for line in lines)
    assert summary["delta_batch"] == (best if best > 0 else 0.0)
    if best > 0:
        assert summary["kept_patch"] in [line["patch"] for line in lines]
        assert [p[0] for p in summary["delta_disjoint"]["pairs"]] == [t.id for t in ToySuite().tasks("dev")[3:6]]
    assert json.loads((out / "round0" / "packet.json").read_text())["batch"]["episodes"] == 3


def test_the_docstring_states_the_keep_rule_the_code_applies():
    """Issue 27 item 17: the loop's docstring said "The best patch with Δ ≥ 0 is kept" while the loop keeps a patch
    only when its Δ > 0 (``kept = best is not None and best.delta > 0``)."""
    import inspect

    import jitlab.engineer.loop as loop
    assert "Δ ≥ 0 is kept" not in loop.__doc__ and "kept only when its Δ > 0" in loop.__doc__
    assert "best.delta > 0" in inspect.getsource(loop._loop)


@requires_bwrap
def test_the_loop_uses_the_backbone_pool_it_is_given(tmp_path):
    """run_engineer draws every backbone from the pool passed in (no process-global pool): one per name and options."""
    from jitlab.engineer.loop import run_engineer
    from jitlab.llm.lazy import BackbonePool
    pool = BackbonePool()
    cfg = EngineerConfig(suite="toy", harness="react", backbone="scripted:pick-first", engineer="rules", batch=2, k=1,
                         out=str(tmp_path / "eng"), quiet=True)
    summary = run_engineer(cfg, pool)
    assert summary["rounds"][0]["candidates"] == 1
    assert list(pool._backbones) == [("scripted:pick-first", "{}")]
    assert pool.get("scripted:pick-first") is pool.get("scripted:pick-first", {})
    assert pool.get("scripted:pick-first", {"delay_s": 0.5}) is not pool.get("scripted:pick-first")


def test_an_unlimited_budget_caps_no_practical_token_count():
    from jitlab.runtime import Budget
    assert Budget.unlimited().max_tokens >= 10 ** 9 and Budget.unlimited().max_steps is None
@requires_bwrap
@pytest.mark.parametrize("rule", ["screen", "confirm"])
def test_the_selection_rule_decides_the_kept_patch_and_is_recorded(tmp_path, rule):
    out = tmp_path / rule
    argv = ["engineer", "run", "--suite", "toy", "--harness", "react", "--backbone", "scripted:pick-first",
            "--engineer", "rules", "--batch", "3", "-k", "2", "--rounds", "1", "--selection", rule, "--out", str(out),
            "--quiet"]
    assert main(argv) == 0
    summary = json.loads((out / "summary.json").read_text())
    verdict = summary["rounds"][0]["selection"]
    assert verdict["rule"] == rule and summary["config"]["selection"] == rule
    if rule == "screen":  # a screen only rejects: the base stays whatever the batch Δ
        assert not verdict["admitted"] and summary["kept_patch"] == "" and summary["admitted_by"] is None
    else:  # the rule patch gains on the batch (pick-first repeats one command), so confirm measures tasks 3..5
        assert summary["rounds"][0]["delta"] > 0
        confirm = sorted(p.name for p in (out / "round0" / "confirm").iterdir())
        assert "incumbent" in confirm and len(confirm) == 2
        assert verdict["admitted"] == (verdict["confirm_delta"] > 0)
        assert summary["admitted_by"] == ("confirm" if verdict["admitted"] else None)
