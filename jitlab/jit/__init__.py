"""Just-in-time harness inference: generators (generate/), validation and repair, the harness bank (archive,
Pareto math, retrieval), static and streaming JIT (inference.py) and the typed record of a JIT task (record.py).
See README.md in this folder; nothing is imported here, so `import jitlab.jit` stays cheap."""
