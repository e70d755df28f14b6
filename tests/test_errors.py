"""jitlab's errors cross process boundaries (Ray grid cells, process pools) by pickle: each comes back with its
message and fields (before, UnknownName could not be unpickled: Exception re-created it from its message alone)."""
import pickle

import pytest

from jitlab.errors import HarnessError, UnknownName
from jitlab.jit.generate.plan import PlanError
from jitlab.sandbox.diagnostics import Diagnostic, SandboxHarnessError


@pytest.mark.parametrize("error", [
    UnknownName("suite", "textwrld", ["textworld", "babyai"]),
    HarnessError("no class Memory", "memory.py", "interface_mismatch"),
    PlanError("not JSON"),
    SandboxHarnessError(Diagnostic("parse_error", "invalid syntax", "planning.py", 3)),
])
def test_errors_survive_pickle_with_their_fields(error):
    back = pickle.loads(pickle.dumps(error))
    assert type(back) is type(error) and str(back) == str(error)
    assert vars(back) == vars(error)
