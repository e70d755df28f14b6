"""Stage III (Evo-GDPO) core: decoupled, gated reward channels for TRL's ``GRPOTrainer``.

    rewards = ChannelRewards(evaluate, incumbent)          # evaluate(completions, rows) -> [Outcome]; incumbent(row)
    args = GRPOConfig(..., **grpo_aggregation())           # normalize_then_sum with CHANNEL_WEIGHTS
    GRPOTrainer(model, reward_funcs=rewards.functions(), args=args, ...)

Each candidate (a completion) is evaluated once (``evaluate``; the reward functions share the result) and compared with
its family's incumbent (``incumbent``) on the same task and seed. Channels (``channels``):

    valid          1 if the candidate parsed and validated, else 0                         always
    task_delta     R(cand) - R(inc), R = mean task reward over the eval episodes (invalid: 0 - R(inc))   always
    latency_gain   log(lat_inc / lat_cand), lat = a deterministic proxy (backbone calls or decoded tokens per
                   task, not wall seconds, which are noise on a shared machine); |x| < dead_band -> 0        gate only
    cost_gain      log(cost_inc / cost_cand), same dead-band                                  gate only

The gate is valid and R(cand) >= R(inc): the efficiency channels return ``None`` for a candidate that loses on
reward. TRL turns ``None`` into NaN, and with ``multi_objective_aggregation="normalize_then_sum"`` it z-scores each
channel within the group over the rows where it applies (nanmean/nanstd), sums the z-scores with ``reward_weights``
(NaN counts 0) and z-scores the sum over the batch: so a candidate that loses on reward gets no credit for being cheap,
and a channel's scale does not matter (the GDPO decoupled normalisation). The advantages are TRL's own; this module
only computes the channel values. Caveat (argued in the design notes): z-scores do not make reward lexicographically
first; efficiency weights <= 0.25 keep a gated-in but costly candidate from falling below a gated-out one in practice.
``log(.)`` uses ``(x + 1)`` on both sides, so zero tokens or zero cost stay finite.

Signal (``signal_share``): a group whose rewards are all equal (on every channel, over the rows where it applies) gets
advantage 0 for every member and teaches nothing. The share of groups with non-zero advantage is what says whether a
GRPO run had anything to learn; TRL's ``frac_reward_zero_std`` does not say it under ``normalize_then_sum``, where it
is computed over the whole batch. Stage III and the engineer's GRPO log it per step (``nonzero_advantage_share``) and
report it in their manifests.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = ["CHANNELS", "CHANNEL_WEIGHTS", "ChannelRewards", "Outcome", "channels", "grpo_aggregation",
           "signal_share"]

CHANNELS = ("valid", "task_delta", "latency_gain", "cost_gain")
CHANNEL_WEIGHTS = (0.25, 1.0, 0.25, 0.25)


@dataclass
class Outcome:
    """A candidate's (or the incumbent's) evaluation on one task: mean reward, latency proxy and cost per episode."""
    valid: bool
    reward: float = 0.0
    latency: float = 0.0      # deterministic proxy: backbone calls or decoded tokens per task
    cost: float = 0.0
    meta: dict | None = None  # what the evaluator wants logged (sha, diagnostic kind, cache hit, ...)


def _gain(cand: float, inc: float, dead_band: float) -> float:
    x = math.log((inc + 1.0) / (cand + 1.0))
    return 0.0 if abs(x) < dead_band else x


def channels(cand: Outcome, inc: Outcome, dead_band: float = 0.05) -> dict[str, float | None]:
    """The four channel values of ``cand`` against ``inc`` (see the module docstring); None = channel gated off."""
    reward = cand.reward if cand.valid else 0.0
    gate = cand.valid and reward >= inc.reward
    return {"valid": 1.0 if cand.valid else 0.0, "task_delta": reward - inc.reward,
            "latency_gain": _gain(cand.latency, inc.latency, dead_band) if gate else None,
            "cost_gain": _gain(cand.cost, inc.cost, dead_band) if gate else None}


def _varies(values) -> bool:
    present = {round(float(v), 9) for v in values if v is not None and not math.isnan(float(v))}
    return len(present) > 1


def signal_share(rewards: list, group_size: int) -> dict:
    """``{groups, nonzero, share}``: of the GRPO groups in ``rewards`` (one per completion, in sampling order, cut into
    consecutive groups of ``group_size``, TRL's layout; each a number or a dict of channel values, None = gated off),
    how many have a non-zero advantage: some reward, or some channel, differs between two members where it applies.
    ``share`` is None when there is no complete group."""
    groups = [rewards[i:i + group_size] for i in range(0, len(rewards) - group_size + 1, group_size)]
    nonzero = 0
    for group in groups:
        if group and isinstance(group[0], dict):
            nonzero += any(_varies([r.get(k) for r in group]) for k in group[0])
        else:
            nonzero += _varies(group)
    return {"groups": len(groups), "nonzero": nonzero, "share": nonzero / len(groups) if groups else None}


def grpo_aggregation(weights=CHANNEL_WEIGHTS) -> dict:
    """The GRPOConfig fields that make TRL's advantage the gated, decoupled Evo-GDPO one."""
    return {"multi_objective_aggregation": "normalize_then_sum", "reward_weights": list(weights)}


class ChannelRewards:
    """The reward functions of the channels for GRPOTrainer, sharing one evaluation per batch.

    ``evaluate(prompts, completions, rows) -> [Outcome]`` (``rows``: one dict per completion of the dataset's extra
    columns, e.g. task_id), ``incumbent(row) -> Outcome``. ``records`` keeps one dict per scored completion (channels,
    gate, outcome, incumbent), what stage3 writes to completions.jsonl; ``on_batch(records)`` is called once per batch.
    ``gate_rate``, ``valid_rate`` and (given ``group_size``, the G of the trainer) ``nonzero_advantage_share`` go to
    the step's logs through TRL's ``log_metric``.
    """

    def __init__(self, evaluate, incumbent, dead_band: float = 0.05, on_batch=None, group_size: int | None = None):
        self.evaluate, self.incumbent, self.dead_band, self.on_batch = evaluate, incumbent, dead_band, on_batch
        self.group_size = group_size
        self._key, self._values = None, None
        self.records: list[dict] = []

    def _score(self, prompts, completions, kwargs) -> list[dict]:
        # TRL calls each reward function in turn on the same batch: evaluate it once
        n = len(completions)
        columns = {k: v for k, v in kwargs.items() if isinstance(v, list) and len(v) == n and k != "completion_ids"}
        rows = [{k: v[i] for k, v in columns.items()} for i in range(n)]
        state = kwargs.get("trainer_state")
        key = (getattr(state, "global_step", None), tuple(map(str, completions)), repr(rows))
        if key != self._key:
            outcomes = self.evaluate(prompts, completions, rows)
            values, batch = [], []
            for row, out in zip(rows, outcomes):
                inc = self.incumbent(row)
                ch = channels(out, inc, self.dead_band)
                values.append(ch)
                batch.append({"row": row, "channels": ch, "gate": ch["latency_gain"] is not None,
                              "outcome": vars(out), "incumbent": vars(inc)})
            self.records.extend(batch)
            log_metric = kwargs.get("log_metric")     # TRL's hook: extra keys in the step's logs (and TensorBoard)
            if callable(log_metric) and batch:
                log_metric("gate_rate", sum(r["gate"] for r in batch) / len(batch))
                log_metric("valid_rate", sum(r["channels"]["valid"] for r in batch) / len(batch))
                share = signal_share(values, self.group_size)["share"] if self.group_size else None
                if share is not None:
                    log_metric("nonzero_advantage_share", share)
            if self.on_batch is not None:
                self.on_batch(batch)
            self._key, self._values = key, values
        return self._values

    def functions(self) -> list:
        """One callable per channel, in CHANNELS order (the order of ``reward_weights``), named after it."""
        def make(name):
            def reward(prompts, completions, **kwargs):
                return [v[name] for v in self._score(prompts, completions, kwargs)]
            reward.__name__ = name
            return reward
        return [make(name) for name in CHANNELS]
