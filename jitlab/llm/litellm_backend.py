"""litellm backbones: ``litellm:<provider/model>`` — any litellm provider or an OpenAI-compatible server.

    get_backbone("litellm:openai/gpt-4o-mini")                       # key from OPENAI_API_KEY
    get_backbone("litellm:openai/qwen2.5-7b", api_base="http://127.0.0.1:8000/v1")   # no key needed
    get_backbone("litellm:ollama/llama3.2", api_base="http://127.0.0.1:11434")
    get_backbone("litellm:openai/my-model", api_base=..., pricing="prices.yaml")

Parameters: only OpenAI chat parameters go out (OPENAI_PARAMS; ``extra_body`` carries server-specific
ones). The hf backend's names are translated (``max_new_tokens`` -> ``max_tokens``, ``do_sample=False``
-> temperature 0) or dropped with a warning (``top_k``, ``repetition_penalty``); any other name is a
ConfigError before a request is sent (servers answer unknown fields with HTTP 400/422).

API key: ``api_key``, else the provider's variable (e.g. OPENAI_API_KEY); with ``api_base`` set and
neither, the placeholder PLACEHOLDER_KEY is sent, since local servers (vLLM, llama.cpp,
transformers serve, Ollama) need none but litellm's OpenAI client refuses to send a request without
one. A missing key, or a key (or placeholder) the server refuses, is a ConfigError, never retried.

Errors: transient provider failures (connection, timeout, rate limit, 5xx) are retried
``retries`` times with exponential backoff (``backoff_s * 2**attempt``); if they persist the call
raises :class:`jitlab.errors.InfraError` — an infrastructure failure the runner retries, never a
task failure. Requests the provider rejects as such (bad key, unknown model, bad request) are
not retried and raise :class:`jitlab.errors.ConfigError` with the provider's message (and the
server's response body, which litellm's message often lacks).

Replies end before the first ``stop`` string, as OpenAI's do, even from a server that returns it.

Cost: a pricing YAML entry (``pricing=`` file or dict, then jitlab/llm/pricing.yaml) wins, keyed
by ``litellm:<model>`` or ``<model>``; otherwise litellm's bundled price map; otherwise 0 (e.g. a
self-hosted model; a warning says so once). litellm is imported on first use (it is slow to
import) with ``LITELLM_LOCAL_MODEL_COST_MAP=True`` so it never fetches its price map online.
"""
from __future__ import annotations

import json
import logging
import os
import time
from dataclasses import dataclass, field

from jitlab.errors import ConfigError, InfraError
from jitlab.llm.base import backend_config
from jitlab.llm.pricing import find_price, resolve_pricing
from jitlab.protocol import Completion

__all__ = ["HF_ONLY_PARAMS", "OPENAI_PARAMS", "PLACEHOLDER_KEY", "LiteLLMBackbone", "LiteLLMConfig"]

log = logging.getLogger(__name__)

# chat() parameters sent as they are (OpenAI chat-completions names; extra_body carries server-specific ones)
OPENAI_PARAMS = frozenset({"temperature", "top_p", "max_tokens", "max_completion_tokens", "stop", "seed",
                           "presence_penalty", "frequency_penalty", "logit_bias", "response_format", "extra_body"})
# the hf backend's parameters: max_new_tokens -> max_tokens, do_sample=False -> temperature 0, the rest dropped
HF_ONLY_PARAMS = frozenset({"max_new_tokens", "do_sample", "top_k", "repetition_penalty"})
# sent when api_base is set and no key is: local servers ignore it, litellm's OpenAI client needs one
PLACEHOLDER_KEY = "no-key"


