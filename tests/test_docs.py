"""The README and the pages under docs/: every relative link points to a file that exists and,
for an ``#anchor`` into a Markdown file, to a heading of that file (GitHub's anchors)."""

from __future__ import annotations

import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

FENCE = re.compile(r"^(```|~~~).*?^\1[^\n]*$", re.S | re.M)
CODE_SPAN = re.compile(r"(`+)(?:(?!\1).)+?\1", re.S)
LINK = re.compile(r"!?\[[^\]]*\]\(([^()\s]+)(?:\s+\"[^\"]*\")?\)")
HEADING = re.compile(r"^#{1,6}[ \t]+(.+?)[ \t#]*$", re.M)


def _prose(text: str) -> str:
    """The text without fenced code blocks (a ``# comment`` in a bash block is no heading)."""
    return FENCE.sub("", text)


def anchor(heading: str) -> str:
    """GitHub's anchor of a heading: lowercase, punctuation other than '-' and '_' dropped, spaces to '-'."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link in a heading: its text
    return re.sub(r"[^\w\- ]", "", text.strip().lower()).replace(" ", "-")


def anchors(path: pathlib.Path) -> set[str]:
    """Every heading's anchor in ``path``, with GitHub's ``-1``, ``-2`` suffixes for repeats."""
    seen: dict[str, int] = {}
    out = set()
    for m in HEADING.finditer(_prose(path.read_text(encoding="utf-8"))):
        a = anchor(m.group(1))
        n = seen.get(a, 0)
        seen[a] = n + 1
        out.add(a if n == 0 else f"{a}-{n}")
    return out


def links(path: pathlib.Path) -> list[str]:
    """The targets of the inline links and images of ``path``, outside code."""
    text = CODE_SPAN.sub("", _prose(path.read_text(encoding="utf-8")))
    return [m.group(1) for m in LINK.finditer(text)]


def test_the_anchor_rule():
    assert anchor("`dpipe evaluate --json`") == "dpipe-evaluate---json"
    assert anchor("Train, evaluate, predict") == "train-evaluate-predict"
    assert anchor("SVM-perf's losses") == "svm-perfs-losses"
    assert anchor("The `k_fraction` rule") == "the-k_fraction-rule"


def test_code_is_not_read_for_links_or_headings(tmp_path):
    page = tmp_path / "p.md"
    page.write_text("# Title\n\n```bash\n# a comment\n```\n\n`[not](a-link.md)` and [a](b.md#title)\n")
    assert anchors(page) == {"title"}
    assert links(page) == ["b.md#title"]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_points_to_what_exists(page):
    broken = []
    for target in links(page):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I):  # https:, mailto:, ...
            continue
        path, _, frag = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        if not dest.exists():
            broken.append(f"{target}: no such file {dest}")
        elif frag and dest.suffix == ".md" and frag not in anchors(dest):
            broken.append(f"{target}: {dest.name} has no heading with the anchor #{frag}")
    assert not broken, f"{page.relative_to(ROOT)}:\n" + "\n".join(broken)


def test_the_pages_have_links_to_check():
    assert len(PAGES) >= 9 and sum(len(links(p)) for p in PAGES) >= 40


def test_the_readme_links_every_docs_page():
    targets = {t.partition("#")[0] for t in links(ROOT / "README.md")}
    missing = [p.name for p in PAGES[1:] if f"docs/{p.name}" not in targets]
    assert not missing, f"README.md does not link {missing}"
