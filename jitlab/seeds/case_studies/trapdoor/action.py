"""trapdoor action: orchestrator that intercepts delegate and runs a bounded sub-agent."""
from jitlab.modules.case_studies import OrchestratorAction


class Action(OrchestratorAction):
    pass
