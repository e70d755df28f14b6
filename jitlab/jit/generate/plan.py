"""Plan generator ``plan:<backbone>``: the backbone writes a small JSON *plan*, the compose renderer writes the files.

    gen = get_generator("plan:embedded", handle)
    cand = gen.generate(task.public(), references, handle, index=0)
    cand.meta["plan"]     # {"M": "FullHistory", "P": "NoPlanner", "F": "FullRegistry", "A": "ReActAction",
                          #  "prompt": "goal", "params": {"M": {"max_chars": 4000}}}

A plan names one library module per role (M memory, P planner, F capability policy, A action; class names from
:func:`jitlab.jit.generate.library.catalogue`), optionally ``hooks`` (the hooks slot H: a hook class such as
``RealisationHooks``, or ``none``, the default: no ``hooks.py``; its parameters go under ``params["H"]``), a prompt
(a shipped variant, ``react``/``goal``/``terse``, or a seed's or small-model harness's prompt, ``seed:<name>``,
``seed:small_model/<name>``; baselines such as ``random`` offer none) and, optionally, ``params`` overriding module
fields. It is 45-75 tokens, against the 3.5k-token prompt and ~500-token reply of ``code:``, which is what a 135M
model can learn to write (issue 12; the meta-agent is trained on this format by :mod:`jitlab.train`).
``render_files`` turns it into the same five files compose writes, so a plan that checks out always compiles.
The prompt states the couplings (``library.couplings``), so the generator can avoid a plan the checker refuses.
Candidate 0 is greedy; candidate ``i > 0`` is a sample (``temperature``, a seed of the task's text and ``i``:
``base.sampling``), so static JIT's N candidates differ where greedy decoding would give one plan N times.

A reply that holds no JSON object, or a plan naming an unknown module, parameter or prompt, breaking a coupling
(:func:`jitlab.jit.generate.library.requirements`) or naming an option that does not fit the task (the fit rule,
:func:`jitlab.jit.generate.library.misfit`: LikelihoodAction on a task without ``act``), is not rendered: the
candidate keeps the files of the nearest reference that fits the task, ``meta["parsed_files"] == []`` and
``meta["parse_error"]`` says what was wrong, so ``repair.unwritten`` sends it to repair as a ``parse_error``, like a
code candidate without file blocks. ``repair`` shows the broken
plan (or the raw reply) with the diagnostic and asks for a corrected plan.

An option the task calls for (``library.called_for``: the quantity planner where the task's text speaks of
quantities) is put in its role, with its partners, before the plan is checked (``with_called_for``; recorded in
``meta["refused"]`` as compose records it), so a plan generator that never saw the option cannot leave it out.

``plan_of(files)`` reads a harness back into a plan (None when a role is not a library module), which is how the
offline teacher (:mod:`jitlab.train.data`) turns recorded harnesses into training targets.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from functools import lru_cache

from jitlab.errors import HarnessError
from jitlab.fields import check_fields
from jitlab.harness import read_files, seed_bank_dir, seed_names, small_model_names
from jitlab.jit.generate.base import (
    Candidate,
    Reference,
    describe_files,
    prompt_hash,
    render,
    sampling,
)
from jitlab.jit.generate.library import (
    FITS,
    NO_HOOKS,
    ROLES,
    Choice,
    called_for,
    catalogue,
    choices_of,
    couplings,
    first_fitting,
    misfit_message,
    misfits,
    option,
    own_prompt,
    prompt_variants,
    render_files,
    requirements,
    unlisted,
)

__all__ = ["PlanConfig", "PlanError", "PlanGenerator", "check_plan", "parse_plan", "plan_files", "plan_messages",
           "plan_of", "plan_text", "prompt_options", "with_called_for"]

PLAN_KEYS = (*ROLES, "hooks", "prompt", "params")


class PlanError(HarnessError):
    """A reply that is not a usable plan; the message says what is wrong (shown to repair)."""

    def __init__(self, message: str):
        super().__init__(message, None, "parse_error")


@dataclass
class PlanConfig:
    """How the plan generator prompts its backbone."""
    max_new_tokens: int = field(default=160, metadata={"help": "tokens the backbone may write per plan", "min": 8})
    repair_max_new_tokens: int = field(default=160, metadata={"help": "tokens per repaired plan", "min": 8})
    temperature: float = field(default=0.8, metadata={"help": "sampling temperature of candidates after the first",
                                                      "min": 0})

    def __post_init__(self):
        check_fields(self)


@lru_cache(maxsize=1)
def prompt_options() -> dict[str, str]:
    """{prompt name: prompt.yaml text}: the shipped variants, then ``seed:<name>`` for each seed's own prompt and
    each small-model harness's (``seed:small_model/explorer``), so their designs read back as plans (Stage I's
    teacher evidence) and a plan can name their prompts."""
    out = dict(prompt_variants())
    seeds = set(seed_names())
    for name in (*seed_names(), *small_model_names()):
        try:
            files = read_files(seed_bank_dir() / name)
        except (HarnessError, OSError):  # an incomplete seed offers no prompt; the bank reports it
            continue
        text = files.get("prompt.yaml")
        # a small-model harness whose prompt is one already offered (realised_react's is ReAct's) adds no name
        known = out.values() if name in seeds else {own_prompt(t) for t in out.values()}
        if text and (text if name in seeds else own_prompt(text)) not in known \
                and not describe_files(files).get("baseline"):
            out[f"seed:{name}"] = text
    return out


def plan_text(plan: dict) -> str:
    """The canonical one-line JSON of a plan (keys in M, P, F, A, hooks, prompt, params order; params only when set,
    hooks only when not ``none``)."""
    ordered = {k: plan[k] for k in PLAN_KEYS if k in plan and (k != "params" or plan[k])
               and (k != "hooks" or plan[k] != NO_HOOKS)}
    if "params" in ordered:
        ordered["params"] = {r: dict(sorted(p.items())) for r, p in sorted(ordered["params"].items()) if p}
    return json.dumps(ordered, ensure_ascii=False)


def plan_of(files: dict[str, str]) -> dict | None:
    """The plan a harness's files express, or None when a role is a file of its own (not a library module) or its
    prompt is neither a variant nor a seed's."""
    choices = choices_of(files)
    plan: dict = {}
    params = {}
    for role in ROLES:
        c = choices[role]
        if c.kind != "library":
            return None
        plan[role] = option(c.path, role).cls
        if c.params:
            params[role] = dict(c.params)
    hooks = choices["H"]
    if hooks.kind != "library":
        return None
    if hooks.path != NO_HOOKS:
        plan["hooks"] = option(hooks.path, "H").cls
        if hooks.params:
            params["H"] = dict(hooks.params)
    text = own_prompt(choices["prompt"].text)
    name = next((n for n, t in prompt_options().items() if own_prompt(t) == text), None)
    if name is None:
        return None
    plan["prompt"] = name
    if params:
        plan["params"] = params
    return plan