@dataclass
class LiteLLMConfig:
    """Options of a litellm backbone (``get_backbone("litellm:<model>", **options)``)."""
    api_base: str | None = field(default=None, metadata={"help": "base URL of an OpenAI-compatible server (vLLM, llama.cpp, Ollama)"})
    api_key: str | None = field(default=None, metadata={"help": "API key; default: the provider's env variable, else a placeholder with api_base"})
    pricing: str | dict | None = field(default=None, metadata={"help": "pricing YAML path or dict {model: {input_per_mtok, output_per_mtok}}"})
    retries: int = field(default=3, metadata={"help": "retries of a transient provider failure before InfraError", "min": 0})
    backoff_s: float = field(default=1.0, metadata={"help": "first retry delay; doubles each retry", "min": 0})
    timeout: float = field(default=120.0, metadata={"help": "seconds per request", "min_exclusive": 0})
    max_tokens: int | None = field(default=None, metadata={"help": "default cap on completion tokens per call", "min": 1})
    temperature: float = field(default=0.0, metadata={"help": "default temperature (0 = as deterministic as the provider allows)", "min": 0})
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


def _detail(exc: Exception) -> str:
    """What the server itself said (litellm's message often holds only the status code)."""
    body = getattr(exc, "body", None)
    if body is None and getattr(exc, "response", None) is not None:
        body = getattr(exc.response, "text", None)
    text = body if isinstance(body, str) else json.dumps(body, default=str) if body is not None else ""
    return f"; the server said: {text[:300]}" if text and text not in str(exc) else ""


def _cut_at_stop(text: str, stop) -> str:
    """The reply up to its first stop string, as OpenAI returns it (some servers, e.g. transformers
    serve, keep the stop string; the token counts are the server's either way)."""
    stops = [stop] if isinstance(stop, str) else list(stop or ())
    hits = [text.find(s) for s in stops if s and s in text]
    return text[:min(hits)] if hits else text


def _missing_key(exc: Exception) -> bool:
    """litellm reports a client-side missing key as a server error (InternalServerError): not transient."""
    text = str(exc)
    return "Missing credentials" in text or "api_key client option must be set" in text


def _non_retryable(litellm) -> tuple[type, ...]:
    names = ("AuthenticationError", "PermissionDeniedError", "NotFoundError", "BadRequestError",
             "UnprocessableEntityError", "UnsupportedParamsError")
    return tuple(getattr(litellm, n) for n in names if isinstance(getattr(litellm, n, None), type))


