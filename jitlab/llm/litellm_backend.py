"""litellm backbones: ``litellm:<provider/model>`` — any litellm provider or an OpenAI-compatible server.

    get_backbone("litellm:openai/gpt-4o-mini")                       # key from OPENAI_API_KEY
    get_backbone("litellm:openai/qwen2.5-7b", api_base="http://127.0.0.1:8000/v1", api_key="none")
    get_backbone("litellm:ollama/llama3.2", api_base="http://127.0.0.1:11434")
    get_backbone("litellm:openai/my-model", api_base=..., pricing="prices.yaml")

Errors: transient provider failures (connection, timeout, rate limit, 5xx) are retried
``retries`` times with exponential backoff (``backoff_s * 2**attempt``); if they persist the call
raises :class:`jitlab.errors.InfraError` — an infrastructure failure the runner retries, never a
task failure. Requests the provider rejects as such (bad key, unknown model, bad request) are
not retried and raise :class:`jitlab.errors.ConfigError` with the provider's message.

Cost: a pricing YAML entry (``pricing=`` file or dict, then jitlab/llm/pricing.yaml) wins, keyed
by ``litellm:<model>`` or ``<model>``; otherwise litellm's bundled price map; otherwise 0 (e.g. a
self-hosted model; a warning says so once). litellm is imported on first use (it is slow to
import) with ``LITELLM_LOCAL_MODEL_COST_MAP=True`` so it never fetches its price map online.
"""
from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass, field, fields

from jitlab.errors import ConfigError, InfraError
from jitlab.llm.pricing import find_price, resolve_pricing
from jitlab.protocol import Completion

__all__ = ["LiteLLMBackbone", "LiteLLMConfig"]

log = logging.getLogger(__name__)


@dataclass
class LiteLLMConfig:
    """Options of a litellm backbone (``get_backbone("litellm:<model>", **options)``)."""
    api_base: str | None = field(default=None, metadata={"help": "base URL of an OpenAI-compatible server (vLLM, llama.cpp, Ollama)"})
    api_key: str | None = field(default=None, metadata={"help": "API key; default: the provider's environment variable"})
    pricing: str | dict | None = field(default=None, metadata={"help": "pricing YAML path or dict {model: {input_per_mtok, output_per_mtok}}"})
    retries: int = field(default=3, metadata={"help": "retries of a transient provider failure before InfraError"})
    backoff_s: float = field(default=1.0, metadata={"help": "first retry delay; doubles each retry"})
    timeout: float = field(default=120.0, metadata={"help": "seconds per request"})
    max_tokens: int | None = field(default=None, metadata={"help": "default cap on completion tokens per call"})
    temperature: float = field(default=0.0, metadata={"help": "default temperature (0 = as deterministic as the provider allows)"})
    name: str | None = field(default=None, metadata={"help": "backbone id to record (default litellm:<model>[@api_base])"})


_litellm = None


def _import_litellm():
    global _litellm
    if _litellm is None:
        os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
        import litellm
        litellm.suppress_debug_info = True
        _litellm = litellm
    return _litellm


def _non_retryable(litellm) -> tuple[type, ...]:
    names = ("AuthenticationError", "PermissionDeniedError", "NotFoundError", "BadRequestError",
             "UnprocessableEntityError", "UnsupportedParamsError")
    return tuple(getattr(litellm, n) for n in names if isinstance(getattr(litellm, n, None), type))


class LiteLLMBackbone:
    """A model behind litellm. ``chat`` returns text with provider-reported token usage and cost."""

    def __init__(self, model: str, **options):
        if not model:
            raise ConfigError("litellm backbone needs a model: litellm:<provider/model>, e.g. litellm:openai/gpt-4o-mini")
        known = {f.name for f in fields(LiteLLMConfig)}
        unknown = sorted(set(options) - known)
        if unknown:
            raise ConfigError(f"unknown litellm backbone option(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}")
        self.model = model
        self.config = cfg = LiteLLMConfig(**options)
        self.id = cfg.name or f"litellm:{model}" + (f"@{cfg.api_base}" if cfg.api_base else "")
        self.price = find_price(resolve_pricing(cfg.pricing), self.id, f"litellm:{model}", model)
        self._warned_free = False

    def chat(self, messages: list[dict], **params) -> Completion:
        litellm = _import_litellm()
        cfg = self.config
        request = {"model": self.model, "messages": [{"role": str(m["role"]), "content": str(m["content"])} for m in messages],
                   "timeout": cfg.timeout, "num_retries": 0, "max_retries": 0, "temperature": cfg.temperature}
        if cfg.max_tokens is not None:
            request["max_tokens"] = cfg.max_tokens
        if "max_new_tokens" in params:           # the hf backend's name for it
            params = {**params, "max_tokens": params.pop("max_new_tokens")}
        request.update(params)
        if cfg.api_base:
            request["api_base"] = cfg.api_base
        if cfg.api_key:
            request["api_key"] = cfg.api_key
        start = time.perf_counter()
        response = self._call(litellm, request)
        latency = time.perf_counter() - start
        text = response.choices[0].message.content or ""
        usage = getattr(response, "usage", None)
        prompt = int(getattr(usage, "prompt_tokens", 0) or 0)
        completion = int(getattr(usage, "completion_tokens", 0) or 0)
        if usage is None:
            prompt = litellm.token_counter(model=self.model, messages=request["messages"])
            completion = litellm.token_counter(model=self.model, text=text)
        return Completion(text=text, prompt_tokens=prompt, completion_tokens=completion,
                          cost=self._cost(litellm, response, prompt, completion), latency_s=latency)

    def _call(self, litellm, request: dict):
        fatal = _non_retryable(litellm)
        last: Exception | None = None
        for attempt in range(self.config.retries + 1):
            if attempt:
                time.sleep(self.config.backoff_s * 2 ** (attempt - 1))
            try:
                return litellm.completion(**request)
            except fatal as exc:
                raise ConfigError(f"{self.id} rejected the request ({type(exc).__name__}): {exc}. Check the model "
                                  "name, api_base and api_key; this is not retried.") from exc
            except Exception as exc:  # litellm maps every provider/transport failure to its own classes
                last = exc
                log.warning("%s: attempt %d/%d failed: %s: %s", self.id, attempt + 1, self.config.retries + 1,
                            type(exc).__name__, str(exc)[:200])
        raise InfraError(f"{self.id}: provider failed {self.config.retries + 1} times "
                         f"(last: {type(last).__name__}: {str(last)[:300]}); check the server/api_base and rerun "
                         "— the runner retries infrastructure failures") from last

    def _cost(self, litellm, response, prompt: int, completion: int) -> float:
        if self.price is not None:
            return self.price.cost(prompt, completion)
        try:
            return float(litellm.completion_cost(completion_response=response) or 0.0)
        except Exception as exc:  # unknown to litellm's price map (self-hosted model): free, said once
            if not self._warned_free:
                log.warning("no price for %s (%s); its calls cost 0 — pass pricing=<yaml> to price them", self.id,
                            str(exc)[:120])
                self._warned_free = True
            return 0.0
