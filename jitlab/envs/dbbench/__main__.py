"""``python -m jitlab.envs.dbbench``: the gold check report."""
from jitlab.envs.dbbench.suite import _main

_main()
