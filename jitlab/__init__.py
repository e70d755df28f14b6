"""jitlab: a notebook-first research workbench for LLM agent harnesses.

Quick use::

    from jitlab import runner, store
    run_dir = runner.run(runner.RunConfig(suite="textworld", harness="react", backbone="embedded", limit=5))
    frames = store.load(run_dir)

Heavy dependencies (torch, transformers, panel, ray) are imported only where used.
"""
import os as _os

# Spinning OpenMP threads collapse decoding speed on a shared CPU (measured ~10x slower on 2 cores);
# libgomp reads this once, when torch is first imported, so it must be set before any torch import.
_os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

__version__ = "0.1.0"
__all__ = ["__version__"]
