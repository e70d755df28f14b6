"""``python -m jitlab.envs.dbbench``: the gold check report."""
from jitlab.envs.dbbench.gold import report

report()
