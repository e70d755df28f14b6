"""Sandboxed execution of untrusted harness code (bubblewrap + seccomp + rlimits, RPC over pipes).

    from jitlab.sandbox import SandboxConfig, SandboxedAgent, validate
    validate("candidate/").ok                          # compile + import + interface check, in the sandbox
    agent = SandboxedAgent("candidate/", llm)          # drop-in for HarnessAgent in run_episode

See jitlab/sandbox/runner.py for the isolation it sets up and jitlab/sandbox/diagnostics.py for
the failure kinds. A sandbox that cannot be set up raises SandboxSetupError (an InfraError).
The parent-side names load lazily so the child (which imports this package) starts faster.

What is not covered:

- Seeds and other trusted harnesses: ``--isolation auto`` runs the seed bank in-process; ``--isolation none`` and
  ``allow_unisolated=True`` run candidate code without namespaces (recorded as such, never silently).
- The kernel: isolation rests on user namespaces, seccomp and rlimits, not a VM; a kernel bug, or a misuse of a
  syscall the allowlist permits, is not contained.
- What a harness says to the backbone: prompts are brokered and counted, not filtered; with an API backbone they leave
  the machine, and anything the child can read (task text, observations, the read-only Python install, venv and
  jitlab package outside ``jitlab/envs``) can be put in one. Keep secrets out of those paths.
- Side channels: timing (a replay-cache hit answers faster), CPU and memory contention with other episodes.
- Whole-tree resource accounting: rlimits are per process (address space, CPU seconds, file size, open files; the
  seccomp filter stops new processes), and backbone time does not count against the child's wall limit.
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
