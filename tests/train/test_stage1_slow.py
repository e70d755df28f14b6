"""Stage I training on the embedded SmolLM2-135M (slow; real TRL, peft, torch on the CPU): 2 SFT + 2 DPO steps at a
small max_length give finite losses, TensorBoard curves and a LoRA adapter that loads as ``hf:`` and as a ``plan:``
generator; a training run killed after a checkpoint resumes from it. Data: the toy fixture of conftest.py."""
import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from jitlab.train.config import Stage1Config, Stage1DataConfig
from jitlab.train.data import build_stage1

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[2]
# the plan prompt without references is 448 tokens with SmolLM2's chat template (since the case-study modules joined
# the catalogue): 512 leaves room for the plan
TINY = {"max_length": 512, "sft_steps": 2, "dpo_steps": 2, "grad_accum": 1, "save_steps": 1, "threads": 2}


@pytest.fixture
def data(evidence, tmp_path):
    from jitlab.errors import ModelPackageMissing
    from jitlab.llm.hf import embedded_gguf_path
    try:
        embedded_gguf_path()
    except ModelPackageMissing as exc:
        pytest.skip(str(exc))
    runs, bank, _ = evidence
    build_stage1(Stage1DataConfig(runs=runs, banks=[bank], k_references=0), tmp_path / "data")
    return tmp_path / "data"


def test_two_step_sft_and_dpo_give_an_adapter_that_loads_as_a_plan_generator(data, tmp_path):
    from safetensors.torch import load_file

    from jitlab.envs.base import get_suite
    from jitlab.jit.generate import get_generator
    from jitlab.llm import get_backbone
    from jitlab.runtime import Budget, LLMHandle
    from jitlab.train.stage1 import run_stage1
    out = tmp_path / "stage1"
    manifest = run_stage1(Stage1Config(data=str(data), **TINY), out)
    for phase in ("sft", "dpo"):
        record = manifest["phases"][phase]
        assert record["global_step"] == 2 and math.isfinite(record["first_loss"]) and math.isfinite(record["last_loss"])
        assert list((out / phase / "runs").rglob("events.out.tfevents.*")), "no TensorBoard curve"
        history = [json.loads(line) for line in (out / phase / "log_history.jsonl").read_text().splitlines()]
        assert any("loss" in h for h in history)
        weights = load_file(out / phase / "adapter" / "adapter_model.safetensors")
        assert any(k.endswith("lora_B.weight") and v.abs().sum() > 0 for k, v in weights.items()), "LoRA never updated"
    dpo_log = (out / "dpo" / "log_history.jsonl").read_text().splitlines()
    assert any("rewards/margins" in json.loads(line) for line in dpo_log)
    assert manifest["adapter"] == "dpo/adapter" and (out / "adapter" / "adapter_config.json").is_file()
    assert manifest["data"]["sft.jsonl"] and manifest["versions"]["trl"] == "1.16.0"

    again = run_stage1(Stage1Config(data=str(data), **TINY), out)   # finished phases are skipped
    assert again["phases"]["sft"]["wall_s"] == manifest["phases"]["sft"]["wall_s"]

    llm = get_backbone(f"hf:{out / 'adapter'}")
    handle = LLMHandle(llm, Budget(max_tokens=10 ** 6), None, seed=0, phase="generate")
    gen = get_generator(f"plan:hf:{out / 'adapter'}", handle, max_new_tokens=48)
    task = get_suite("toy").tasks("dev")[0]
    cand = gen.generate(task.public(), [], handle)
    assert cand.generator == f"plan:hf:{out / 'adapter'}" and cand.meta["reply"].strip()
    assert ("plan" in cand.meta) != ("parse_error" in cand.meta)   # a plan, or a parse_error for repair


def test_a_killed_run_resumes_from_its_last_checkpoint(data, tmp_path):
    out = tmp_path / "stage1"
    config = tmp_path / "c.yaml"
    config.write_text(json.dumps({"data": str(data), **TINY, "sft_steps": 4, "dpo": False, "report_to": "none"}))
    cmd = [sys.executable, "-m", "jitlab.cli", "train", "stage1", "--config", str(config), "--out", str(out)]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.time() + 900
        while not list((out / "sft").glob("checkpoint-*/trainer_state.json")):
            assert proc.poll() is None and time.time() < deadline, "the run ended before its first checkpoint"
            time.sleep(0.2)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    finally:
        if proc.poll() is None:
            proc.kill()
    assert not (out / "sft" / "adapter" / "DONE").exists(), "the run finished before it was killed"
    done = subprocess.run(cmd, check=False, cwd=REPO, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-2000:]
    record = json.loads((out / "manifest.json").read_text())["phases"]["sft"]
    assert record["resumed_from"] and record["resumed_from"].startswith("checkpoint-")
    assert record["global_step"] == 4 and "resumed from checkpoint-" in done.stdout
