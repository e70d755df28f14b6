"""Stage II training on the embedded SmolLM2-135M (slow; real TRL, peft, torch on the CPU): 2 SFT steps on plan repairs
give finite losses and an adapter that loads as a ``plan:`` generator and is evaluated on the held-out faults; a second
run stacked on the first adapter records it below its own, so its adapter alone loads the whole policy."""
import json
import math

import pytest

from jitlab.train.config import Stage2Config, Stage2DataConfig
from jitlab.train.repair_data import build_stage2

pytestmark = pytest.mark.slow
# plan repair prompts are 1,052-1,087 tokens with SmolLM2's chat template (the plan prompt, which now states the
# couplings, + the broken reply + the diagnostic; 568-603 before): 1,152 trains on every fix
TINY = {"max_length": 1152, "steps": 2, "grad_accum": 1, "save_steps": 1, "threads": 2, "report_to": "none",
        "eval_limit": 1}


@pytest.fixture
def data(tmp_path):
    from jitlab.errors import ModelPackageMissing
    from jitlab.llm.hf import embedded_gguf_path
    from jitlab.sandbox import probe
    try:
        embedded_gguf_path()
    except ModelPackageMissing as exc:
        pytest.skip(str(exc))
    build_stage2(Stage2DataConfig(suite="toy", only=["react", "hiagent"], heldout_seeds=["hiagent"], formats=["plan"],
                                  allow_unisolated=not probe()[0]), tmp_path / "data2")
    return tmp_path / "data2"


def test_two_step_stage2_stacks_and_evaluates(data, tmp_path, capsys):
    from jitlab.cli import main
    from jitlab.envs.base import get_suite
    from jitlab.jit.generate import get_generator
    from jitlab.llm import get_backbone
    from jitlab.runtime import Budget, LLMHandle
    from jitlab.sandbox import probe
    from jitlab.train.stage2 import load_repairs, run_stage2
    stage1 = tmp_path / "data1"          # one Stage I example trained on beside the repairs (rehearsal)
    stage1.mkdir()
    (stage1 / "sft.jsonl").write_text(json.dumps({"prompt": [{"role": "user", "content": "Write a plan."}],
                                                  "completion": [{"role": "assistant", "content": "{}"}]}) + "\n")
    first = run_stage2(Stage2Config(data=str(data), eval=False, allow_unisolated=not probe()[0], rehearsal=str(stage1),
                                    **TINY), tmp_path / "a")
    record = first["phases"]["sft"]
    assert record["global_step"] == 2 and math.isfinite(record["first_loss"]) and math.isfinite(record["last_loss"])
    assert record["examples"] == len(load_repairs(data, "train", ["plan"])[0]) + 1 == \
        first["counts"]["train"] + first["counts"]["rehearsal"]
    assert "eval" not in first

    config = tmp_path / "b.yaml"
    config.write_text(json.dumps({"data": str(data), "stage1": str(tmp_path / "a" / "adapter"), **TINY, "steps": 1,
                                  "allow_unisolated": not probe()[0]}))
    assert main(["train", "stage2", "--config", str(config), "--out", str(tmp_path / "b")]) == 0
    assert "held-out repair within 2 rounds" in capsys.readouterr().out
    second = json.loads((tmp_path / "b" / "manifest.json").read_text())
    assert second["below"] == [str((tmp_path / "a" / "sft" / "adapter").resolve())]
    base = json.loads((tmp_path / "b" / "adapter" / "jitlab_base.json").read_text())
    assert base["base"] == "embedded" and len(base["below"]) == 1
    ev = second["eval"]
    assert ev["n"] == 1 and ev["backbone"] == f"hf:{tmp_path / 'b' / 'adapter'}"
    held = [json.loads(line) for line in (tmp_path / "b" / "eval" / "heldout.jsonl").read_text().splitlines()]
    assert held[0]["input"] == "hiagent" and held[0]["rounds"] in (1, 2) and held[0]["outcomes"]

    (tmp_path / "b" / "eval" / "heldout.jsonl").unlink()
    assert main(["train", "stage2", "--config", str(config), "--out", str(tmp_path / "b")]) == 0   # finished: no rerun
    assert not (tmp_path / "b" / "eval" / "heldout.jsonl").exists()

    spec = f"hf:{tmp_path / 'b' / 'adapter'}"
    handle = LLMHandle(get_backbone(spec), Budget(max_tokens=10 ** 6), None, seed=0, phase="generate")
    task = get_suite("toy").tasks("dev")[0].public()
    cand = get_generator(f"plan:{spec}", handle, max_new_tokens=48).generate(task, [], handle)
    assert cand.meta["reply"].strip()
