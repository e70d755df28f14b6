"""The episode loop (kernel): budgets, step/turn limits, the brokered backbone handle.

    reset -> on_init -> repeat { memory.update -> view -> plan -> select capabilities ->
    pre_decision -> act -> pre_action -> env.step -> post_feedback } until done or a budget ends

``HarnessAgent`` runs the four modules and hooks; it is the part that may live in a sandboxed
child (jitlab.sandbox drives the same class over RPC). ``run_episode`` is the trusted side: it
owns the environment, the scorer, the budget and the records, including each step's compliance
record (jitlab/compliance.py: parsed, admissible, changed by realisation or a hook).
"""
from __future__ import annotations

import threading
import time
import traceback
from dataclasses import asdict, dataclass, field

from jitlab.compliance import step_record
from jitlab.errors import BudgetExceeded, ConfigError, HarnessError, InfraError
from jitlab.fields import check_fields
from jitlab.llm.cache import cache_id, cache_key
from jitlab.protocol import (
    SLOTS,
    Agent,
    Completion,
    Context,
    Ctx,
    Decision,
    Event,
    Observation,
)
from jitlab.status import Status
from jitlab.timing import EpisodeTime

__all__ = ["EPISODE_MAX_TOKENS", "EPISODE_MAX_WALL_S", "WALL_CAP", "Budget", "EpisodeResult", "HarnessAgent", "LLMHandle",
           "RunSpend", "SpendCapReached", "WallClock", "resume_hint", "run_episode"]


# The default budget of one episode, written once: Budget, RunConfig, JITConfig and the CLI read these.
EPISODE_MAX_TOKENS = 60_000
EPISODE_MAX_WALL_S = 900.0


@dataclass
class Budget:
    """Limits of one episode. ``max_steps=None`` uses the task's own ``max_steps``."""
    max_steps: int | None = field(default=None, metadata={"help": "step cap (None: the task's)", "min": 1})
    max_tokens: int = field(default=EPISODE_MAX_TOKENS, metadata={"help": "backbone tokens of the episode", "min": 1})
    max_wall_s: float = field(default=EPISODE_MAX_WALL_S, metadata={"help": "wall seconds of the episode, not counting "
                                                                       "time its backbone calls waited for a shared "
                                                                       "model (queue_s)", "min_exclusive": 0})

    def __post_init__(self):
        check_fields(self)  # 0 steps would silently mean "the task's own"; nan would disable the wall limit

    @classmethod
    def unlimited(cls) -> Budget:
        """No practical token cap, for a handle outside an episode (an engineer writing patches)."""
        return cls(max_tokens=10 ** 9)


class SpendCapReached(BudgetExceeded):
    """A cap of the whole run or command is reached -- a spend cap (``max_cost`` / ``max_tokens_total``) or the wall
    cap (``max_wall_total_s``): no new backbone call, no new episode. Episodes it stops are recorded as ``spend_cap``
    (neither final nor a harness failure), so a rerun (with a higher spend cap, when one stopped it) runs them again."""


WALL_CAP = "wall cap reached"  # how RunSpend.reached() starts its reason for the wall cap


def resume_hint(reason: str) -> str:
    """How a run stopped for ``reason`` (RunSpend.reached()) resumes, said after it (runner, JIT loop)."""
    if reason.startswith(WALL_CAP):
        return "Nothing is lost: rerun to resume (--max-wall-total-s counts each invocation afresh)."
    return "Nothing is lost: rerun with a higher --max-cost / --max-tokens-total to resume."


