"""jitlab.jit.record: the one reader of a JIT task's ``extra``, against what a real JIT run writes."""
import json

from jitlab.jit.inference import JITConfig, run_jit
from jitlab.jit.record import JITTaskRecord, read_jit_record
from jitlab.store import load


def test_a_real_jit_run_reads_back_with_every_key_known(tmp_path):
    out = run_jit(JITConfig(suite="toy", mode="streaming", backbone="scripted:pick-hash", limit=2, retrieval="bm25",
                            out=str(tmp_path / "run"), quiet=True, allow_unisolated=True))
    extras = [json.loads(x) for x in load(out)["episodes"].sort_values("id")["extra"]]
    records = [read_jit_record(x) for x in extras]
    assert [r.stream_index for r in records] == [0, 1] and {r.mode for r in records} == {"streaming"}
    assert all(r.other == {} for r in records), [r.other for r in records]        # the dataclass names every key
    set_keys = [{k: v for k, v in x.items() if v is not None} for x in extras]     # None reads as "not recorded"
    assert [r.as_dict() for r in records] == set_keys                               # and loses none
    assert all(r.exec_tokens > 0 and r.harness_dir.startswith("harnesses/") for r in records)


def test_fixed_runs_unknown_keys_and_bad_json():
    assert read_jit_record("{}") == JITTaskRecord() and read_jit_record(None).mode is None
    assert read_jit_record("not json") == JITTaskRecord() and read_jit_record("[1, 2]") == JITTaskRecord()
    rec = read_jit_record({"mode": "static", "gen_tokens": 0, "new_key": 1})
    assert rec.gen_tokens == 0 and rec.select_tokens is None and rec.other == {"new_key": 1}
    assert rec.as_dict() == {"mode": "static", "gen_tokens": 0, "new_key": 1}
    assert read_jit_record({"jit": {"repair": [{"outcome": "fixed"}]}}).repaired
