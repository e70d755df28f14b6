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


# -- the committed engineer tables: results/engineer-table-textworld/ (SmolLM2 executor, two harnesses) and
# results/engineer-table-textworld-gemma/ (Gemma executor, what notebook 07 reads by default) ----------------------
def _export(name="engineer-table-textworld"):
    from jitlab.paths import repo_root
    return repo_root() / "results" / name


def test_the_engineer_table_export_reads_back_per_harness_in_the_table_order():
    loops = E.table_loops(_export(), "react")
    assert list(loops) == ["rules", "interventions", "embedded", "hf:runs/train/eng-sft2/adapter",
                           "hf:runs/train/eng-grpo4/adapter"]
    packet = E.packet(loops["rules"])                          # packet.json at the export's loop root
    assert packet["failures"] and packet["batch"]["task_ids"]
    cands = E.candidates(loops["rules"])
    assert len(cands) == 4 and list(cands["wins"].notna()) == [True] * 4   # paired against the export's base run
    best = E.best_candidate(cands)
    run = E.candidate_run(loops["rules"], best)               # recorded under runs/, found in the export
    assert run.parent == loops["rules"] / "round0" and (run / "run.json").is_file()


def test_the_engineer_table_cells_give_k_over_n_with_wilson_intervals():
    cells = E.table_cells(_export())
    base = cells[(cells["harness"] == "react") & (cells["engineer"] == "base")].iloc[0]
    assert base["success_batch"] == "0.50 (3/6; 0.19–0.81)" and base["success_test"] == "0.20 (2/10; 0.06–0.51)"
    aor = cells[(cells["harness"] == "aorchestra") & (cells["engineer"] == "base")].iloc[0]
    assert aor["success_disjoint"] == "0.17 (1/6; 0.03–0.56)"   # docs/measurements.md's row


def test_the_gemma_table_keeps_the_rule_patch_and_reads_its_training_records():
    cells = E.table_cells(_export("engineer-table-textworld-gemma")).set_index("engineer")
    assert cells.loc["base", "success_batch"] == "0.00 (0/6; 0.00–0.39)"
    assert cells.loc["rules", "kept"] and cells.loc["rules", "success_test"] == "0.30 (3/10; 0.11–0.60)"
    assert E.packet(E.table_loops(_export("engineer-table-textworld-gemma"), "react")["rules"])["failures"]
    training = _export("engineer-table-textworld-gemma") / "training"
    assert {"eng-data", "eng-sft-60", "eng-grpo"} <= {p.name for p in training.iterdir()}


def test_a_packet_is_looked_for_in_the_loop_and_its_export(tmp_path):
    import pytest

    from jitlab.errors import ConfigError
    (tmp_path / "loop" / "round0").mkdir(parents=True)
    (tmp_path / "loop" / "round0" / "packet.json").write_text('{"failures": []}')
    assert E.packet(tmp_path / "loop") == {"failures": []}
    with pytest.raises(ConfigError, match="packet.json"):
        E.packet(tmp_path)
