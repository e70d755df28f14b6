"""What every generator shares: the ``Candidate`` it returns, the ``Reference`` it reads, the
``Generator`` protocol, template rendering and the registry ``get_generator``.

    from jitlab.jit.generate import get_generator
    gen = get_generator("compose", handle)            # or "code:embedded", "code:litellm:gpt-4o-mini"
    cand = gen.generate(task.public(), references, handle, index=0)
    fixed = gen.repair(cand, diagnostic_dict, task.public(), handle)

Generators see only ``TaskSpec.public()`` (a dict: id, suite, family, description, tools, max_steps),
never ``TaskSpec.data``: the signature takes the dict, so the private part cannot leak in.
Prompts are Jinja template files in ``jitlab/jit/generate/templates`` rendered with StrictUndefined.

A ``Candidate``'s files are its *resolved* source (``resolved``): a generator may write a file that
subclasses the module library, but the candidate stores, runs and hashes the file with that library code
written out, and references and repair prompts show resolved source, never bare import lines.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Protocol

import jinja2

from jitlab.errors import UnknownName
from jitlab.harness import describe_files, harness_sha
from jitlab.plumbing import json_digest, load_entry

__all__ = [
    "GENERATORS",
    "TEMPLATE_DIR",
    "Candidate",
    "Generator",
    "Reference",
    "describe_files",
    "evidence",
    "generator_backbone",
    "get_generator",
    "prompt_hash",
    "render",
    "resolved",
    "sampling",
]

TEMPLATE_DIR = Path(__file__).parent / "templates"
# Generators by short name -> "module:factory", loaded on use like suites and backbones, so this module never
# imports a generator (they import it). A factory takes (name, backbone_handle, **config); "code" and "plan"
# take a backbone after the colon (code:<backbone>). Any "package.module:factory" path works too.
GENERATORS: dict[str, str] = {
    "compose": "jitlab.jit.generate.compose:make_generator",
    "code": "jitlab.jit.generate.code:make_generator",
    "plan": "jitlab.jit.generate.plan:make_generator",
}


def sampling(task: dict, index: int, temperature: float) -> dict:
    """The decoding parameters of candidate ``index`` for ``task``: none for candidate 0 (greedy), else
    ``temperature`` and a seed of the task's text and the index, so N candidates are N distinct, reproducible samples
    and two tasks do not share one sample sequence (the seed reads the description, never the task id)."""
    if index <= 0:
        return {}
    digest = hashlib.sha256(f"{task.get('description', '')}\n{index}".encode()).hexdigest()
    return {"temperature": temperature, "seed": int(digest[:8], 16)}


@dataclass
class Reference:
    """A bank entry shown to a generator: its sha, name, description text, files and retrieval score."""
    sha: str
    name: str
    description: str
    files: dict[str, str] = field(repr=False, default_factory=dict)
    score: float = 0.0
    evaluated: bool = False
    mean_reward: float | None = None


def references(bank, task_description: str, k: int, kind: str | None = None) -> list[Reference]:
    """The ``k`` references ``bank`` (a jitlab.jit.bank.Bank) retrieves for a task: what JIT inference shows a
    generator, and so what every training and evaluation prompt of a generator shows too (k=0: none). ``kind`` (the
    task's ``jitlab.jit.kind.task_kind``): retrieval and each reference's evaluation (``evaluated``, ``mean_reward``)
    read only the bank's evaluations on tasks of that kind (``Bank.retrieve``)."""
    entries = bank.retrieve(task_description, k=k, kind=kind) if k else []
    return [Reference(e.sha, e.name, e.description, bank.files(e.sha), float(e.score or 0.0), e.n_evals > 0,
                      e.mean_reward) for e in entries]


def evidence(bank, kind: str | None = None) -> list[Reference]:
    """Every evaluated entry of ``bank`` as a ``Reference`` (in order of arrival, score 0, the mean reward over the
    tasks it ran): the record of which harnesses worked, not a retrieval; compose's ``generate`` takes it as ``evidence``
    (``JITConfig.option_evidence='bank'``). With ``kind``, only evaluations on tasks of that kind count (an entry that
    ran only on other kinds is left out), so a design that failed or won on a text game says nothing of a SQL task."""
    return [Reference(e.sha, e.name, e.description, bank.files(e.sha), 0.0, True, e.mean_reward)
            for e in bank.entries(kind=kind) if e.n_evals > 0]


@dataclass
class Candidate:
    """One generated harness. ``meta`` says how it was made (strategy, choices, parsed/fallback files,
    the raw reply); ``logprob`` is the generator's own log-probability of it, when known."""
    files: dict[str, str] = field(repr=False)
    generator: str
    index: int = 0
    parents: list[str] = field(default_factory=list)
    prompt_hash: str | None = None
    logprob: float | None = None
    meta: dict = field(default_factory=dict)

    def __post_init__(self):
        # a candidate may subclass library modules; what is stored, run and hashed is its resolved source
        self.files = resolved(self.files)

    @property
    def sha(self) -> str:
        return harness_sha(self.files)

    @property
    def name(self) -> str:
        return str(describe_files(self.files).get("name") or self.sha[:12])


class Generator(Protocol):
    """Writes a harness for a task (``generate``) and fixes a broken one from a diagnostic (``repair``)."""
    name: str

    def generate(self, task: dict, references: list[Reference], llm=None, index: int = 0) -> Candidate: ...
    def repair(self, candidate: Candidate, diagnostic: dict, task: dict, llm=None, round: int = 1) -> Candidate: ...


def resolved(files: dict[str, str]) -> dict[str, str]:
    """The files with the library code they use written out (:mod:`jitlab.resolve`); a file set that
    does not resolve (a syntax error, say) is returned as it is, for validation to report."""
    from jitlab.resolve import resolved_or_raw
    return resolved_or_raw(files)


_ENV = jinja2.Environment(undefined=jinja2.StrictUndefined, keep_trailing_newline=True,
                          loader=jinja2.FileSystemLoader(str(TEMPLATE_DIR)), trim_blocks=True, lstrip_blocks=True)
_ENV.filters["pyrepr"] = repr
_ENV.filters["tojson"] = lambda v: json.dumps(v, ensure_ascii=False)


@lru_cache(maxsize=64)
def _template(name: str) -> jinja2.Template:
    return _ENV.get_template(name)


def render(template: str, **values) -> str:
    """Render ``jitlab/jit/generate/templates/<template>`` (StrictUndefined: a missing value is an error)."""
    return _template(template).render(**values)


def prompt_hash(messages: list[dict]) -> str:
    """sha256 of a prompt (its messages), stored as lineage in the bank."""
    return json_digest(messages)


def generator_backbone(name: str) -> str | None:
    """The backbone a ``code:<backbone>`` or ``plan:<backbone>`` generator writes with (None for compose)."""
    for prefix in ("code:", "plan:"):
        if name.startswith(prefix) and len(name) > len(prefix):
            return name[len(prefix):]
    return None


def get_generator(name: str, backbone_handle=None, **config) -> Generator:
    """``compose``, ``code:<backbone>``, ``plan:<backbone>`` or ``package.module:factory``. ``backbone_handle``
    (an LLMHandle) is the default handle for generate/repair calls; ``config`` sets fields of the generator's config
    dataclass."""
    kind, _, rest = name.partition(":")
    if kind in ("code", "plan") and not rest:
        kind = ""
    target = GENERATORS.get(kind) or (name if "." in kind and rest else None)
    if target is None:
        raise UnknownName("generator", name, [k + ":<backbone>" if k in ("code", "plan") else k for k in GENERATORS])
    return load_entry(target)(name, backbone_handle, **config)
