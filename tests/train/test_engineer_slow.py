"""Engineer training smoke on the embedded SmolLM2-135M (slow; real TRL SFTTrainer and GRPOTrainer on the CPU): a
2-step cold-start SFT and a 1-step GRPO (group of 2) on the packet of a toy engineer loop (a scripted test double runs
the harness), finite losses, one completions.jsonl row per sampled patch, and adapters that load as the loop's engineer."""
import json
import math
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent.parent / "sandbox"))
from sandbox_helpers import requires_bwrap  # noqa: E402

pytestmark = pytest.mark.slow


@requires_bwrap
def test_engineer_sft_then_grpo_on_a_toy_loop(tmp_path):
    from jitlab.errors import ModelPackageMissing
    from jitlab.llm.hf import embedded_gguf_path
    try:
        embedded_gguf_path()
    except ModelPackageMissing as exc:
        pytest.skip(str(exc))
    from jitlab.cli import main
    from jitlab.engineer.packets import build_packet
    from jitlab.engineer.proposer import make_engineer
    from jitlab.llm import get_backbone
    from jitlab.runtime import LLMHandle
    from jitlab.train.config import EngineerDataConfig, EngineerGRPOConfig, EngineerSFTConfig
    from jitlab.train.engineer import build_engineer_data, run_engineer_grpo, run_engineer_sft
    loop = tmp_path / "loop"
    assert main(["engineer", "run", "--suite", "toy", "--harness", "react", "--backbone", "scripted:pick-first",
                 "--engineer", "rules", "--batch", "1", "-k", "2", "--out", str(loop), "--quiet"]) == 0
    data = tmp_path / "data"
    assert build_engineer_data(EngineerDataConfig(loops=[str(loop)]), data)["counts"]["sft"] >= 1
    common = dict(data=str(data), threads=2, grad_accum=1, save_steps=1, report_to="tensorboard")
    sft = run_engineer_sft(EngineerSFTConfig(steps=2, **common), tmp_path / "sft")
    assert sft["phases"]["sft"]["global_step"] == 2 and math.isfinite(sft["phases"]["sft"]["last_loss"])
    assert list((tmp_path / "sft" / "sft" / "runs").rglob("events.out.tfevents.*"))     # curves for the notebook
    grpo = run_engineer_grpo(EngineerGRPOConfig(policy=str(tmp_path / "sft" / "adapter"), steps=1, num_generations=2,
                                                max_completion_length=24, **common), tmp_path / "grpo")
    assert grpo["phases"]["grpo"]["global_step"] == 1 and grpo["below"]
    rows = [json.loads(line) for line in (tmp_path / "grpo" / "completions.jsonl").read_text().splitlines()]
    assert len(rows) == 2 and all(r["reward"] == (r["delta"] if r["valid"] else -1.0) for r in rows)
    history = [json.loads(line) for line in (tmp_path / "grpo" / "grpo" / "log_history.jsonl").read_text().splitlines()]
    assert any(math.isfinite(h.get("rewards/delta/mean", math.nan)) for h in history)
    # the adapter is an engineer: it writes a (probably broken) patch from the packet
    backbone = get_backbone(f"hf:{tmp_path / 'grpo' / 'adapter'}")
    engineer = make_engineer("hf:grpo", lambda i: LLMHandle(backbone, seed=i), max_new_tokens=16)
    proposals = engineer.propose(build_packet(loop / "round0" / "base"), k=1)
    assert len(proposals) == 1 and proposals[0].reply
