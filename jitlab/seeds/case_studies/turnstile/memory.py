"""turnstile memory: evidence checklist data store (buckets filled with source ids)."""
from jitlab.modules.case_studies import EvidenceChecklistMemory


class Memory(EvidenceChecklistMemory):
    pass
