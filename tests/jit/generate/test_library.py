"""library.modules_of / library_class: the library class each role derives from, read statically from the files,
for thin subclasses, their resolved form, and files with methods of their own (which choices_of keeps verbatim)."""
from jitlab.harness import read_files, seed_bank_dir
from jitlab.jit.generate.library import case_study_mechanisms, choices_of, library_class, modules_of
from jitlab.resolve import resolve_file

OWN = '''from jitlab.modules.case_studies import EvidenceGatedPolicy as Gate


class _Tuned(Gate):
    def select(self, ctx, directive, registry):
        return super().select(ctx, directive, registry)


class CapabilityPolicy(_Tuned):
    open_before_end: int = 1
'''


def test_a_subclass_with_methods_names_its_library_base_also_resolved():
    path = "jitlab.modules.case_studies:EvidenceGatedPolicy"
    assert choices_of({"tool_policy.py": OWN})["F"].kind == "file"   # not a thin subclass: no library choice
    assert library_class("F", OWN) == path
    assert library_class("F", resolve_file(OWN, "tool_policy.py")) == path
    assert library_class("F", "class CapabilityPolicy:\n    pass\n") is None
    assert library_class("F", "class CapabilityPolicy(:\n") is None


def test_case_study_folders_name_their_mechanisms():
    mechanisms = case_study_mechanisms()
    files = read_files(seed_bank_dir() / "case_studies" / "turnstile")   # resolved: the library code inlined
    assert modules_of(files) == {r: c.path for r, c in choices_of(files).items() if r != "prompt"}
    assert {p for p in modules_of(files).values() if p in mechanisms} == {
        p for p, studies in mechanisms.items() if "case_studies/turnstile" in studies}
    assert mechanisms["jitlab.modules.case_studies:EvidenceGatedPolicy"] == ("case_studies/pegboard",
                                                                            "case_studies/turnstile")
    assert all(mechanisms.values())   # every mechanism is used by some case study
