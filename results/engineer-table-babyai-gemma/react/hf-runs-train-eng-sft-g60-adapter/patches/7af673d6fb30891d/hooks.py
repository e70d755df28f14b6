"""Rule patch: jerkin's rules."""
from dataclasses import dataclasses


from jitlab.modules.hooks import RuleHooks


@RuleHooks(
    (
        """

        step_budget_end: int
        Min: 2
        Max: 3
        rule: "grad: min_reward: 0.0, max_reward: 1.0"
        action: "go_away"
    ),
)