def parse_plan(reply: str) -> dict:
    """The first JSON object in ``reply`` (code fences and text around it are ignored); PlanError if none."""
    decoder = json.JSONDecoder()
    start = reply.find("{")
    error = "the reply holds no JSON object"
    while start != -1:
        try:
            obj, _ = decoder.raw_decode(reply, start)
        except json.JSONDecodeError as exc:
            error = f"the reply's JSON does not parse ({exc.msg} at character {exc.pos})"
        else:
            if isinstance(obj, dict):
                return obj
        start = reply.find("{", start + 1)
    raise PlanError(f"{error}; reply with one JSON object such as "
                    '{"M": "FullHistory", "P": "NoPlanner", "F": "FullRegistry", "A": "ReActAction", "prompt": "react"}')


def _param_ok(value, default) -> bool:
    if isinstance(default, tuple):   # a JSON list of strings (plan_text writes a tuple as one)
        return isinstance(value, (list, tuple)) and all(isinstance(x, str) for x in value)
    if isinstance(default, bool) or isinstance(value, bool):
        return isinstance(value, bool) and isinstance(default, bool)
    if isinstance(default, float):
        return isinstance(value, (int, float))
    return type(value) is type(default)


def check_plan(plan: dict, task: dict | None = None) -> dict[str, Choice]:
    """The choices a plan stands for; PlanError naming the first problem (unknown key, module, parameter, prompt,
    a parameter of the wrong type, or a broken coupling) or, given the ``task`` (its public dict), the options that do
    not fit it (``library.misfits``: a module needing a tool the task does not give)."""
    if not isinstance(plan, dict):
        raise PlanError(f"a plan is a JSON object, got {type(plan).__name__}")
    unknown = sorted(set(plan) - set(PLAN_KEYS))
    if unknown:
        raise PlanError(f"unknown plan key(s) {', '.join(unknown)}; keys are {', '.join(PLAN_KEYS)}")
    params = plan.get("params") or {}
    if not isinstance(params, dict) or any(not isinstance(v, dict) for v in params.values()):
        raise PlanError('"params" must map a role to {parameter: value}, e.g. {"M": {"max_chars": 4000}}')
    choices: dict[str, Choice] = {}
    for role in (*ROLES, "H"):
        name = plan.get("hooks", NO_HOOKS) if role == "H" else plan.get(role)
        names = [o.cls for o in catalogue()[role]]
        if not isinstance(name, str) or name not in names:
            raise PlanError(f"{'hooks' if role == 'H' else role} must be one of {', '.join(names)}, got {name!r}")
        opt = option(name, role)
        given = params.get(role, {})
        defaults = opt.defaults()
        for key, value in given.items():
            if key not in defaults:
                raise PlanError(f"{name} has no parameter {key!r}; it has {', '.join(defaults) or 'none'}")
            if not _param_ok(value, defaults[key]):
                kind = "a list of strings" if isinstance(defaults[key], tuple) else type(defaults[key]).__name__
                raise PlanError(f"{name}.{key} must be {kind}, got {value!r}")
        given = {k: tuple(v) if isinstance(defaults[k], tuple) else v for k, v in given.items()}
        choices[role] = Choice(role, "library", opt.path, given, label=opt.label, source="plan")
    extra = sorted(set(params) - {*ROLES, "H"})
    if extra:
        raise PlanError(f"params for unknown role(s) {', '.join(extra)}; roles are {', '.join(ROLES)}, H (hooks)")
    for role, c in choices.items():
        for other, need in requirements().get(c.path, {}).items():
            if choices[other].path != need:
                raise PlanError(f"{choices[role].path.split(':')[-1]} ({role}) only works with {need.split(':')[1]} "
                                f"as {other}, got {choices[other].path.split(':')[-1]}")
    prompts = prompt_options()
    if plan.get("prompt") not in prompts:
        raise PlanError(f"prompt must be one of {', '.join(prompts)}, got {plan.get('prompt')!r}")
    name = plan["prompt"]
    choices["prompt"] = Choice("prompt", "variant", text=prompts[name], label=f"prompt {name}", source=f"prompt:{name}")
    problems = misfits(choices, task) if task is not None else {}
    if problems:
        raise PlanError(f"the plan does not fit this task: {misfit_message(problems)}")
    return choices