class RunSpend:
    """A run's real backbone spend (calls that reached the backbone; replay-cache hits cost nothing)
    against its caps, and the wall clock of this invocation against ``max_wall_total_s`` (counted from when the
    object is made, or from ``started``, a ``clock()`` reading; ``clock``: time.monotonic unless injected).
    Seeded from the run's records on resume, updated by every LLMHandle call it is given; thread-safe. One
    object may be shared by several runs (a grid's or a command's total cap)."""

    def __init__(self, max_cost: float | None = None, max_tokens_total: int | None = None, cost: float = 0.0,
                 tokens: int = 0, max_wall_total_s: float | None = None, clock=time.monotonic,
                 started: float | None = None):
        self.max_cost, self.max_tokens_total = max_cost, max_tokens_total
        self.max_wall_total_s, self.clock = max_wall_total_s, clock
        self.started = clock() if started is None else started
        self.cost, self.tokens = float(cost), int(tokens)
        self.stopped = ""  # the reason, once a call or an episode was refused
        self._lock = threading.Lock()

    def add(self, cost: float, tokens: int) -> None:
        with self._lock:
            self.cost += cost
            self.tokens += tokens

    def elapsed(self) -> float:
        """Wall seconds of this invocation so far (what ``max_wall_total_s`` caps)."""
        return self.clock() - self.started

    def reached(self) -> str:
        """Why no new call may start ('' while under every cap): one line naming the option."""
        with self._lock:
            if self.max_cost is not None and self.cost >= self.max_cost:
                return f"spend cap reached: ${self.cost:.6f} spent of --max-cost {self.max_cost:g}"
            if self.max_tokens_total is not None and self.tokens >= self.max_tokens_total:
                return f"spend cap reached: {self.tokens} tokens spent of --max-tokens-total {self.max_tokens_total}"
        if self.max_wall_total_s is not None and (wall := self.elapsed()) >= self.max_wall_total_s:
            return (f"{WALL_CAP}: {wall:.2f}s of --max-wall-total-s {self.max_wall_total_s:g} "
                    "(this invocation)")
        return ""

    def check(self) -> None:
        """Raise SpendCapReached (and remember why) when a cap is reached."""
        reason = self.reached()
        if reason:
            self.stopped = reason
            raise SpendCapReached(reason)


