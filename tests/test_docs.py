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


def test_the_manual_is_one_page_per_task_and_its_index_links_each():
    """docs/usage/ (issue 44): README.md links the index, the index links every page, every page links back."""
    usage = REPO / "docs" / "usage"
    pages = sorted(p.name for p in usage.glob("*.md") if p.name != "README.md")
    assert len(pages) >= 8, pages
    assert "](docs/usage/README.md)" in (REPO / "README.md").read_text()
    index = (usage / "README.md").read_text()
    assert not [p for p in pages if f"]({p})" not in index], "pages the index does not link"
    assert not [p for p in pages if "](README.md)" not in (usage / p).read_text()], "pages with no link to the index"
    assert not (REPO / "docs" / "usage.md").exists()
    stale = [str(md.relative_to(REPO)) for md in _tracked("*.md")
             if "docs/usage.md" in md.read_text(errors="replace") or "](usage.md" in md.read_text(errors="replace")]
    assert not stale, f"links to the old one-page manual: {stale}"
