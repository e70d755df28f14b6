"""realised_react hooks: the model's Action text realised onto the admissible list (nearest command, or refused
and re-chosen from the list by likelihood)."""
from jitlab.modules.realisation import RealisationHooks


class Hooks(RealisationHooks):
    pass
