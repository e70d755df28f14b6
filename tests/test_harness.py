"""Loading harness folders: clear errors that name the file and what is missing."""
import shutil
from concurrent.futures import ThreadPoolExecutor

import pytest

from jitlab.errors import HarnessError, UnknownName
from jitlab.harness import harness_sha, load_harness, read_files


@pytest.fixture
def react_copy(tmp_path):
    folder = tmp_path / "h"
    shutil.copytree(load_harness("react").folder, folder)
    return folder


def test_missing_file_is_named(react_copy):
    (react_copy / "planning.py").unlink()
    with pytest.raises(HarnessError, match="missing planning.py") as err:
        load_harness(react_copy)
    assert err.value.file == "planning.py"


def test_missing_class_is_named(react_copy):
    (react_copy / "tool_policy.py").write_text("class Policy:\n    pass\n")
    with pytest.raises(HarnessError, match="tool_policy.py: must define a class named CapabilityPolicy"):
        load_harness(react_copy)


def test_missing_method_is_named(react_copy):
    (react_copy / "memory.py").write_text("class Memory:\n    def update(self, e, ctx): pass\n")
    with pytest.raises(HarnessError, match="lacks method.*view") as err:
        load_harness(react_copy)
    assert err.value.kind == "interface_mismatch"


def test_syntax_error_is_a_parse_error_with_line(react_copy):
    (react_copy / "action.py").write_text("class Action:\n    def act(self\n")
    with pytest.raises(HarnessError, match="action.py: syntax error line") as err:
        load_harness(react_copy)
    assert err.value.kind == "parse_error"


def test_bad_yaml(react_copy):
    (react_copy / "prompt.yaml").write_text("- just\n- a list\n")
    with pytest.raises(HarnessError, match="prompt.yaml: must be a mapping"):
        load_harness(react_copy)


def test_unknown_harness_lists_available():
    with pytest.raises(UnknownName, match="available: .*react"):
        load_harness("no-such-harness")


def test_sha_changes_with_content(react_copy):
    before = harness_sha(read_files(react_copy))
    (react_copy / "prompt.yaml").write_text((react_copy / "prompt.yaml").read_text() + "\n# edit\n")
    assert harness_sha(read_files(react_copy)) != before


def test_threads_loading_one_folder_get_whole_modules(react_copy):
    # a slow import: without the loader's lock a second thread finds memory.py half run (no class yet)
    memory = react_copy / "memory.py"
    memory.write_text(memory.read_text().replace("from __future__ import annotations\n",
                                                 "from __future__ import annotations\nimport time\ntime.sleep(0.3)\n", 1))
    with ThreadPoolExecutor(4) as pool:
        loaded = list(pool.map(load_harness, [react_copy] * 4))
    assert {h.classes["memory"].__name__ for h in loaded} == {"Memory"}


def test_symlink_out_of_the_folder_is_refused_by_name(react_copy, tmp_path):
    outside = tmp_path / "secret.yaml"
    outside.write_text("system: the parent must not read this\n")
    (react_copy / "prompt.yaml").unlink()
    (react_copy / "prompt.yaml").symlink_to(outside)
    with pytest.raises(HarnessError, match=r"prompt\.yaml is a symbolic link to .*secret\.yaml, outside the harness"):
        read_files(react_copy)
    with pytest.raises(HarnessError) as err:
        load_harness(react_copy)
    assert err.value.file == "prompt.yaml" and err.value.kind == "import_error"


def test_symlink_inside_the_folder_is_fine(react_copy):
    (react_copy / "notes.yaml").write_text((react_copy / "prompt.yaml").read_text())
    (react_copy / "prompt.yaml").unlink()
    (react_copy / "prompt.yaml").symlink_to("notes.yaml")
    assert read_files(react_copy)["prompt.yaml"] == (react_copy / "notes.yaml").read_text()


def _sparse(path, size: int) -> None:
    with open(path, "wb") as f:
        f.truncate(size)  # a hole: no disk, but a whole read would take `size` bytes of memory


def test_a_harness_file_over_the_cap_is_refused_by_name_without_reading_it(react_copy, tmp_path, capsys):
    """Issue 27 item 4: ``truncate -s 1G h/description.yaml && jitlab run --suite toy --harness h --backbone
    scripted:pick-first`` read the sparse file whole in the trusted parent (2.09 GB); now one line names it."""
    from jitlab.cli import main
    from jitlab.harness import MAX_FILE_BYTES
    _sparse(react_copy / "description.yaml", 64 * MAX_FILE_BYTES)
    limit = r"description.yaml: 67108864 bytes in harness folder .*, over the 1048576-byte limit"
    with pytest.raises(HarnessError, match=limit) as err:
        read_files(react_copy)
    assert err.value.file == "description.yaml"
    out = tmp_path / "run"
    rc = main(["run", "--suite", "toy", "--harness", str(react_copy), "--backbone", "scripted:pick-first", "--out",
               str(out), "--no-cache", "--quiet"])
    lines = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(lines) == 1 and "description.yaml" in lines[0] and "limit" in lines[0], lines
    assert not out.exists()  # refused before anything is written


def test_a_harness_folder_over_the_total_cap_is_refused(react_copy):
    """Issue 27 item 4: files each under the per-file cap but together over ``MAX_FOLDER_BYTES`` are refused too."""
    from jitlab.harness import MAX_FILE_BYTES, MAX_FOLDER_BYTES
    for name in ("memory.py", "planning.py", "tool_policy.py", "action.py", "prompt.yaml"):
        _sparse(react_copy / name, MAX_FILE_BYTES)
    assert 5 * MAX_FILE_BYTES > MAX_FOLDER_BYTES
    with pytest.raises(HarnessError, match=rf"holds \d+ bytes in its harness files, over the {MAX_FOLDER_BYTES}-byte"):
        read_files(react_copy)
    assert len(read_files(load_harness("react").folder)) >= 6  # a real harness is far below both caps
