"""gearbox action: ReAct that is the sole writer of the phase register."""
from jitlab.modules.case_studies import PhaseRegisterAction


class Action(PhaseRegisterAction):
    pass
