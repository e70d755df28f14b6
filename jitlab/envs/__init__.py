"""Task suites: Env protocol, TaskSpec, registry (``get_suite``)."""
from jitlab.envs.base import Env, Score, Suite, TaskSpec, get_suite, suite_names

__all__ = ["Env", "Score", "Suite", "TaskSpec", "get_suite", "suite_names"]