class LLMHandle:
    """What modules get as ``ctx.llm``: forwards to the backbone, counts tokens, enforces the
    token budget and the run's spend cap (``spend``), consults the replay cache and reports every
    call to ``on_call``. ``queue_s`` sums the time its calls waited for a shared model (as the backbone
    reports it in ``Completion.queue_s``): the episode's wall budget does not count it. With ``sample_seed``
    (a sampling backbone, jitlab/repeats.py) every chat call without its own ``seed`` is sampled with the
    episode seed, so the repeats of a task differ and each is reproducible."""

    def __init__(self, backbone, budget: Budget | None = None, cache=None, on_call=None, seed: int = 0,
                 phase: str = "execute", spend: RunSpend | None = None, sample_seed: bool = False):
        self.backbone, self.budget, self.cache, self.on_call = backbone, budget or Budget(), cache, on_call
        self.seed, self.phase, self.step, self.spend = seed, phase, 0, spend
        self.sample_seed = sample_seed
        self.prompt_tokens = self.completion_tokens = self.calls = 0
        self.chat_calls = self.score_calls = 0  # attempted calls by kind: what a step's compliance record counts
        self.cost = self.queue_s = 0.0
        self.latency_s = self.compute_s = 0.0  # calls that reached the backbone: their whole time and its compute
        self.spend_stopped = False  # set when the spend cap refused a call (a harness may swallow the error)
        self._lock = threading.Lock()

    def _check_spend(self) -> None:
        if self.spend is not None:
            try:
                self.spend.check()
            except SpendCapReached:
                self.spend_stopped = True
                raise

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def chat(self, messages: list[dict], **params) -> Completion:
        if self.tokens >= self.budget.max_tokens:
            raise BudgetExceeded(f"token budget {self.budget.max_tokens} spent")
        self.chat_calls += 1
        messages = [{"role": str(m["role"]), "content": str(m["content"])} for m in messages]
        key = cache_key(cache_id(self.backbone), messages, params, self.seed)
        completion = self.cache.get(key) if self.cache else None
        if completion is None:
            self._check_spend()  # a cache hit costs nothing: only a call that reaches the backbone is capped
            sent = {"seed": self.seed, **params} if self.sample_seed else params  # the key holds the seed already
            completion = self.backbone.chat(messages, **sent)
            if self.cache:
                self.cache.put(key, completion)
        self._account(completion, key, messages, params)
        return completion

    def score(self, messages: list[dict], candidates: list[str]) -> list[float]:
        """One batched likelihood pass (the backbone's ``score``), accounted like a chat call: its prompt tokens are
        the prompt's plus the candidates' tokens as the backbone's tokenizer counts them (``last_score_timing``'s
        ``prompt_tokens``, also for a replay-cache hit, which keeps them), with the prompt tokens its prefix cache
        reused. A backbone that reports no count (no tokenizer: the scripted doubles, litellm) is estimated in
        words, and its call records ``reused_tokens`` NULL: a word count is not comparable to reused tokens."""
        scorer = getattr(self.backbone, "score", None)
        if scorer is None:
            raise NotImplementedError(f"backbone {self.backbone.id} has no score()")
        self.score_calls += 1
        key = cache_key(cache_id(self.backbone), messages, {"score": candidates}, self.seed)
        cached = self.cache.get(key, kind="score") if self.cache else None
        if cached is None:
            self._check_spend()
        start, timing = time.perf_counter(), {}
        if cached is not None:  # a list: an entry written before token counts were kept
            scores, timing = (cached, {}) if isinstance(cached, list) else (cached["scores"], cached["timing"])
        else:
            scores = [float(s) for s in scorer(messages, list(candidates))]
            if callable(getattr(self.backbone, "last_score_timing", None)):
                timing = self.backbone.last_score_timing()
        latency = time.perf_counter() - start
        if cached is None and self.cache:
            counted = {k: timing[k] for k in ("prompt_tokens", "reused", "compute_s") if k in timing}
            self.cache.put(key, {"scores": scores, "timing": counted} if "prompt_tokens" in counted else scores,
                           kind="score")
        counted = "prompt_tokens" in timing
        tokens = int(timing["prompt_tokens"]) if counted else \
            sum(len(c.split()) for c in candidates) + sum(len(m["content"].split()) for m in messages)
        price = getattr(self.backbone, "price", None)  # priced like any prompt tokens of this backbone
        self._account(Completion(text="", prompt_tokens=tokens, cost=price.cost(tokens, 0) if price else 0.0,
                                 cached=cached is not None, latency_s=0.0 if cached is not None else latency,
                                 queue_s=0.0 if cached is not None else timing.get("queue_s", 0.0),
                                 compute_s=timing.get("compute_s"),
                                 reused_tokens=int(timing.get("reused", 0)) if counted else None),
                      key, messages, {"score": len(candidates)}, kind="score")
        return scores

    def _account(self, completion: Completion, key: str, messages, params, kind: str = "chat") -> None:
        with self._lock:
            self.prompt_tokens += completion.prompt_tokens
            self.completion_tokens += completion.completion_tokens
            self.cost += completion.cost
            self.calls += 1
            if not completion.cached:  # a replay-cache hit carries its original call's timings, not waited now
                self.queue_s += completion.queue_s
                self.latency_s += completion.latency_s
                self.compute_s += (completion.compute_s if completion.compute_s is not None
                                   else max(0.0, completion.latency_s - completion.queue_s))
        if self.spend is not None and not completion.cached:
            self.spend.add(completion.cost, completion.prompt_tokens + completion.completion_tokens)
        if self.on_call:
            self.on_call({"step": self.step, "phase": self.phase, "kind": kind, "key": key,
                          "backbone": self.backbone.id, "prompt_tokens": completion.prompt_tokens,
                          "completion_tokens": completion.completion_tokens, "cost": completion.cost,
                          "latency_s": completion.latency_s, "cached": completion.cached,
                          "queue_s": completion.queue_s, "reused_tokens": completion.reused_tokens,
                          "compute_s": completion.compute_s if completion.compute_s is not None
                          else max(0.0, completion.latency_s - completion.queue_s),
                          "messages": messages, "params": params, "text": completion.text})


