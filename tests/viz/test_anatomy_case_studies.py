"""Anatomy diagrams of the six case-study harnesses (seed_bank/case_studies/): derived from code, one SVG each,
each showing the library module that carries its design's mechanism."""
import xml.etree.ElementTree as ET

from jitlab.harness import case_study_names
from jitlab.viz.anatomy import anatomy
from jitlab.viz.anatomy_table import save_case_studies

MECHANISM = {  # case study -> (slot, library class that carries its defining mechanism)
    "gearbox": ("A", "PhaseRegisterAction"), "origami": ("M", "HierarchicalFoldMemory"),
    "palimpsest": ("P", "BoundedDAGPlanner"), "pegboard": ("M", "EvidenceMatrixMemory"),
    "trapdoor": ("A", "OrchestratorAction"), "turnstile": ("F", "EvidenceGatedPolicy"),
}


def test_case_study_diagrams_are_written_from_code(tmp_path):
    paths = save_case_studies(tmp_path / "case_studies")
    assert [p.stem for p in paths] == sorted(MECHANISM)
    for name, path in zip(case_study_names(), paths, strict=True):
        a = anatomy(name)
        slot, cls = MECHANISM[a.name]
        assert a.slots[slot].label == cls, (name, a.slots[slot].label)
        svg = path.read_text()
        ET.fromstring(svg)
        assert cls in svg and "seed_bank/case_studies/" in svg


def test_case_study_mechanisms_that_call_the_backbone_are_found():
    assert anatomy("case_studies/origami").slots["M"].calls_backbone        # the fold step
    assert anatomy("case_studies/turnstile").slots["P"].calls_backbone      # specification + checklist
    assert not anatomy("case_studies/turnstile").slots["F"].calls_backbone  # the gate is pure bookkeeping
    assert "delegate" in " ".join(anatomy("case_studies/trapdoor").slots["F"].tools_added)