def with_called_for(plan: dict, task: dict) -> tuple[dict, list[dict]]:
    """``plan`` with each option ``task`` calls for (``library.called_for``) in its role, and that option's partners
    (``FITS``) in theirs where the plan's choice is none of them, as compose does on every path; the parameters of a
    role that changed are dropped. Returns the plan and the changes, each ``{role, option, now, why}``. A plan that
    is not a mapping of roles, or a task that calls for nothing (every task whose text uses no such word), comes back
    unchanged."""
    if not isinstance(plan, dict) or not isinstance(plan.get("params", {}), dict):
        return plan, []
    given, plan, changes = plan, {**plan, "params": dict(plan.get("params") or {})}, []

    def put(role: str, cls: str, why: str):
        key = "hooks" if role == "H" else role
        changes.append({"role": role, "option": plan.get(key), "now": cls, "why": why})
        plan[key] = cls
        plan["params"].pop(role, None)

    for role, path in called_for(task).items():
        cls = path.rpartition(":")[2]
        if plan.get("hooks" if role == "H" else role) == cls:
            continue
        put(role, cls, f"the task calls for {cls} (library.called_for)")
        for other, partners in FITS[path].partners.items():
            names = [p.rpartition(":")[2] for p in partners]
            if plan.get("hooks" if other == "H" else other) not in names:
                put(other, names[0], f"{names[0]} is a partner of {cls}")
    if not changes:
        return given, []
    if not plan["params"]:
        del plan["params"]
    return plan, changes


def plan_files(plan: dict, generator: str = "plan", name: str | None = None, task: dict | None = None) -> dict[str, str]:
    """The five harness files of a plan (PlanError if it does not check out, or, given ``task``, does not fit it)."""
    choices = check_plan(plan, task)
    ident = hashlib.sha256(plan_text(plan).encode()).hexdigest()[:10]
    return render_files(choices, name=name or f"plan-{ident}", lineage={"generator": generator, "plan": plan_text(plan)})


