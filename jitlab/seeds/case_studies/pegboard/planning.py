"""pegboard planner: coverage-driven directive; switch to verification."""
from jitlab.modules.case_studies import MatrixCoveragePlanner


class Planner(MatrixCoveragePlanner):
    pass
