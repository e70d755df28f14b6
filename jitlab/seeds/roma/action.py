"""roma action: recursive execution with aggregation upward."""
from jitlab.modules.action import RecursiveExecution


class Action(RecursiveExecution):
    pass
