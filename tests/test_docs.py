"""The repository stands alone: every relative link in its Markdown resolves to a file inside it."""
import re
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
_LINK = re.compile(r"\]\(([^)\s#]+)(?:#[^)]*)?\)")


def _tracked(pattern: str) -> list[Path]:
    try:
        out = subprocess.run(["git", "ls-files", pattern], cwd=REPO, capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout")
    return [REPO / line for line in out.splitlines() if line]


def test_markdown_links_stay_inside_the_repository():
    bad = []
    for md in _tracked("*.md"):
        for target in _LINK.findall(md.read_text(errors="replace")):
            if re.match(r"^[a-z][a-z0-9+.-]*:", target):      # http:, https:, mailto:
                continue
            path = (md.parent / target).resolve()
            if not path.is_relative_to(REPO) or not path.exists():
                bad.append(f"{md.relative_to(REPO)} -> {target}")
    assert not bad, "links that leave the repository or name no file: " + "; ".join(bad)


def test_architecture_doc_is_linked_from_the_readme():
    assert "](docs/architecture.md)" in (REPO / "README.md").read_text()
    assert "../shared" not in (REPO / "README.md").read_text()
