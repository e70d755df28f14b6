"""turnstile planner: specification + evidence checklist."""
from jitlab.modules.case_studies import SpecChecklistPlanner


class Planner(SpecChecklistPlanner):
    pass
