"""Code generator ``code:<backbone>``: a backbone writes the harness files.

    gen = get_generator("code:embedded", handle)       # handle: an LLMHandle on that backbone
    cand = gen.generate(task.public(), references, handle, index=0)
    fixed = gen.repair(cand, diagnostic, task.public(), handle)

Prompt (templates ``code_system.j2`` + ``code_user.j2``): the protocol (the four classes, their
method signatures, the hooks, the data classes, the library modules one may subclass), the task's
public description and tool registry, and K references from the bank (their description; the
first ``code_references`` also with their files as ``<file name=...>`` blocks). The reply is read
with ``parse_blocks`` (one tagged block per file, the last one wins). Files the reply lacks are
taken from the nearest reference that fits the task (``library.first_fitting``: not a text game's likelihood action
for a SQL task), and ``description.yaml``'s lineage says which, so a partial reply can still be validated (and
repaired). A candidate whose files still carry an option that does not fit is refused before validation
(``jitlab.jit.repair.unfit``) and goes to repair with the refusal as its diagnostic. Candidate ``i > 0`` samples
(temperature, a seed of the task and ``i``: ``base.sampling``).

``repair`` shows the diagnostic and the broken file (``code_repair.j2``; ``repair_view``: thin by default), not the
whole harness: the file the diagnostic names (or whose class its traceback's innermost harness or library frame is
in), the other files by name only; with no file to point at, every module file. Module files are shown thin (the
library code they inline left out, imported instead: ``jitlab.resolve.thin_file``), the diagnostic's line moved to
match. That keeps a repair prompt within a 135M model's 8,192-token context (the whole resolved harness made it
7.9-10.6k tokens). ``repair_view: resolved`` shows every file resolved, as before. Files missing from the reply stay
as they were. References are shown as resolved source (the library code they use written out), so the backbone
reads real code, not import lines.

Caveats: a 135M backbone rarely writes a parseable block; its candidates then fall back to the nearest
reference entirely, which ``meta["parsed_files"]`` and ``meta["fallback_files"]`` make visible.
A resolved reference is long (5,000-25,000 characters for the seeds, against ~2,000 for their thin
library-composed form): with a small-context backbone, keep ``code_references`` at 1, since the embedded
backend keeps a prompt's last tokens when it is longer than the context.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import yaml

from jitlab.fields import check_fields
from jitlab.harness import HARNESS_FILES, OPTIONAL_FILES
from jitlab.jit.generate.base import (
    Candidate,
    Reference,
    describe_files,
    prompt_hash,
    render,
    resolved,
    sampling,
)
from jitlab.jit.generate.blocks import format_blocks, parse_blocks
from jitlab.jit.generate.library import SPACE, catalogue, first_fitting, role_of_file
from jitlab.resolve import thin_file

__all__ = ["CodeConfig", "CodeGenerator", "complete_files", "make_generator", "repair_view", "thin_files"]


@dataclass
class CodeConfig:
    """How the code generator prompts its backbone."""
    code_references: int = field(default=1, metadata={"help": "references shown with their code (the rest: "
                                                              "description only)"})
    max_new_tokens: int = field(default=1200, metadata={"help": "tokens the backbone may write per candidate"})
    repair_max_new_tokens: int = field(default=800, metadata={"help": "tokens the backbone may write per repair"})
    temperature: float = field(default=0.8, metadata={"help": "sampling temperature of candidates after the first"})
    list_library: bool = field(default=True, metadata={"help": "list the module library in the prompt"})
    repair_view: str = field(default="thin", metadata={
        "help": "what a repair prompt shows: thin (the broken file and the diagnostic; fits an 8k context) or "
                "resolved (every file with its library code written out)", "choices": ["thin", "resolved"]})

    def __post_init__(self):
        check_fields(self)


class CodeGenerator:
    """See the module docstring. ``name`` is ``code:<backbone>``."""

    def __init__(self, name: str, llm=None, config: CodeConfig | None = None):
        self.name, self.llm, self.config = name, llm, config or CodeConfig()

    def _system(self) -> str:
        library = catalogue() if self.config.list_library else {}
        return render("code_system.j2", library=library)

    def messages(self, task: dict, references: list[Reference]) -> list[dict]:
        refs = [{"name": r.name, "description": r.description,
                 "code": format_blocks(resolved(r.files)) if i < self.config.code_references else ""}
                for i, r in enumerate(references)]
        return [{"role": "system", "content": self._system()},
                {"role": "user", "content": render("code_user.j2", task=task, references=refs)}]

    def generate(self, task: dict, references: list[Reference], llm=None, index: int = 0) -> Candidate:
        llm = llm or self.llm
        messages = self.messages(task, references)
        reply = llm.chat(messages, max_new_tokens=self.config.max_new_tokens,
                         **sampling(task, index, self.config.temperature)).text
        parsed = parse_blocks(reply)
        nearest = first_fitting(references, task)
        files, fallback = _complete(parsed, nearest)
        files = _stamp_lineage(files, self.name, nearest, fallback, parsed)
        meta = {"strategy": "write", "parsed_files": sorted(parsed), "fallback_files": fallback,
                "fallback_from": nearest.sha if (nearest and fallback) else None, "reply": reply}
        return Candidate(files, self.name, index, [r.sha for r in references], prompt_hash(messages), None, meta)

    def repair(self, candidate: Candidate, diagnostic: dict, task: dict, llm=None, round: int = 1) -> Candidate:
        llm = llm or self.llm
        if self.config.repair_view == "resolved":
            shown, others, diagnostic = resolved(candidate.files), [], _diag(diagnostic)
        else:
            shown, others, diagnostic = repair_view(candidate.files, diagnostic)
        messages = [{"role": "system", "content": self._system()},
                    {"role": "user", "content": render("code_repair.j2", task=task, files=format_blocks(shown),
                                                       others=others, diagnostic=diagnostic)}]
        reply = llm.chat(messages, max_new_tokens=self.config.repair_max_new_tokens).text
        parsed = parse_blocks(reply)
        files = {**candidate.files, **parsed}
        meta = {**{k: v for k, v in candidate.meta.items() if k != "reply"}, "repair_round": round,
                "repair_parsed_files": sorted(parsed), "reply": reply}
        return Candidate(files, self.name, candidate.index, list(candidate.parents), prompt_hash(messages), None, meta)


def repair_view(files: dict[str, str], diagnostic: dict) -> tuple[dict[str, str], list[str], dict]:
    """(the files a thin repair prompt shows, the names of the others, the diagnostic as shown): the harness file the
    diagnostic names, else the role file its traceback points at (``library.role_of_file``); with neither, every
    module file. Module files are shown thin (``jitlab.resolve.thin_file``: the library code they inline left out,
    imported instead) and the diagnostic's line is moved to match (dropped when it fell in the library code). A named
    file the harness lacks (deleted) is not shown; the diagnostic says it is missing."""
    diagnostic = _diag(diagnostic)
    name = Path(diagnostic.get("file") or "").name
    if name not in {*HARNESS_FILES, *OPTIONAL_FILES, *files}:
        role = role_of_file(diagnostic.get("file"), diagnostic.get("traceback") or "")
        name = SPACE[role][0] if role in SPACE else ("prompt.yaml" if role == "prompt" else "")
    picked = [name] if name else [f for f in files if f.endswith(".py")]
    shown = thin_files({f: files[f] for f in picked if f in files})
    if name.endswith(".py") and name in files:
        diagnostic["line"] = thin_file(files[name], diagnostic.get("line"))[1]
    return shown, sorted(f for f in files if f not in shown), diagnostic


def thin_files(files: dict[str, str]) -> dict[str, str]:
    """``files`` with each module file in thin form (``jitlab.resolve.thin_file``): what a thin repair prompt shows
    and what a repair reply may be (a candidate resolves its files again, so a thin reply restores the whole file)."""
    return {f: thin_file(t)[0] if f.endswith(".py") else t for f, t in files.items()}


def _diag(diagnostic: dict) -> dict:
    return {"kind": diagnostic.get("kind", "runtime_error"), "file": diagnostic.get("file"),
            "line": diagnostic.get("line"), "message": diagnostic.get("message", ""),
            "traceback": diagnostic.get("traceback", "")}


def complete_files(parsed: dict[str, str], nearest_files: dict[str, str]) -> dict[str, str]:
    """The parsed files plus, for each harness file the reply lacks, the one in ``nearest_files``."""
    files = dict(parsed)
    for name in HARNESS_FILES:
        if name not in files and name in nearest_files:
            files[name] = nearest_files[name]
    return files


def _complete(parsed: dict[str, str], nearest: Reference | None) -> tuple[dict[str, str], list[str]]:
    """(complete_files with the nearest reference's files, the names taken from it)."""
    files = complete_files(parsed, nearest.files if nearest is not None else {})
    return files, [name for name in files if name not in parsed]


def _stamp_lineage(files: dict[str, str], generator: str, nearest: Reference | None, fallback: list[str],
                   parsed: dict[str, str]) -> dict[str, str]:
    """Rewrite description.yaml's lineage (when it parses) so it says who wrote what."""
    if "description.yaml" not in files:
        return files
    desc = describe_files(files)
    if not desc and files["description.yaml"].strip():
        return files  # unparseable: leave it for validation to report
    lineage = {"generator": generator}
    if fallback:
        lineage.update(fallback_files=fallback, fallback_from=(nearest.sha[:12] if nearest else None))
    desc["lineage"] = lineage
    if "description.yaml" not in parsed or not desc.get("name") or (nearest and desc.get("name") == nearest.name):
        desc["name"] = f"{generator.replace(':', '-')}-{'from-' + nearest.name if nearest else 'new'}"
    return {**files, "description.yaml": yaml.safe_dump(desc, sort_keys=False, allow_unicode=True)}


def make_generator(name: str, backbone_handle=None, **config):
    """The registry's factory (``GENERATORS`` in jitlab/jit/generate/base.py): ``code:<backbone>`` with its config fields."""
    return CodeGenerator(name, backbone_handle, CodeConfig(**config))