def plan_messages(task: dict, references: list[Reference]) -> list[dict]:
    """The plan prompt (one user message): task, the options per role by name, their couplings (which options only
    work together, which need tools or prefer partners: :func:`jitlab.jit.generate.library.couplings`) and the
    references' plans. An option the task leaves unlisted (``library.unlisted``: one with ``needs`` that does not fit
    it) is in neither."""
    refs = []
    for r in references:
        plan = plan_of(r.files)
        if plan is not None:
            refs.append({"name": r.name, "plan": plan_text(plan), "reward": r.mean_reward if r.evaluated else None})
    hide = frozenset(o.path for options in catalogue().values() for o in options if unlisted(o.path, task))
    options = {role: [o.cls for o in catalogue()[role] if o.path not in hide] for role in (*ROLES, "H")}
    return [{"role": "user", "content": render("plan_user.j2", task=task, options=options, couplings=couplings(hide),
                                               prompts=list(prompt_options()), references=refs)}]


class PlanGenerator:
    """See the module docstring. ``name`` is ``plan:<backbone>``."""

    def __init__(self, name: str, llm=None, config: PlanConfig | None = None):
        self.name, self.llm, self.config = name, llm, config or PlanConfig()

    def messages(self, task: dict, references: list[Reference]) -> list[dict]:
        return plan_messages(task, references)

    def generate(self, task: dict, references: list[Reference], llm=None, index: int = 0) -> Candidate:
        llm = llm or self.llm
        messages = self.messages(task, references)
        params = {"max_new_tokens": self.config.max_new_tokens, **sampling(task, index, self.config.temperature)}
        reply = llm.chat(messages, **params).text
        nearest = first_fitting(references, task)
        forced: list[dict] = []
        try:
            plan, forced = with_called_for(parse_plan(reply), task)
            files = plan_files(plan, self.name, task=task)
        except PlanError as exc:
            files = dict(nearest.files) if nearest else plan_files(_BASIC_PLAN, self.name)
            meta = {"strategy": "plan", "parsed_files": [], "parse_error": str(exc), "reply": reply,
                    "fallback_from": nearest.sha if nearest else None}
        else:
            meta = {"strategy": "plan", "plan": plan, "parsed_files": sorted(files), "reply": reply}
        if forced:
            meta["refused"] = forced
        return Candidate(files, self.name, index, [r.sha for r in references], prompt_hash(messages), None, meta)

    def repair(self, candidate: Candidate, diagnostic: dict, task: dict, llm=None, round: int = 1) -> Candidate:
        llm = llm or self.llm
        before = candidate.meta.get("plan")
        shown = plan_text(before) if before else str(candidate.meta.get("reply", ""))[:600]
        messages = self.messages(task, []) + [
            {"role": "assistant", "content": shown},
            {"role": "user", "content": render("plan_repair.j2", diagnostic=diagnostic)}]
        reply = llm.chat(messages, max_new_tokens=self.config.repair_max_new_tokens).text
        meta = {k: v for k, v in candidate.meta.items() if k not in ("reply", "parse_error")}
        meta.update(repair_round=round, reply=reply)
        try:
            plan, forced = with_called_for(parse_plan(reply), task)
            files = plan_files(plan, self.name, task=task)
        except PlanError as exc:
            # still no plan: the files stay as they were and the next check reports the parse_error again
            meta.update(parsed_files=[], repair_parsed_files=[], parse_error=str(exc))
            files = candidate.files
        else:
            meta.update(plan=plan, repair_parsed_files=sorted(files))
            if forced:
                meta["refused"] = forced
        return Candidate(files, self.name, candidate.index, list(candidate.parents), prompt_hash(messages), None, meta)


_BASIC_PLAN = {"M": "FullHistory", "P": "NoPlanner", "F": "FullRegistry", "A": "ReActAction", "prompt": "react"}


def make_generator(name: str, backbone_handle=None, **config) -> PlanGenerator:
    """The registry's factory (``GENERATORS`` in jitlab/jit/generate/base.py): ``plan:<backbone>`` with its config fields."""
    return PlanGenerator(name, backbone_handle, PlanConfig(**config))
