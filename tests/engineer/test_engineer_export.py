"""``jitlab engineer export``: a table's loops, runs and table exported into the layout jitlab.viz.engineer and
notebook 07 read back, on the toy suite with scripted TEST DOUBLES (pick-hash plays; the rule teacher writes
patches); bad sources and targets refused before anything is written."""
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent.parent / "sandbox"))
from sandbox_helpers import requires_bwrap  # noqa: E402

from jitlab.cli import main  # noqa: E402
from jitlab.engineer.export import export_engineer  # noqa: E402
from jitlab.engineer.table import TableConfig, run_table  # noqa: E402
from jitlab.errors import ConfigError  # noqa: E402
from jitlab.export import EXPORT_MARKER  # noqa: E402
from jitlab.store import load  # noqa: E402
from jitlab.viz import engineer as E  # noqa: E402


@requires_bwrap
def test_an_exported_table_reads_back_as_the_table_did(tmp_path, capsys):
    src, out = tmp_path / "table", tmp_path / "results" / "eng"
    run_table(TableConfig(suite="toy", harness="react", engineers="rules", backbone="scripted:pick-hash", batch=2,
                          k=2, test=1, concurrency=2, out=str(src), quiet=True))
    assert main(["engineer", "export", str(src), "--out", str(out)]) == 0
    assert "1 loop(s)" in capsys.readouterr().out

    loop, exported = E.table_loops(src, "react")["rules"], E.table_loops(out, "react")["rules"]
    assert exported == out / "react" / "rules" and E.packet(exported) == E.packet(loop)
    assert E.table_cells(out).equals(E.table_cells(src))
    cands = E.candidates(exported)
    assert len(cands) == 2 and E.candidates(loop)["delta"].tolist() == cands["delta"].tolist()
    hooks = {p.parent.name[:12] for p in exported.glob("patches/*/hooks.py")}   # candidates name a patch by 12 hex
    assert set(cands["sha"]) <= hooks
    run = E.candidate_run(exported, E.best_candidate(cands))   # the candidate's run, found in the export
    assert (run / EXPORT_MARKER).is_file() and len(load(run)["episodes"]) == 2
    for part in ("round0/base", "disjoint/base", "test/base"):
        assert (exported / part / EXPORT_MARKER).is_file()

    (tmp_path / "empty").mkdir()
    assert main(["engineer", "export", str(tmp_path / "empty"), "--out", str(tmp_path / "elsewhere")]) == 2
    assert "holds no engineer loop" in capsys.readouterr().err
    with pytest.raises(ConfigError, match="inside the folder being exported"):
        export_engineer(src, src / "export")
    assert not (tmp_path / "elsewhere").exists() and not (src / "export").exists()
