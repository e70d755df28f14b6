"""DBBench suite (AgentBench SQL tasks on SQLite); the code lives in :mod:`jitlab.envs.dbbench.suite`."""
from jitlab.envs.dbbench.suite import *  # noqa: F401,F403
from jitlab.envs.dbbench.suite import __all__  # noqa: F401
