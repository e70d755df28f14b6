"""An episode's status, declared once: every module that sets or reads one (the runtime, the runners, the JIT, the
stores, the packets and tables) spells it ``Status.OK``, ``Status.INFRA_ERROR``, ..., never as a string.

Use::

    from jitlab.status import FINAL, Status
    result.status = Status.BUDGET
    if row["status"] in FINAL: ...

``Status`` is a ``StrEnum``: a value equals its string (``Status.OK == "ok"``), so records read back from SQLite,
JSON or pandas compare with it unchanged. ``jitlab.store`` re-exports these names. It imports no jitlab module (the
sandbox child's runtime uses it).
"""

from __future__ import annotations

from enum import StrEnum

__all__ = ["FINAL", "RETRY", "Status"]


class Status(StrEnum):
    """An episode's status (``episodes.status``), declared once: FINAL ones are results, RETRY ones are rerun."""

    RUNNING = "running"  # in flight (or its process was killed: becomes interrupted)
    OK = "ok"  # the episode ended (success or not is ``success``)
    BUDGET = "budget"  # it ran out of steps, tokens or wall time
    HARNESS_ERROR = "harness_error"  # the harness's code failed (a result: the harness is to blame)
    INFRA_ERROR = "infra_error"  # the backbone, environment or sandbox failed (not a result)
    INTERRUPTED = "interrupted"  # its process died while it ran
    SPEND_CAP = "spend_cap"  # the run-level spend cap stopped it (neither final nor retried by itself)


FINAL = tuple(s.value for s in (Status.OK, Status.BUDGET, Status.HARNESS_ERROR))
RETRY = tuple(s.value for s in (Status.INFRA_ERROR, Status.INTERRUPTED))
