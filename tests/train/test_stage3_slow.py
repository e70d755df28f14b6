"""Stage III smoke on the embedded SmolLM2-135M policy (slow; real TRL GRPOTrainer on the CPU): 1 GRPO step with a
group of 2 on a toy task, candidates run with a scripted executor (a test double), gives TRL's per-channel reward logs,
one completions.jsonl row per candidate, an incumbent evaluation in the bank and an adapter that loads as ``hf:``."""
import json
import math

import pytest

from jitlab.train.config import Stage3Config

pytestmark = pytest.mark.slow


def test_one_grpo_step_on_the_toy_suite(tmp_path):
    from jitlab.errors import ModelPackageMissing
    from jitlab.llm.hf import embedded_gguf_path
    from jitlab.sandbox import probe
    try:
        embedded_gguf_path()
    except ModelPackageMissing as exc:
        pytest.skip(str(exc))
    from jitlab.jit.bank import Bank
    from jitlab.llm import get_backbone
    from jitlab.train.stage3 import run_stage3
    cfg = Stage3Config(suite="toy", tasks=1, steps=1, num_generations=2, grad_accum=1, max_completion_length=48,
                       executor="scripted:pick-first", episode_steps=3, smoke_steps=1, threads=2, save_steps=1,
                       report_to="none", allow_unisolated=not probe()[0])
    out = tmp_path / "s3"
    manifest = run_stage3(cfg, out)
    assert manifest["phases"]["grpo"]["global_step"] == 1
    rows = [json.loads(line) for line in (out / "completions.jsonl").read_text().splitlines()]
    assert len(rows) == 2 and all(set(r["channels"]) == {"valid", "task_delta", "latency_gain", "cost_gain"}
                                  for r in rows)
    history = [json.loads(line) for line in (out / "grpo" / "log_history.jsonl").read_text().splitlines()]
    logged = next(h for h in history if "rewards/task_delta/mean" in h)
    assert math.isfinite(logged["rewards/valid/mean"]) and "frac_reward_zero_std" in logged
    assert 0 <= logged["gate_rate"] <= 1 and 0 <= logged["valid_rate"] <= 1
    bank = Bank(out / "bank.sqlite")
    assert any(e["run_dir"] == "train/stage3" for e in bank.evaluations())   # the incumbent's evaluation at least
    bank.close()
    assert manifest["summary"]["candidates"] == 2
    groups = manifest["summary"]["groups"]         # one group of 2: its share is 0 or 1, what its channels say
    assert groups["groups"] == 1 and groups["share"] == float(any(
        len({r["channels"][k] for r in rows if r["channels"][k] is not None}) > 1 for k in rows[0]["channels"]))
    assert manifest["summary"]["frontier_before"] == 0 and all(r["group"] == 0 for r in rows)
    assert all(r["bank"] is None or r["advances"]["advances"] for r in rows)   # only frontier-advancing ones added
    assert get_backbone(f"hf:{out / 'adapter'}").id
