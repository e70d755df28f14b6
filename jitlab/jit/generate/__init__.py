"""Harness generators: prompts (Jinja templates as files), the ``code:<backbone>`` and ``compose``
generators, the tagged-block parser and the static-JIT selectors.

    from jitlab.jit.generate import get_generator, Reference
    gen = get_generator("compose", handle)                # or "code:embedded"
    cand = gen.generate(task.public(), [Reference(...)], handle)
    cand.files        # {"memory.py": ..., "planning.py": ..., ..., "description.yaml": ...}

See README.md in this folder for one line per file.
"""
from jitlab.jit.generate.base import (
           Candidate,
           Generator,
           Reference,
           evidence,
           get_generator,
           prompt_hash,
           references,
           render,
)
from jitlab.jit.generate.blocks import format_blocks, parse_blocks
from jitlab.jit.generate.select import SELECTORS, rank

__all__ = [
           "SELECTORS",
           "Candidate",
           "Generator",
           "Reference",
           "evidence",
           "format_blocks",
           "get_generator",
           "parse_blocks",
           "prompt_hash",
           "references",
           "rank",
           "render",
]
