"""Selection rules: when a candidate measured on a small batch may replace the incumbent (so it cannot fool itself).

A candidate and its incumbent are run on the same (task id, seed) pairs; ``judge`` compares their successes under
one named rule and returns a :class:`Verdict` saying whether the rule admitted the candidate, and why. Each place
that selects on measured reward records the verdict (the engineer loop's ``rounds[*].selection`` in its
summary.json and the ``admitted_by`` of the kept patch):

- ``greedy``: admitted when Δ success on the screen batch > 0. Today's rule, and the default, so earlier
  results are reproduced; with 6-10 tasks it admits a one-task difference, which is inside the noise floor
  (docs/measurements.md, "Noise floor").
- ``screen``: a screen may only reject. Nothing is admitted on a screen alone; the incumbent stays (use it to
  measure candidates without switching).
- ``confirm``: the screen rejects Δ <= 0; a survivor is admitted only when Δ > 0 again on a confirmation batch
  of other tasks (disjoint from the screen; the engineer loop uses the next ``batch`` tasks of the split). Without
  a confirmation batch nothing is admitted.
- ``paired``: admitted when the candidate wins more discordant pairs than it loses and the two-sided exact McNemar
  p-value (jitlab.stats.mcnemar_exact) over every pair measured (screen and confirmation) is below ``level``
  (0.05 by default). On 6 tasks that takes 6 wins and no loss (p = 0.031): small batches rarely pass.

Δ, wins and losses count only pairs both runs finished.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

from jitlab.errors import ConfigError
from jitlab.stats import mcnemar_exact

__all__ = ["DEFAULT_RULE", "LEVEL", "RULES", "Verdict", "check_rule", "judge", "successes"]

RULES = ("greedy", "screen", "confirm", "paired")
DEFAULT_RULE = "greedy"
LEVEL = 0.05


@dataclass
class Verdict:
    """What a rule decided about one candidate: ``admitted`` and a one-line ``reason``; the paired counts."""
    rule: str
    admitted: bool
    reason: str
    delta: float | None = None          # Δ success on the screen batch
    confirm_delta: float | None = None  # Δ on the confirmation batch (confirm), when measured
    wins: int = 0                       # pairs only the candidate solved (over all pairs the rule counted)
    losses: int = 0                     # pairs only the incumbent solved
    n_pairs: int = 0
    p_value: float | None = None        # paired: the exact McNemar p-value
    level: float | None = None

    def as_dict(self) -> dict:
        return asdict(self)


def check_rule(rule: str, level: float = LEVEL) -> None:
    """ConfigError unless ``rule`` is one of RULES and ``level`` in (0, 1)."""
    if rule not in RULES:
        raise ConfigError(f"unknown selection rule {rule!r}; choose one of {', '.join(RULES)} (jitlab/selection.py)")
    if not 0 < float(level) < 1:
        raise ConfigError(f"selection level must be in (0, 1), got {level!r}; e.g. 0.05")


def successes(episodes) -> dict:
    """What :func:`judge` compares: (task id, seed) -> success of a run's final episodes (an ``episodes`` frame of
    :func:`jitlab.store.load`)."""
    done = episodes[episodes["final"]]
    return {(str(r.task_id), int(r.seed)): bool(r.success) for r in done.itertuples()}


def _paired(base: dict, cand: dict) -> tuple[float | None, int, int, int]:
    """(Δ success, wins, losses, pairs) over the keys both dicts hold (key -> success)."""
    keys = sorted(set(base) & set(cand))
    if not keys:
        return None, 0, 0, 0
    wins = sum(bool(cand[k]) and not bool(base[k]) for k in keys)
    losses = sum(bool(base[k]) and not bool(cand[k]) for k in keys)
    return (wins - losses) / len(keys), wins, losses, len(keys)


def judge(rule: str, base: dict, cand: dict, confirm: tuple[dict, dict] | None = None, level: float = LEVEL) -> Verdict:
    """The verdict of ``rule`` on a candidate: ``base`` and ``cand`` map (task id, seed) -> success on the screen
    batch; ``confirm`` (optional) is the same pair of maps on a confirmation batch."""
    check_rule(rule, level)
    d, wins, losses, n = _paired(base, cand)
    if n == 0:
        return Verdict(rule, False, "no pair both runs finished", level=level)
    shown = f"screen Δ={d:+.2f} on {n} pairs"
    if rule == "greedy":
        return Verdict(rule, d > 0, f"{shown}: {'> 0, admitted' if d > 0 else '<= 0, rejected'}", d, wins=wins,
                       losses=losses, n_pairs=n)
    if rule == "screen":
        return Verdict(rule, False, f"{shown}: a screen only rejects, the incumbent stays", d, wins=wins,
                       losses=losses, n_pairs=n)
    if rule == "confirm":
        if d <= 0:
            return Verdict(rule, False, f"{shown} <= 0: rejected by the screen", d, wins=wins, losses=losses,
                           n_pairs=n)
        if confirm is None:
            return Verdict(rule, False, f"{shown} > 0 but no confirmation batch was measured", d, wins=wins,
                           losses=losses, n_pairs=n)
        cd, cw, cl, cn = _paired(*confirm)
        ok = cd is not None and cd > 0
        text = "no confirmation pair finished" if cd is None else f"confirmation Δ={cd:+.2f} on {cn} pairs"
        return Verdict(rule, ok, f"{shown}; {text}: {'admitted' if ok else 'rejected'}", d, cd, wins + cw,
                       losses + cl, n + cn)
    if confirm is not None:  # paired: every pair measured counts
        _, cw, cl, cn = _paired(*confirm)
        wins, losses, n = wins + cw, losses + cl, n + cn
    p = mcnemar_exact(losses, wins)
    ok = wins > losses and p < level
    return Verdict(rule, ok, f"{wins} wins / {losses} losses on {n} pairs, exact McNemar p={p:.3g} "
                   f"{'<' if p < level else '>='} {level:g}: {'admitted' if ok else 'rejected'}", d, wins=wins,
                   losses=losses, n_pairs=n, p_value=p, level=level)
