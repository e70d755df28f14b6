"""Replay cache exactness through the runtime's LLMHandle: a second identical call is a hit,
flagged cached=True, with the same text and the ORIGINAL call's tokens and cost."""
from jitlab.llm.cache import ReplayCache, cache_key, default_cache
from jitlab.llm.scripted import ScriptedBackbone
from jitlab.runtime import LLMHandle

MESSAGES = [{"role": "user", "content": "Options:\n- go east\n- take key"}]


def _handle(tmp_path, backbone, records):
    return LLMHandle(backbone, cache=ReplayCache(tmp_path / "replay.sqlite"), on_call=records.append, seed=3)


def test_second_call_is_an_exact_hit(tmp_path):
    backbone, records = ScriptedBackbone(lambda m: "Action: take key", name="cache-test"), []
    llm = _handle(tmp_path, backbone, records)
    first = llm.chat(MESSAGES, temperature=0)
    second = llm.chat(MESSAGES, temperature=0)
    assert backbone.calls == 1
    assert not first.cached and second.cached
    assert (second.text, second.prompt_tokens, second.completion_tokens, second.cost) == \
           (first.text, first.prompt_tokens, first.completion_tokens, first.cost)
    assert [r["cached"] for r in records] == [False, True]
    assert records[1]["cost"] == first.cost > 0
    assert llm.cost == 2 * first.cost        # a hit is charged what the original call cost


def test_hit_survives_a_new_process_handle(tmp_path):
    backbone = ScriptedBackbone(lambda m: "Action: go east", name="cache-test")
    _handle(tmp_path, backbone, []).chat(MESSAGES)
    again = _handle(tmp_path, ScriptedBackbone(lambda m: "DIFFERENT", name="cache-test"), []).chat(MESSAGES)
    assert again.cached and again.text == "Action: go east"


def test_key_covers_backbone_messages_params_and_seed():
    base = cache_key("b", MESSAGES, {"t": 0}, 0)
    assert base == cache_key("b", MESSAGES, {"t": 0}, 0)
    assert len({base, cache_key("c", MESSAGES, {"t": 0}, 0), cache_key("b", MESSAGES[:0], {"t": 0}, 0),
                cache_key("b", MESSAGES, {"t": 1}, 0), cache_key("b", MESSAGES, {"t": 0}, 1)}) == 5


def test_miss_on_different_params(tmp_path):
    backbone = ScriptedBackbone(lambda m: "x", name="cache-test")
    llm = _handle(tmp_path, backbone, [])
    llm.chat(MESSAGES, max_new_tokens=8)
    assert not llm.chat(MESSAGES, max_new_tokens=9).cached and backbone.calls == 2


def test_scores_are_cached(tmp_path):
    backbone = ScriptedBackbone(lambda m: "x", name="cache-test")
    records = []
    llm = _handle(tmp_path, backbone, records)
    first = llm.score(MESSAGES, ["take key", "dance"])
    assert llm.score(MESSAGES, ["take key", "dance"]) == first
    assert [r["cached"] for r in records] == [False, True]


def test_cache_off(monkeypatch):
    monkeypatch.setenv("JITLAB_CACHE", "off")
    assert default_cache() is None
