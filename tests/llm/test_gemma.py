"""The optional second offline backbone ``gemma3-270m`` (Gemma 3 270M base; `make gemma`).

Fast tests need no model. The slow test loads it (skipped, with the reason, when the packages are not installed)
and runs a real ReAct episode on the toy suite: a base model has no chat template, so its prompts are the plain-text
transcript of ``jitlab.llm.hf._plain_prompt``."""
import importlib.util

import pytest

from jitlab.errors import ModelPackageMissing, UnknownName
from jitlab.llm import get_backbone, hf
from jitlab.llm.base import check_name, weights_of

installed = all(importlib.util.find_spec(f"{hf.GEMMA_PACKAGE}{s}") is not None for s in ("", "_part1", "_part2",
                                                                                        "_part3", "_part4"))
requires_gemma = pytest.mark.skipif(not installed, reason="gemma3-270m not installed (optional): run `make gemma`")


def test_name_and_weights_without_loading():
    check_name("gemma3-270m")
    with pytest.raises(UnknownName):
        check_name("gemma3-270m:other")
    assert "Gemma 3 270M base" in weights_of("gemma3-270m") and "SmolLM2" in weights_of("embedded")


def test_missing_packages_say_how_to_install(monkeypatch):
    monkeypatch.setattr(hf.packaged, "_find_package", lambda name: None)
    with pytest.raises(ModelPackageMissing, match="make gemma"):
        get_backbone("gemma3-270m")


def test_plain_prompt_for_a_model_without_chat_template():
    msgs = [{"role": "system", "content": "Play."}, {"role": "user", "content": "A room."}]
    assert hf._plain_prompt(msgs) == "Play.\n\nUser: A room.\n\nAssistant:"
    assert hf._plain_prompt(msgs + [{"role": "assistant", "content": "Action:"}]).endswith("User: A room.\n\nAssistant: Action:")


@pytest.mark.slow
@requires_gemma
def test_gemma_runs_a_react_episode(tmp_path):
    from jitlab.runner import RunConfig, run
    from jitlab.store import load
    bb = get_backbone("gemma3-270m")
    assert bb.id == hf.GEMMA_ID and bb.engine.prompt_format == "plain"
    assert hf.gemma_gguf_path().stat().st_size == 253113024
    msgs = [{"role": "user", "content": "Commands:\n- go east\n- take coin"}]
    scores = bb.score(msgs, ["take coin", "zzqx vvb"])
    assert scores[0] > scores[1]  # a real likelihood, not a constant
    out = run(RunConfig(suite="toy", harness="react", backbone="gemma3-270m", limit=1, max_steps=2, out=str(tmp_path),
                        quiet=True))
    frames = load(out)
    assert frames["config"].iloc[0]["backbone"] == "gemma3-270m" and len(frames["steps"]) >= 1
    assert frames["episodes"].iloc[0]["tokens"] > 0 and frames["episodes"].iloc[0]["cost"] > 0