class HarnessAgent(Agent):
    """Runs a loaded harness's four modules and hooks for one episode (an :class:`jitlab.protocol.Agent`)."""

    def __init__(self, harness, llm):
        self.harness, self.llm = harness, llm
        self.modules = harness.build()
        self.ctx: Ctx | None = None
        self.capabilities = []

    def _each(self, method: str, keyed: bool = False):
        """Each module's ``method`` that it defines (with ``keyed``: as (module key, method))."""
        for key, module in self.modules.items():
            fn = getattr(module, method, None)
            if callable(fn):
                yield (key, fn) if keyed else fn

    def begin(self, task, obs: Observation) -> None:
        self.ctx = Ctx(llm=self.llm, task=task, prompts=self.harness.prompts)
        self.capabilities = list(task.tools)
        for fn in self._each("reset"):
            fn(self.ctx)
        for fn in self._each("on_init"):
            fn(self.ctx, obs)
        self._remember(Event("observation", obs.text, 0, {"candidates": obs.candidates}))
        self.last_obs = obs

    def _remember(self, event: Event) -> None:
        self.modules["memory"].update(event, self.ctx)

    def decide(self, step: int) -> Decision:
        ctx, mods = self.ctx, self.modules
        ctx.step = step
        view = mods["memory"].view(ctx)
        directive = mods["planner"].plan(view, ctx)
        caps = mods["policy"].select(directive, view, self.capabilities, ctx)
        context = Context(task=ctx.task, view=view, directive=directive, capabilities=list(caps),
                          observation=self.last_obs, step=step)
        for fn in self._each("pre_decision"):
            context.hints.extend(fn(ctx, context) or [])
        decision = mods["action"].act(context, ctx)
        if not isinstance(decision, Decision):
            raise HarnessError(f"Action.act returned {type(decision).__name__}, expected Decision",
                               file="action.py", kind="interface_mismatch")
        for key, fn in self._each("pre_action", keyed=True):
            before = _call(decision)
            changed = fn(ctx, context, decision)
            if changed is not None and not isinstance(changed, Decision):   # the hook's file is to blame, not act's
                raise HarnessError(f"{type(getattr(fn, '__self__', fn)).__name__}.pre_action returned "
                                   f"{type(changed).__name__}, expected a Decision or None", file=_FILE[key],
                                   kind="interface_mismatch")
            decision = changed or decision
            if _call(decision) != before:  # a hook overrode the decision
                rule, name = decision.data.get("hook"), type(getattr(fn, "__self__", fn)).__name__
                decision.data.update(hooked=True, decided_by="mechanism", mechanism=f"{name}:{rule}" if rule else name)
        decision.data.setdefault("trace", {"view_chars": len(view.text), "directive": directive.text,
                                           "capabilities": [c.name for c in caps], "hints": context.hints,
                                           **({"hook": decision.data["hook"]} if "hook" in decision.data else {})})
        return decision

    def observe(self, decision: Decision, obs: Observation, step: int) -> None:
        self._remember(Event("action", _render(decision), step, {"tool": decision.tool, "args": decision.args,
                                                               "thought": decision.thought}))
        self.last_obs = obs
        for fn in self._each("post_feedback"):
            fn(self.ctx, decision, obs)
        self._remember(Event("observation", obs.text, step, {"candidates": obs.candidates, "reward": obs.reward}))


_FILE = {s.key: s.file for s in SLOTS.values()}   # module key -> the harness file that defines it


def _call(decision) -> str:
    """A decision's tool call, comparable before and after a hook (anything else: its repr)."""
    if not isinstance(decision, Decision):
        return repr(decision)
    return f"{decision.tool}:{sorted((str(k), str(v)) for k, v in dict(decision.args).items())}"


def _render(decision: Decision) -> str:
    if set(decision.args) == {"command"}:
        return str(decision.args["command"])
    return f"{decision.tool}({', '.join(f'{k}={v!r}' for k, v in decision.args.items())})"


@dataclass
class EpisodeResult:
    status: str                    # a jitlab.store.Status value (never running or interrupted here)
    success: bool = False
    reward: float = 0.0
    steps: int = 0
    tool_calls: int = 0
    wall_s: float = 0.0
    error: str = ""
    diagnostic: dict = field(default_factory=dict)
    time: dict = field(default_factory=dict)   # where wall_s went (EpisodeTime.as_dict): stored in the episode's extra

    def as_dict(self) -> dict:
        return asdict(self)


def _env_call(fn, *args, timer=None, **kwargs):
    """Call into the (trusted) environment; its crashes are infrastructure errors, not the harness's. ``timer``
    (an EpisodeTime) adds the call's time to ``env_s``."""
    start = time.perf_counter()
    try:
        return fn(*args, **kwargs)
    except Exception as exc:
        raise InfraError(f"environment {getattr(fn, '__qualname__', fn)} failed: {type(exc).__name__}: {exc}") from exc
    finally:
        if timer is not None:
            timer.env_s += time.perf_counter() - start


class WallClock:
    """The episode's wall budget as the episode loop counts it: the harness's own time plus its calls' compute,
    since the episode started; time its calls waited for a shared model (``llm.queue_s``) is not its cost.
    ``run_episode`` checks it between steps; an agent that can stop its own code mid-step (``SandboxedAgent``)
    gets it through ``limit_wall(clock)`` and bounds each request by ``left()``."""

    def __init__(self, max_wall_s: float, llm):
        self.max_wall_s, self.llm, self.start = max_wall_s, llm, time.perf_counter()

    def left(self) -> float:
        """Seconds of the budget left (negative once it is spent)."""
        return self.max_wall_s - (time.perf_counter() - self.start - getattr(self.llm, "queue_s", 0.0))

    def exceeded(self) -> BudgetExceeded:
        return BudgetExceeded(f"wall budget {self.max_wall_s}s spent (not counting "
                              f"{getattr(self.llm, 'queue_s', 0.0):.1f}s queued for the backbone)")


