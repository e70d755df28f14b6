"""sql action: keyword-prefilled SQL checked by SQLite's parser before it is sent; answers committed from results."""
from jitlab.modules.sql import SqlAction


class Action(SqlAction):
    pass
