"""The README and the pages under docs/: every relative link points to a file that exists and,
for an ``#anchor`` into a Markdown file, to a heading of that file (GitHub's anchors); every code block runs."""

from __future__ import annotations

import contextlib
import os
import pathlib
import re
import shutil
import signal
import subprocess
import sys
from dataclasses import dataclass

import pytest

ROOT = pathlib.Path(__file__).parents[1]
SHARED_DATA = pathlib.Path(os.environ.get("DPIPE_SHARED_DATA", ROOT.parent / "shared" / "data"))
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


# ---------------------------------------------------------------------------------
# every code block runs (issue 43)
# ---------------------------------------------------------------------------------
# A small collector of our own rather than Sybil, pytest-examples or phmdoctest: the blocks must run as a reader runs
# them, a shell block through bash and a Python block saved as a script and run by a fresh interpreter (the crash
# of issue 43, a LocalCluster started without `if __name__ == "__main__":`, only shows in a script), each page's blocks
# in order in one folder of their own; those runners execute Python blocks inside the pytest process (Sybil,
# pytest-examples) or only Python and doctest blocks (phmdoctest), so what they would add is the fence parsing below.
#
# A page's blocks run in order in TMP/work, with the bundled data at TMP/shared/data (../shared/data from there, as
# beside a clone), `dpipe` of this interpreter first on PATH and the ingest cache in TMP/cache. A block marked
# `<!-- docs-test: slow -->` on the line before it (a cluster, or the full kdd99 files) runs in the slow tier, in its
# place; no later block may need its files. `<!-- docs-test: ci -->` marks the README's Quick start: .ci/run runs
# those commands itself (a test checks that it does). Shell blocks run with `set -euo pipefail`; a YAML block is a
# configuration, read with yaml.safe_load. Any other language is an error, so no block goes unrun.
BLOCK = re.compile(r"^(?:<!-- docs-test: (?P<mark>[a-z]+) -->\n)?```(?P<lang>[a-z]*)[^\n]*\n(?P<code>.*?)^```[ \t]*$", re.S | re.M)
SHELLS, PYTHON, CONFIG = ("bash", "sh"), ("python",), ("yaml",)
#: seconds a block may take before it fails (a fast block on this 2-core machine takes 1-20 s)
TIMEOUT = {"fast": 300, "slow": 1200}


@dataclass(frozen=True)
class Block:
    page: str
    index: int
    line: int
    lang: str
    mark: str
    code: str

    @property
    def id(self) -> str:
        return f"{self.page}:{self.line}"


def blocks(path: pathlib.Path) -> list[Block]:
    """The fenced code blocks of ``path``, with their language and mark (``fast`` unless marked)."""
    text = path.read_text(encoding="utf-8")
    page = str(path.relative_to(ROOT))
    return [Block(page, i, text.count("\n", 0, m.start("lang")) + 1, m.group("lang"), m.group("mark") or "fast", m.group("code"))
            for i, m in enumerate(BLOCK.finditer(text))]


BLOCKS = [b for p in PAGES for b in blocks(p)]
RUN = [b for b in BLOCKS if b.mark != "ci"]


def test_every_block_is_collected_with_a_language_this_test_runs():
    fences = sum(len(FENCE.findall(p.read_text(encoding="utf-8"))) for p in PAGES)
    assert len(BLOCKS) == fences  # no fence the block pattern misses
    unknown = [f"{b.id} ```{b.lang}" for b in BLOCKS if b.lang not in SHELLS + PYTHON + CONFIG]
    assert not unknown, f"blocks in a language the docs test does not run: {unknown}"
    assert {b.mark for b in BLOCKS} <= {"fast", "slow", "ci"}
    assert [b.page for b in BLOCKS if b.mark == "ci"] == ["README.md"]


def test_ci_runs_the_quick_start_commands():
    """The README's Quick start is what .ci/run runs, line for line, in a fresh virtual environment."""
    (quick,) = [b for b in BLOCKS if b.mark == "ci"]
    ci = [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()]
    commands = [line.strip() for line in quick.code.splitlines() if line.strip()]
    assert len(commands) == 2 and all(c in ci for c in commands), (commands, ci)


@pytest.fixture(scope="module")
def pages(tmp_path_factory):
    """One folder per page: ``{page: TMP/work}`` with ``TMP/shared/data`` beside it."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"bundled data not found at {SHARED_DATA}")
    folders: dict[str, pathlib.Path] = {}
    yield folders, tmp_path_factory
    for folder in folders.values():
        shutil.rmtree(folder.parent, ignore_errors=True)


def _folder(pages, page: str) -> pathlib.Path:
    folders, factory = pages
    if page not in folders:
        top = factory.mktemp(page.replace("/", "-").replace(".md", ""))
        (top / "shared").mkdir()
        (top / "shared" / "data").symlink_to(SHARED_DATA.resolve(), target_is_directory=True)
        (top / "work").mkdir()
        folders[page] = top / "work"
    return folders[page]


def _environment(work: pathlib.Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DPIPE_", "DASK_", "PYTEST_"))}
    env["PATH"] = os.pathsep.join([os.path.dirname(sys.executable), env.get("PATH", "")])
    env["DASK_DPIPE__INGEST_CACHE"] = str(work.parent / "cache")
    env["MPLBACKEND"] = "Agg"
    return env


def _run(block: Block, work: pathlib.Path) -> None:
    if block.lang in CONFIG:
        import yaml

        assert isinstance(yaml.safe_load(block.code), dict), f"{block.id}: not a YAML mapping"
        return
    if block.lang in PYTHON:
        script = work / f"block-{block.index}.py"
        script.write_text(block.code)
        argv = [sys.executable, script.name]
    else:
        argv = ["bash", "-c", "set -euo pipefail\n" + block.code]
    proc = subprocess.Popen(argv, cwd=work, env=_environment(work), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=TIMEOUT[block.mark])
    except subprocess.TimeoutExpired:
        out = "(timed out)"
    finally:
        with contextlib.suppress(ProcessLookupError):  # whatever the block left running (a background scheduler)
            os.killpg(proc.pid, signal.SIGTERM)
        proc.wait()
    assert proc.returncode == 0, f"{block.id} ({block.lang} block) failed with status {proc.returncode}:\n{block.code}\n--- output ---\n{out[-6000:]}"


@pytest.mark.parametrize("block", [pytest.param(b, id=b.id, marks=[pytest.mark.slow] if b.mark == "slow" else []) for b in RUN])
def test_the_block_runs(pages, block):
    _run(block, _folder(pages, block.page))
