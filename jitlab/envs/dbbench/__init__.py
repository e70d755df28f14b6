"""DBBench (AgentBench SQL tasks on SQLite), one module per job:

- ``data``: the AgentBench entries and jitlab's gold fixes / exclusions;
- ``sql``: MySQL-like SQL on in-memory SQLite (collation, LIKE, escapes, time and row limits);
- ``scoring``: AgentBench's answer comparison and the table hashes;
- ``gold``: gold statements, the gold check, the seeded row order;
- ``suite``: ``DBBenchSuite``, ``DBBenchEnv`` and the gold-SQL oracle.

``python -m jitlab.envs.dbbench`` prints the gold check.
"""
from jitlab.envs.dbbench.data import DATA_DIR, excluded, load_entries
from jitlab.envs.dbbench.gold import gold_check
from jitlab.envs.dbbench.scoring import answers_match, mysql_table_md5, normalize_answer, table_hash
from jitlab.envs.dbbench.sql import translate_mysql
from jitlab.envs.dbbench.suite import (
    COMMIT_ANSWER,
    EXECUTE_SQL,
    DBBenchConfig,
    DBBenchEnv,
    DBBenchOracle,
    DBBenchSuite,
)

__all__ = [
    "COMMIT_ANSWER",
    "DATA_DIR",
    "EXECUTE_SQL",
    "DBBenchConfig",
    "DBBenchEnv",
    "DBBenchOracle",
    "DBBenchSuite",
    "answers_match",
    "excluded",
    "gold_check",
    "load_entries",
    "mysql_table_md5",
    "normalize_answer",
    "table_hash",
    "translate_mysql",
]
