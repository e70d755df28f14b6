"""jitlab: a notebook-first research workbench for LLM agent harnesses.

Quick use (the names a notebook starts from are re-exported here, imported on first use)::

    import jitlab
    run_dir = jitlab.run(jitlab.RunConfig(suite="textworld", harness="react", backbone="embedded", limit=5))
    run_dir = jitlab.run(jitlab.RunConfig(suite="toy", limit=3), harness=my_harness)  # a Harness object, in-process
    frames = jitlab.load(run_dir)                                  # episodes, steps, calls as DataFrames
    jit_dir = jitlab.run_jit(jitlab.JITConfig(suite="toy", mode="streaming", limit=5))

Heavy dependencies (torch, transformers, panel, ray) are imported only where used.
"""
import os as _os

# Spinning OpenMP threads collapse decoding speed on a shared CPU (measured ~10x slower on 2 cores);
# libgomp reads this once, when torch is first imported, so it must be set before any torch import.
_os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

__version__ = "0.1.0"
__all__ = ["JITConfig", "RunConfig", "__version__", "load", "run", "run_jit"]


def __getattr__(name: str):
    """The re-exported names, imported when first used: ``import jitlab`` (and so ``jitlab --help``) stays fast."""
    if name in ("run", "RunConfig"):
        from jitlab.runner import RunConfig, run
        return {"run": run, "RunConfig": RunConfig}[name]
    if name in ("run_jit", "JITConfig"):
        from jitlab.jit.inference import JITConfig, run_jit
        return {"run_jit": run_jit, "JITConfig": JITConfig}[name]
    if name == "load":
        from jitlab.store import load
        return load
    raise AttributeError(f"module 'jitlab' has no attribute {name!r}")