class LiteLLMBackbone:
    """A model behind litellm. ``chat`` returns text with provider-reported token usage and cost."""

    def __init__(self, model: str, **options):
        if not model:
            raise ConfigError("litellm backbone needs a model: litellm:<provider/model>, e.g. litellm:openai/gpt-4o-mini")
        self.model = model
        self.config = cfg = backend_config("litellm", LiteLLMConfig, options)
        self.id = cfg.name or f"litellm:{model}" + (f"@{cfg.api_base}" if cfg.api_base else "")
        self.price = find_price(resolve_pricing(cfg.pricing), self.id, f"litellm:{model}", model)
        self._warned_free = False
        self._warned: set[str] = set()
        self._placeholder: str | None = None   # decided on the first call (needs litellm)

    def chat(self, messages: list[dict], **params) -> Completion:
        litellm = _import_litellm()
        cfg = self.config
        request = {"model": self.model, "messages": [{"role": str(m["role"]), "content": str(m["content"])} for m in messages],
                   "timeout": cfg.timeout, "num_retries": 0, "max_retries": 0, "temperature": cfg.temperature}
        if cfg.max_tokens is not None:
            request["max_tokens"] = cfg.max_tokens
        request.update(self._openai_params(params))
        if cfg.api_base:
            request["api_base"] = cfg.api_base
        api_key = cfg.api_key or self._placeholder_key(litellm)
        if api_key:
            request["api_key"] = api_key
        start = time.perf_counter()
        response = self._call(litellm, request)
        latency = time.perf_counter() - start
        text = _cut_at_stop(response.choices[0].message.content or "", request.get("stop"))
        usage = getattr(response, "usage", None)
        prompt = int(getattr(usage, "prompt_tokens", 0) or 0)
        completion = int(getattr(usage, "completion_tokens", 0) or 0)
        if usage is None:
            prompt = litellm.token_counter(model=self.model, messages=request["messages"])
            completion = litellm.token_counter(model=self.model, text=text)
        return Completion(text=text, prompt_tokens=prompt, completion_tokens=completion,
                          cost=self._cost(litellm, response, prompt, completion), latency_s=latency)

    def _openai_params(self, params: dict) -> dict:
        """The chat parameters as OpenAI names them: ``max_new_tokens`` becomes ``max_tokens``,
        ``do_sample=False`` temperature 0, other hf-only ones are dropped (warned once); an unknown
        name is a ConfigError (an OpenAI-compatible server answers it with HTTP 400/422)."""
        out = {k: v for k, v in params.items() if k in OPENAI_PARAMS}
        if "max_new_tokens" in params and "max_tokens" not in out:
            out["max_tokens"] = params["max_new_tokens"]
        if params.get("do_sample") is False and "temperature" not in out:
            out["temperature"] = 0.0
        dropped = sorted(set(params) & set(HF_ONLY_PARAMS) - {"max_new_tokens", "do_sample"} - self._warned)
        if dropped:
            log.warning("%s: chat parameter(s) %s have no OpenAI equivalent and are not sent", self.id, ", ".join(dropped))
            self._warned.update(dropped)
        unknown = sorted(set(params) - set(OPENAI_PARAMS) - set(HF_ONLY_PARAMS))
        if unknown:
            raise ConfigError(f"{self.id}: unknown chat parameter(s) {', '.join(unknown)}; OpenAI parameters: "
                              f"{', '.join(sorted(OPENAI_PARAMS))} (server-specific ones go in extra_body={{...}})")
        return out

    def _placeholder_key(self, litellm) -> str | None:
        """The key to send when none is configured: a placeholder if ``api_base`` is set and the
        provider's key variable (e.g. OPENAI_API_KEY) is unset. Local servers need no key, but
        litellm's OpenAI client refuses to send a request without one."""
        if not self.config.api_base:
            return None
        if self._placeholder is None:
            try:
                missing = litellm.validate_environment(model=self.model, api_base=self.config.api_base)["missing_keys"]
            except Exception as exc:  # noqa: BLE001 -- a provider litellm cannot check: let it use its own defaults
                log.debug("validate_environment(%s) failed: %s", self.model, exc)
                missing = []
            self._placeholder = PLACEHOLDER_KEY if missing else ""
            if missing:
                log.info("%s: no API key set (%s); sending a placeholder key to %s", self.id, ", ".join(missing),
                         self.config.api_base)
        return self._placeholder or None

    def _call(self, litellm, request: dict):
        fatal = _non_retryable(litellm)
        auth = getattr(litellm, "AuthenticationError", ())
        last: Exception | None = None
        for attempt in range(self.config.retries + 1):
            if attempt:
                time.sleep(self.config.backoff_s * 2 ** (attempt - 1))
            try:
                return litellm.completion(**request)
            except fatal as exc:
                if isinstance(exc, auth) and request.get("api_key") == PLACEHOLDER_KEY:
                    raise ConfigError(f"{self.id}: the server at {self.config.api_base} wants an API key (no key was "
                                      f"set, so a placeholder was sent){_detail(exc)}; set the provider's key "
                                      "variable (e.g. OPENAI_API_KEY) or pass api_key=; not retried.") from exc
                raise ConfigError(f"{self.id} rejected the request ({type(exc).__name__}: "
                                  f"{str(exc)[:300]}){_detail(exc)}. Check the model name, api_base and api_key; "
                                  "this is not retried.") from exc
            except Exception as exc:  # litellm maps every provider/transport failure to its own classes
                if _missing_key(exc):
                    raise ConfigError(f"{self.id}: no API key ({str(exc)[:200]}); set the provider's key variable "
                                      "(e.g. OPENAI_API_KEY), pass api_key=, or for a local server --api-base; "
                                      "not retried.") from exc
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
