"""aggagent action: multi-rollout aggregation (K=3 proposals + aggregator)."""
from jitlab.modules.action import MultiRolloutAggregation


class Action(MultiRolloutAggregation):
    pass
