"""jitlab.viz.engineer: an engineer loop's candidates read back from candidates.jsonl, and the best one."""
import json

from jitlab.viz import engineer as E


def _write(folder, rows):
    folder.mkdir(parents=True, exist_ok=True)
    lines = [json.dumps({"round": 0, "index": i, "engineer": "rules", "name": f"p{i}", "sha": f"{i:040d}",
                         "validation": {"ok": ok, "diagnostic": None if ok else {"kind": "syntax_error"}},
                         "delta": delta, "base": 0.5, "patched": None if delta is None else 0.5 + delta,
                         "tokens_per_task": 10, "patch": f"patch {i}", "run_dir": None})
             for i, (ok, delta) in enumerate(rows)]
    (folder / "candidates.jsonl").write_text("\n".join(lines) + "\n")
    return folder


def test_the_best_candidate_is_the_valid_one_with_the_highest_delta_first_on_ties(tmp_path):
    cands = E.candidates(_write(tmp_path / "loop", [(True, 0.1), (False, None), (True, 0.3), (True, 0.3), (True, -0.2)]))
    assert list(cands["valid"]) == [True, False, True, True, True] and cands["diagnostic"][1] == "syntax_error"
    best = E.best_candidate(cands)
    assert best["index"] == 2 and best["patch"] == "patch 2"


def test_no_best_candidate_without_a_valid_one_or_above_the_floor(tmp_path):
    assert E.best_candidate(E.candidates(_write(tmp_path / "a", [(False, None)]))) is None
    cands = E.candidates(_write(tmp_path / "b", [(True, -0.2), (True, -0.1)]))
    assert E.best_candidate(cands)["index"] == 1 and E.best_candidate(cands, min_delta=0) is None
