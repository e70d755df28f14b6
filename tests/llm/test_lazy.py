"""LazyBackbone (jitlab/llm/lazy.py): a scoring pass's timing reaches the runtime through the lazy wrapper."""
from jitlab.llm.lazy import LazyBackbone
from jitlab.runtime import Budget, LLMHandle


class _TimedScorer:
    """A TEST DOUBLE backbone whose score reports a reused prefix, as hf.py and llamacpp.py do."""
    id = "double"

    def score(self, messages, candidates):
        return [0.0 for _ in candidates]

    def last_score_timing(self):
        return {"queue_s": 0.0, "compute_s": 0.01, "reused": 7, "prompt_tokens": 12}


def test_score_timing_passes_through_the_lazy_wrapper_into_the_call_record():
    lazy = LazyBackbone("scripted:pick-first", {})
    lazy._backbone = _TimedScorer()
    assert lazy.last_score_timing()["reused"] == 7
    calls = []
    handle = LLMHandle(lazy, Budget(), on_call=calls.append)
    handle.score([{"role": "user", "content": "a room"}], ["go east", "go west"])
    assert calls[-1]["kind"] == "score" and calls[-1]["reused_tokens"] == 7 and calls[-1]["prompt_tokens"] == 12


def test_a_backbone_without_score_timing_reports_none():
    lazy = LazyBackbone("scripted:pick-first", {})
    assert lazy.last_score_timing() == {}
