"""flash_searcher action: DAG-parallel execution (one proposal per ready node, queued)."""
from jitlab.modules.action import DAGParallelAction


class Action(DAGParallelAction):
    pass
