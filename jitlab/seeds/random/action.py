"""Random baseline action: a uniformly random admissible command; never calls the backbone."""
from jitlab.modules.basic import RandomAction


class Action(RandomAction):
    pass
