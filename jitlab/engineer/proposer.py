"""Engineers: who proposes K patches for a failure packet.

    from jitlab.engineer.proposer import make_engineer
    engineer = make_engineer("rules")                       # the offline rule teacher (no model)
    engineer = make_engineer("interventions")               # Life-Harness interventions mined from the batch's run
    engineer = make_engineer("embedded", lambda i: LLMHandle(backbone, seed=i))   # any backbone: embedded, hf:, litellm:
    proposals = engineer.propose(packet, k=4, current="", run_dir="runs/eng/round0/base")   # [Proposal(name, text, note)]

The interventions engineer reads the run directory the packet was built from (``run_dir``; the others ignore it):
one patch per mining threshold of ``THRESHOLDS`` (jitlab.engineer.interventions.mine + intervention_patch), on top
of the fields of the patch in use, distinct patches only, at most K (fewer when thresholds mine the same set).

A model engineer renders ``templates/propose.j2`` (Jinja, StrictUndefined) with the packet and the patch in
use, asks the backbone once per proposal (proposal i uses handle seed i and temperature 0.8 after the first,
so the replay cache keeps K different replies apart) and takes the first ```python block of the reply (to its
end when a reply cut off at ``max_new_tokens`` never closes it; the whole reply when there is no block). Its
replies are not checked here: every proposal goes through jitlab.engineer.patches validation, and a broken
one is recorded with its diagnostic.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import jinja2

from jitlab.engineer.interventions import Interventions, intervention_patch, mine
from jitlab.engineer.rules import Proposal, propose_rules, rule_fields
from jitlab.errors import ConfigError
from jitlab.modules.hooks import InterventionHooks

__all__ = ["OFFLINE", "THRESHOLDS", "InterventionEngineer", "ModelEngineer", "RuleEngineer", "extract_patch",
           "make_engineer", "render_prompt"]

OFFLINE = ("rules", "interventions")   # engineers that need no model
THRESHOLDS = (0.05, 0.1, 0.2, 0.3)     # the interventions engineer's mining thresholds, one candidate each

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

    def propose(self, packet: dict, k: int, current: str = "", run_dir=None) -> list[Proposal]:
        return propose_rules(packet, k, rule_fields(current))


class InterventionEngineer:
    """Offline: interventions mined from ``run_dir`` (the run the packet was built from), one per threshold."""
    name = "interventions"

    def propose(self, packet: dict, k: int, current: str = "", run_dir=None) -> list[Proposal]:
        from dataclasses import fields

        if run_dir is None:
            raise ConfigError("engineer 'interventions' mines the batch's run records: pass run_dir to propose")
        kept = rule_fields(current, names={f.name for f in fields(InterventionHooks)})
        out: list[Proposal] = []
        for threshold in THRESHOLDS:
            found = mine([run_dir], threshold=threshold)
            text = intervention_patch(Interventions(kept | found.fields, found.evidence))
            if len(out) < k and all(p.text != text for p in out):
                out.append(Proposal(name=f"interventions@{threshold}", text=text,
                                    note=json.dumps(found.evidence["share"], sort_keys=True)))
        return out


class ModelEngineer:
    """A backbone writes each patch. ``new_handle(index)`` returns a brokered LLMHandle (records its calls)."""

    def __init__(self, name: str, new_handle, max_new_tokens: int = 512):
        self.name, self.new_handle, self.max_new_tokens = name, new_handle, max_new_tokens

    def propose(self, packet: dict, k: int, current: str = "", run_dir=None) -> list[Proposal]:
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
    """``rules``, ``interventions`` or a backbone name (``new_handle(index)`` gives that backbone's handle for
    proposal index); ``options``: ModelEngineer's (max_new_tokens)."""
    if name == "rules":
        return RuleEngineer()
    if name == "interventions":
        return InterventionEngineer()
    if new_handle is None:
        raise ConfigError(f"engineer {name!r} is a backbone: it needs a handle (new_handle)")
    return ModelEngineer(name, new_handle, **options)
