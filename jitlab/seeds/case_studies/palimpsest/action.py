"""palimpsest action: bounded DAG executor (one proposal per ready node, width- and depth-bounded)."""
from jitlab.modules.case_studies import BoundedDAGExecutor


class Action(BoundedDAGExecutor):
    pass
