"""openvino backend (the default backbone): the embedded model's weights as OpenVINO IR, continuous batching for chat,
a stateless pass for score.

openvino-genai is a jitlab dependency, so nothing here is skipped. One engine serves the module's tests (its model
folder is written once to the shared test data dir, about 10 s); replies are a few tokens long. Tests marked ``slow``
load a second model (the hf float32 reference, or a float32 OpenVINO engine).
"""
import threading

import pytest

from jitlab.engineer.loop import EngineerConfig
from jitlab.engineer.table import TableConfig
from jitlab.engineer.transfer import TransferConfig
from jitlab.errors import ConfigError, UnknownName
from jitlab.jit.config import JITConfig
from jitlab.llm import get_backbone, openvino
from jitlab.llm.base import DEFAULT_BACKBONE, check_name, check_options, weights_of
from jitlab.llm.pricing import known_price
from jitlab.runner import RunConfig
from jitlab.train.config import Stage1Config, Stage3Config
from jitlab.train.pipeline import PipelineConfig

QUESTION = [{"role": "user", "content": "What is the capital of France?"}]
OTHERS = [[{"role": "user", "content": text}] for text in
          ("Write a haiku about the sea.", "List three fruits and their colours.", "Describe a cat in two sentences.")]


def test_names_ids_and_prices_without_loading_anything():
    check_name("openvino:embedded")
    check_name("openvino:embedded-q8_0")
    with pytest.raises(UnknownName, match="openvino:embedded"):
        check_name("openvino")
    assert "stored as F16, run by OpenVINO" in weights_of("openvino:embedded")
    assert "stored as Q8_0" in weights_of("openvino:embedded-q8_0")
    assert known_price("openvino:embedded-q8_0") == known_price("embedded")
    with pytest.raises(ConfigError, match="openvino:embedded-q8_0"):
        get_backbone("openvino:embedded-q4_1")
    with pytest.raises(ConfigError, match="precision='f16' must be bf16 or f32"):
        get_backbone("openvino:embedded", precision="f16")


def test_the_default_backbone_runs_harnesses_and_training_stays_on_embedded():
    assert DEFAULT_BACKBONE == "openvino:embedded"
    defaults = {RunConfig().backbone, JITConfig().backbone, EngineerConfig().backbone, TableConfig().backbone,
                TransferConfig().learn_on}
    assert defaults == {DEFAULT_BACKBONE}
    check_options(DEFAULT_BACKBONE, {})   # a known name, its model package and openvino-genai installed; loads nothing
    # the hf model trained, and the executors in resumable pipelines' fingerprints: still the hf reference
    assert Stage1Config(data="d").base == Stage3Config(policy="p").executor == PipelineConfig().executor == "embedded"


def test_missing_openvino_is_refused_before_a_run_writes(monkeypatch):
    monkeypatch.setattr(openvino, "find_spec", lambda name: None)
    with pytest.raises(ConfigError, match=r"openvino-genai \(a jitlab dependency\) is not installed; run make setup"):
        check_options("openvino:embedded", {})


@pytest.fixture(scope="module")
def smol():
    return get_backbone("openvino:embedded", max_batch=4)


def test_chat_accounting_max_tokens_and_stop_strings(smol):
    full = smol.chat(QUESTION, max_new_tokens=20)
    assert smol.id == "openvino:smollm2-135m-instruct"
    assert full.text and full.prompt_tokens == len(smol.engine.prompt_ids(QUESTION)) > 10
    assert 0 < full.completion_tokens <= 20 and full.cost > 0 and full.reused_tokens is None
    assert 0 <= full.queue_s and 0 < full.compute_s <= full.latency_s
    assert smol.chat(QUESTION, max_tokens=3).completion_tokens == 3
    words = full.text.split()
    assert len(words) >= 3, full.text
    stop = " " + words[2]
    cut = smol.chat(QUESTION, max_new_tokens=20, stop=[stop, "never-appears"])
    assert cut.text == full.text[:full.text.index(stop)] and cut.completion_tokens < full.completion_tokens


def test_concurrent_requests_share_steps(smol):
    steps = smol.engine.steps
    replies: list = [None] * 4
    barrier = threading.Barrier(4)

    def call(i):
        barrier.wait()
        replies[i] = smol.chat(([QUESTION] + OTHERS)[i], max_new_tokens=16)

    threads = [threading.Thread(target=call, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(r.text for r in replies)
    assert smol.engine.steps - steps < sum(r.completion_tokens for r in replies)   # steps served several requests


@pytest.mark.slow
def test_score_ranks_reuses_the_prompt_and_is_close_to_hf(smol):
    good, bad = "The capital of France is Paris.", "Bananas are purple sharks."
    scores = smol.score(QUESTION, [good, bad])
    assert scores[0] > scores[1]
    assert set(smol.last_score_timing()) == {"queue_s", "compute_s", "reused", "prompt_tokens"}
    longer = [*QUESTION, {"role": "assistant", "content": "The capital"}]
    again = smol.score(longer, [" of France is Paris.", " is Rome"])
    assert smol.last_score_timing()["reused"] == len(smol.engine.prompt_ids(QUESTION))   # the kept prompt's prefix
    assert again[0] > again[1] and smol.score(QUESTION, []) == []
    reference = get_backbone("embedded").score(QUESTION, [good, bad])   # float32 hf; bfloat16 here
    assert scores == pytest.approx(reference, rel=0.05, abs=0.3)


@pytest.mark.slow
def test_a_kept_prompt_prefix_scores_as_a_fresh_pass():
    llm = get_backbone("openvino:embedded", precision="f32")
    assert llm.id == "openvino:smollm2-135m-instruct+f32"
    longer = [*QUESTION, {"role": "assistant", "content": "The capital"}]
    candidates = [" of France is Paris.", " is Rome"]
    llm.score(QUESTION, ["Paris"])
    reused = llm.score(longer, candidates)
    assert llm.last_score_timing()["reused"] > 10
    llm.engine.kept.clear()
    fresh = llm.score(longer, candidates)
    assert llm.last_score_timing()["reused"] == 0
    assert reused == pytest.approx(fresh, rel=1e-4)


def test_the_scorer_is_stateless_and_a_kept_prefix_in_bf16_scores_as_a_fresh_pass(smol):
    engine = smol.engine
    names = {p.any_name for p in engine.scorer.inputs}
    assert {"past.0", "keep", "beam_idx"} <= names and not engine.score_request.query_state()
    assert {o.any_name for o in engine.scorer.outputs} >= {"logits", "present.0"}
    longer = [*QUESTION, {"role": "assistant", "content": "The capital"}]
    candidates = [" of France is Paris.", " is Rome", "!"]
    engine.kept.clear()
    smol.score(QUESTION, ["Paris"])
    kept = engine.kept[-1]
    assert kept[0] == engine.prompt_ids(QUESTION) and kept[1]["past.0"].shape[2] == len(kept[0])
    reused = smol.score(longer, candidates)
    assert smol.last_score_timing()["reused"] == len(kept[0])
    engine.kept.clear()
    fresh = smol.score(longer, candidates)
    assert smol.last_score_timing()["reused"] == 0
    assert reused == pytest.approx(fresh, rel=1e-5)   # bfloat16 too: the past takes the same kernel as new tokens
