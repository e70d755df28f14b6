"""Engineers: who proposes K patches for a failure packet.

    from jitlab.engineer.proposer import make_engineer
    engineer = make_engineer("rules")                       # the offline rule teacher (no model)
    engineer = make_engineer("embedded", lambda i: LLMHandle(backbone, seed=i))   # any backbone: embedded, hf:, litellm:
    proposals = engineer.propose(packet, k=4, current="")   # [Proposal(name, text, note)]

A model engineer renders ``templates/propose.j2`` (Jinja, StrictUndefined) with the packet and the patch in
use, asks the backbone once per proposal (proposal i uses handle seed i and temperature 0.8 after the first,
so the replay cache keeps K different replies apart) and takes the first ```python block of the reply (to its
end when a reply cut off at ``max_new_tokens`` never closes it; the whole reply when there is no block). Its
replies are not checked here: every proposal goes through jitlab.engineer.patches validation, and a broken
one is recorded with its diagnostic.
"""
from __future__ import annotations

import re
from pathlib import Path

import jinja2

from jitlab.engineer.rules import Proposal, propose_rules, rule_fields

__all__ = ["ModelEngineer", "RuleEngineer", "extract_patch", "make_engineer", "render_prompt"]

TEMPLATES = Path(__file__).parent / "templates"
_ENV = jinja2.Environment(undefined=jinja2.StrictUndefined, loader=jinja2.FileSystemLoader(str(TEMPLATES)))
_BLOCK = re.compile(r"```(?:python|py)?[ \t]*\n(.*?)(?:```|\Z)", re.DOTALL)  # a reply cut at max tokens: unclosed


def extract_patch(reply: str) -> str:
    """The patch in a model's reply: its first ```python block (to the end when never closed), else the whole reply."""
    block = _BLOCK.search(reply)
    return (block.group(1) if block else reply).strip() + "\n"


def render_prompt(packet: dict, current: str = "", max_failures: int = 3) -> str:
    return _ENV.get_template("propose.j2").render(packet=packet, current=current, max_failures=max_failures).strip()


class RuleEngineer:
    """The offline teacher: rule patches chosen and parameterised from the packet (jitlab.engineer.rules)."""
    name = "rules"

    def propose(self, packet: dict, k: int, current: str = "") -> list[Proposal]:
        return propose_rules(packet, k, rule_fields(current))


class ModelEngineer:
    """A backbone writes each patch. ``new_handle(index)`` returns a brokered LLMHandle (records its calls)."""

    def __init__(self, name: str, new_handle, max_new_tokens: int = 512):
        self.name, self.new_handle, self.max_new_tokens = name, new_handle, max_new_tokens

    def propose(self, packet: dict, k: int, current: str = "") -> list[Proposal]:
        prompt = render_prompt(packet, current)
        out = []
        for i in range(k):
            llm = self.new_handle(i)
            params = {"max_new_tokens": self.max_new_tokens, "temperature": 0.0 if i == 0 else 0.8}
            reply = llm.chat([{"role": "user", "content": prompt}], **params).text
            text = extract_patch(reply)
            out.append(Proposal(name=f"{self.name}#{i}", text=text, note=f"{llm.tokens} tokens", reply=reply))
        return out


def make_engineer(name: str, new_handle=None, **options):
    """``rules`` or a backbone name (``new_handle(index)`` gives that backbone's handle for proposal index);
    ``options``: ModelEngineer's (max_new_tokens)."""
    if name == "rules":
        return RuleEngineer()
    if new_handle is None:
        from jitlab.errors import ConfigError
        raise ConfigError(f"engineer {name!r} is a backbone: it needs a handle (new_handle)")
    return ModelEngineer(name, new_handle, **options)
