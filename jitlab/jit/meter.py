"""The JIT task's meter: one LLMHandle per call set, tagged with its phase (generate, select, repair, execute),
whose call records wait until the task's episode row exists; and the per-phase and total sums the record holds."""
from __future__ import annotations

import threading

from jitlab.runtime import Budget, LLMHandle, RunSpend

__all__ = ["Meter", "Totals"]


class Totals:
    """Sums a set of LLMHandles: what RunStore.finish_episode reads (all phases)."""

    def __init__(self, handles):
        self.prompt_tokens = sum(h.prompt_tokens for h in handles)
        self.completion_tokens = sum(h.completion_tokens for h in handles)
        self.cost = sum(h.cost for h in handles)
        self.calls = sum(h.calls for h in handles)


class Meter:
    """Hands out one LLMHandle per call set, tagged with its phase; buffers their call records until the
    task's episode row exists (``attach``), then writes straight to the store."""

    def __init__(self, backbones: dict, cache, seed: int, gen_max_tokens: int, smoke_max_tokens: int,
                 spend: RunSpend | None = None, sample_seed: bool = False):
        self.backbones, self.cache, self.seed, self.spend = backbones, cache, seed, spend
        self.sample_seed = sample_seed  # a sampling backbone: every call samples with the run's seed
        self.gen_max_tokens, self.smoke_max_tokens = gen_max_tokens, smoke_max_tokens
        self.handles: list[LLMHandle] = []
        self._buffer: list[dict] = []
        self._sink = None
        self._lock = threading.Lock()

    def handle(self, phase: str, backbone: str = "exec", budget: Budget | None = None) -> LLMHandle:
        if budget is None:
            budget = Budget(max_tokens=self.gen_max_tokens if phase in ("generate",) else
                            self.smoke_max_tokens + self.gen_max_tokens)
        h = LLMHandle(self.backbones[backbone], budget, self.cache, on_call=self._record, seed=self.seed, phase=phase,
                      spend=self.spend, sample_seed=self.sample_seed)
        with self._lock:
            self.handles.append(h)
        return h

    def _record(self, call: dict) -> None:
        with self._lock:
            if self._sink is None:
                self._buffer.append(call)
                return
        self._sink(call)

    def attach(self, sink) -> None:
        with self._lock:
            buffered, self._buffer, self._sink = self._buffer, [], sink
        for call in buffered:
            sink(call)

    def phase(self, phase: str) -> dict:
        hs = [h for h in self.handles if h.phase == phase]
        return {"tokens": sum(h.tokens for h in hs), "cost": sum(h.cost for h in hs), "calls": sum(h.calls for h in hs)}

    def totals(self) -> Totals:
        return Totals(self.handles)

    def spend_stopped(self) -> bool:
        """Whether the run's spend cap refused a call of this task (any phase)."""
        return any(h.spend_stopped for h in self.handles)