def run_episode(env, agent, llm: LLMHandle, budget: Budget, seed: int = 0, on_step=None) -> EpisodeResult:
    """Run one episode. ``agent`` has begin/decide/observe (a HarnessAgent or a sandbox proxy).
    ``on_step(dict)`` receives every step's record. Harness exceptions end the episode with
    ``harness_error``; InfraError propagates as ``infra_error`` so the runner retries it."""
    clock = WallClock(budget.max_wall_s, llm)
    start = clock.start
    timer = EpisodeTime(agent, llm)
    max_steps = budget.max_steps or env.spec.max_steps
    result = EpisodeResult(status=Status.OK)
    step = 0
    if hasattr(agent, "limit_wall"):  # it can stop a request that outlives the budget (a hung act() or import)
        agent.limit_wall(clock)
    try:
        obs = _env_call(env.reset, seed=seed, timer=timer)
        # the harness sees the budget it has: a lower --max-steps in the task's max_steps and budget sentence
        timer.agent_call(agent.begin, env.spec.with_max_steps(budget.max_steps) if hasattr(env.spec, "with_max_steps")
                         else env.spec, obs)
        while not obs.done and step < max_steps:
            if getattr(llm, "spend_stopped", False):
                break  # the run's spend cap refused a call and the harness carried on: stop here
            if clock.left() < 0:
                raise clock.exceeded()
            step += 1
            llm.step = step
            tokens_before = llm.tokens
            calls_before = getattr(llm, "chat_calls", 0), getattr(llm, "score_calls", 0)
            decision = timer.agent_call(agent.decide, step)
            compliance = step_record(decision, obs, env.spec, getattr(llm, "chat_calls", 0) - calls_before[0],
                                     getattr(llm, "score_calls", 0) - calls_before[1])
            obs = _env_call(env.step, decision.tool, dict(decision.args), timer=timer)
            result.tool_calls += 1
            timer.agent_call(agent.observe, decision, obs, step)
            if on_step:
                on_step({"step": step, "tool": decision.tool, "args": decision.args, "thought": decision.thought,
                         "observation": obs.text, "reward": obs.reward, "done": obs.done,
                         "tokens": llm.tokens - tokens_before, "trace": decision.data.get("trace", {}),
                         "compliance": compliance})
    except BudgetExceeded as exc:
        result.status, result.error = Status.BUDGET, str(exc)
    except InfraError as exc:
        result.status, result.error = Status.INFRA_ERROR, str(exc)
    except ConfigError:
        raise  # a missing model package or bad option is the user's to fix, not the harness's failure
    except HarnessError as exc:
        result.status, result.error = Status.HARNESS_ERROR, str(exc)
        full = getattr(exc, "diagnostic", None)  # the sandbox attaches line, traceback and phase
        result.diagnostic = full.as_dict() if full is not None else {"kind": exc.kind, "file": exc.file,
                                                                      "message": str(exc)}
    except Exception as exc:  # harness code is arbitrary: any exception is its failure
        result.status, result.error = Status.HARNESS_ERROR, f"{type(exc).__name__}: {exc}"
        result.diagnostic = {"kind": "runtime_error", "message": str(exc),
                             "traceback": "".join(traceback.format_exc(limit=-6))}
    if getattr(llm, "spend_stopped", False) and result.status != Status.INFRA_ERROR:
        # the run's spend cap cut this episode short (even if the harness swallowed the error): not its result
        result.status = Status.SPEND_CAP
        result.error = getattr(llm.spend, "stopped", "") or result.error
        result.diagnostic = {}
    if result.status not in (Status.INFRA_ERROR, Status.SPEND_CAP):
        try:  # the scorer is the environment's too: its crash is an infrastructure error, retried
            score = _env_call(env.score, timer=timer)
        except InfraError as exc:
            score, result.status, result.error, result.diagnostic = None, Status.INFRA_ERROR, str(exc), {}
        if score is not None:
            result.success, result.reward = bool(score.success), float(score.reward)
    result.steps, result.wall_s = step, time.perf_counter() - start
    result.time = timer.as_dict(result.wall_s)
    return result
