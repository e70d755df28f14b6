"""jitlab: a notebook-first research workbench for LLM agent harnesses.

Quick use::

    from jitlab import runner, store
    run_dir = runner.run(runner.RunConfig(suite="textworld", harness="react", backbone="embedded", limit=5))
    frames = store.load(run_dir)

Heavy dependencies (torch, transformers, panel, ray) are imported only where used.
"""
__version__ = "0.1.0"
__all__ = ["__version__"]
