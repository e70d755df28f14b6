"""Sandboxed execution of untrusted harness code (bubblewrap + seccomp + rlimits, RPC over pipes).

    from jitlab.sandbox import SandboxConfig, SandboxedAgent, validate
    validate("candidate/").ok                          # compile + import + interface check, in the sandbox
    agent = SandboxedAgent("candidate/", llm)          # drop-in for HarnessAgent in run_episode

See jitlab/sandbox/runner.py for the isolation it sets up and jitlab/sandbox/diagnostics.py for
the failure kinds. A sandbox that cannot be set up raises SandboxSetupError (an InfraError).
The parent-side names load lazily so the child (which imports this package) starts faster.
"""
from jitlab.sandbox.diagnostics import KINDS, Diagnostic, SandboxHarnessError, SandboxSetupError

__all__ = ["KINDS", "Diagnostic", "SandboxHarnessError", "SandboxSetupError", "ISOLATED", "UNISOLATED",
           "SandboxConfig", "SandboxedAgent", "SandboxResult", "probe", "require_isolation", "validate"]

_RUNNER = ("ISOLATED", "UNISOLATED", "SandboxConfig", "SandboxedAgent", "SandboxResult", "probe",
           "require_isolation", "validate")


def __getattr__(name: str):
    if name in _RUNNER:
        from jitlab.sandbox import runner
        return getattr(runner, name)
    raise AttributeError(f"module 'jitlab.sandbox' has no attribute {name!r}")
