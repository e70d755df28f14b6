"""Novelty rejection in the JIT candidate loop (jitlab/jit/loop.py): a candidate of the same design as an earlier
candidate of the task, or as a bank harness that failed on the task's family, is rejected before it is validated or
run, and the task record counts it. Toy suite, scripted backbones (test doubles); the generator is the real compose
generator, wrapped by a TEST DOUBLE that renames (and comments) what it proposes, as a code generator's copy would."""
import json
import re

from jitlab.harness import read_files, seed_bank_dir
from jitlab.jit.generate.base import Candidate
from jitlab.jit.generate.compose import ComposeGenerator
from jitlab.jit.generate.library import Choice, choices_of
from jitlab.jit.inference import JITConfig, run_jit
from jitlab.jit.loop import same_design
from jitlab.store import load


def _unisolated() -> bool:
    from jitlab.sandbox import probe
    return not probe()[0]


def _cfg(out, **kw) -> JITConfig:
    base = dict(suite="toy", backbone="scripted:pick-hash", limit=2, retrieval="bm25", cache=False, out=str(out),
                smoke_steps=2, quiet=True, allow_unisolated=_unisolated(), mode="streaming")
    return JITConfig(**{**base, **kw})


def _renamed(cand: Candidate, name: str, comment: bool = False) -> Candidate:
    """The same harness under another name (and, with ``comment``, a comment line added to its action.py)."""
    files = dict(cand.files)
    files["description.yaml"] = re.sub(r"^name:.*$", f"name: {name}", files["description.yaml"], count=1, flags=re.M)
    if comment:
        files["action.py"] = "# a copy, commented\n" + files["action.py"]
    return Candidate(files, cand.generator, cand.index, cand.parents, cand.prompt_hash, cand.logprob, dict(cand.meta))


def _extras(out):
    eps = load(out)["episodes"]
    return [json.loads(x) for x in eps[eps["final"]].sort_values("id")["extra"]]


def test_same_design_ignores_names_and_comments_but_not_a_changed_choice():
    react, resum = (read_files(seed_bank_dir() / n) for n in ("react", "resum"))
    assert same_design(choices_of(react), choices_of(_renamed(Candidate(react, "test"), "other", comment=True).files))
    assert not same_design(choices_of(react), choices_of(resum))
    # library choices: the class and its parameters; file choices: near-duplicate code lines (NEAR_DUPLICATE)
    lib = {"A": Choice("A", "library", "jitlab.modules.action:ReActAction", {})}
    assert same_design(lib, {"A": Choice("A", "library", "jitlab.modules.action:ReActAction", {})})
    assert not same_design(lib, {"A": Choice("A", "library", "jitlab.modules.action:ReActAction", {"k": 2})})
    code = [f"    x{i} = step({i})" for i in range(30)]
    one_off, many_off = list(code), list(code)
    one_off[5] = "    x5 = other(5)"                     # 1 line of 30 changed, plus a comment and blank lines
    many_off[::3] = [f"    y{i} = other()" for i in range(10)]   # 10 of 30 changed
    text = lambda lines: "\n".join(lines)  # noqa: E731
    file = lambda lines: {"M": Choice("M", "file", text=text(lines))}  # noqa: E731
    assert same_design(file(code), file(["# a comment", ""] + one_off))
    assert not same_design(file(code), file(many_off))
    assert not same_design(file(code), lib) and not same_design(file(code), {**file(code), **lib})


def test_a_repeat_of_an_earlier_candidate_is_rejected_before_validation_and_replaced(tmp_path, monkeypatch):
    original = ComposeGenerator.generate
    asked = []

    def repeats_the_first(self, task, references, llm=None, index=0, **kw):
        asked.append(index)
        if index == 1:   # the second candidate is the first one, renamed and commented
            return _renamed(original(self, task, references, llm, 0, **kw), "copy-of-first", comment=True)
        return original(self, task, references, llm, index, **kw)
    monkeypatch.setattr(ComposeGenerator, "generate", repeats_the_first)
    out = run_jit(_cfg(tmp_path / "r", n_candidates=2, limit=1))
    (x,) = _extras(out)
    # the copy is rejected; a replacement of the same design as the first (compose's fitted picks recur) is too
    rejected, *more = x["jit"]["novelty"]
    first = x["jit"]["candidates"][0]
    assert rejected["name"] == "copy-of-first" and rejected["like"] == first["sha"]
    assert all(r["why"] == "a candidate of this task" for r in [rejected, *more])
    assert x["novelty_rejected"] == 1 + len(more)
    # never validated: not among the candidates checked, no smoke-run copy of it; its replacement was generated
    assert rejected["sha"] not in {c["sha"] for c in x["jit"]["candidates"]} and len(x["jit"]["candidates"]) == 2
    assert not (out / "candidates" / rejected["sha"][:16]).exists()
    assert asked[2] == 1 + 2 * (3 + 1)        # the generator's next strategy, past the sha rule's indices
    assert json.loads((out / "summary.json").read_text())["novelty_rejected"] == 1 + len(more)


def test_a_renamed_copy_of_a_harness_that_failed_on_the_family_is_not_run_again(tmp_path, monkeypatch):
    # scripted:look always answers "look": every harness fails the toy game (hooks held at none, as in
    # tests/jit/test_inference.py, so no hook wins it without the model). Each task's candidates are renamed
    # after the task, so the sha rule (same sha) never fires; the design rule does, from the second task on.
    from jitlab.jit.generate import compose
    full = compose.catalogue()
    # and no likelihood action: its untried-first bookkeeping wins the toy game without the model
    monkeypatch.setattr(compose, "catalogue", lambda: {**full, "H": full["H"][:1],
                                                       "A": [o for o in full["A"] if "likelihood" not in o.path]})
    original = ComposeGenerator.generate

    def renames(self, task, references, llm=None, index=0, **kw):
        return _renamed(original(self, task, references, llm, index, **kw), f"for-{task['id']}-{index}")
    monkeypatch.setattr(ComposeGenerator, "generate", renames)
    out = run_jit(_cfg(tmp_path / "f", backbone="scripted:look", limit=3, avoid_after=1))
    eps = load(out)["episodes"]
    assert not eps["success"].any()
    extras = _extras(out)
    assert extras[0]["novelty_rejected"] == 0 and not extras[0]["jit"]["avoided"]
    later = [r for x in extras[1:] for r in x["jit"]["novelty"]]
    assert later and all(r["why"] == "failed on the family" for r in later)
    ran = [choices_of(read_files(out / x["harness_dir"])) for x in extras]
    assert not same_design(ran[0], ran[1])       # the second task ran another design
    assert sum(x["novelty_rejected"] for x in extras) == len([r for r in later if not r.get("kept_repeat")])


def test_static_mode_drops_a_repeat_without_generating_more(tmp_path, monkeypatch):
    original = ComposeGenerator.generate
    asked = []

    def repeats_the_first(self, task, references, llm=None, index=0, **kw):
        asked.append(index)
        return _renamed(original(self, task, references, llm, 0, **kw), f"copy-{index}")
    monkeypatch.setattr(ComposeGenerator, "generate", repeats_the_first)
    out = run_jit(_cfg(tmp_path / "s", n_candidates=3, limit=1, mode="static"))
    (x,) = _extras(out)
    assert sorted(asked) == [0, 1, 2] and len(x["jit"]["candidates"]) == 1 and x["novelty_rejected"] == 2
