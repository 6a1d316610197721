"""Every example of the README and of docs/ runs as written and prints what its page shows.

A page's ```python block is run in a fresh namespace; when a ```text block follows it, what
the block printed must match that text (``...`` matches anything, as in doctest's ELLIPSIS).
A block that prints must show its output, unless its first line is ``# Output depends on the
machine.`` (the NVML example: it talks to the driver). The modules' doctests run too, and
every link between the pages leads to a page and a heading that exist.
"""

from __future__ import annotations

import contextlib
import doctest
import io
import re
from pathlib import Path
from types import ModuleType

import pytest

import gangplace
import gangplace._quick
import gangplace.k8s.build
import gangplace.reference
import gangplace.scheduler.core
import gangplace.slurm
import gangplace.synth

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BLOCK = re.compile(r"```python\n(.*?)```\n(?:\n*```text\n(.*?)```\n)?", re.S)
MACHINE = "# Output depends on the machine."
# The examples each page had when the README was split into docs/ (issue 43): 35 Python
# blocks, all in the README; none may be lost.
AT_LEAST = {
    "README.md": 1,
    "placement.md": 1,
    "shapes.md": 3,
    "resources.md": 2,
    "roles.md": 4,
    "transactions.md": 3,
    "repair.md": 5,
    "preemption.md": 3,
    "scheduler.md": 1,
    "queues.md": 15,  # issue 46: one example per difference from Kueue (KU1-KU13)
    "command-line.md": 1,
    "fgd.md": 1,
    "kubernetes.md": 4,
    "nvml.md": 1,
    "slurm.md": 4,
    "ray.md": 2,
}


def _examples() -> list[tuple[str, int, str, str | None]]:
    found = []
    for page in PAGES:
        for index, match in enumerate(BLOCK.finditer(page.read_text())):
            found.append((page.name, index, match.group(1), match.group(2)))
    return found


EXAMPLES = _examples()


def _run(code: str, name: str) -> str:
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(code, name, "exec"), {"__name__": "__doc_example__"})
    return printed.getvalue()


@pytest.mark.parametrize(
    ("page", "index", "code", "shown"),
    [
        # docs/ray.md starts a local Ray: in the one pytest worker that runs tests/test_ray.py
        pytest.param(*example, marks=pytest.mark.xdist_group("ray"))
        if example[0] == "ray.md"
        else example
        for example in EXAMPLES
    ],
    ids=[f"{page}-{index}" for page, index, _, _ in EXAMPLES],
)
def test_the_example_prints_what_its_page_shows(
    page: str, index: int, code: str, shown: str | None
) -> None:
    printed = _run(code, f"{page} example {index}")
    if code.startswith(MACHINE):
        return
    if shown is None:
        assert printed == "", f"{page} example {index} prints, but its page shows no output"
        return
    checker = doctest.OutputChecker()
    assert checker.check_output(shown, printed, doctest.ELLIPSIS), (
        f"{page} example {index} printed:\n{printed}\nits page shows:\n{shown}"
    )


def test_no_example_was_lost_in_the_move() -> None:
    counts: dict[str, int] = {}
    for page, _, _, _ in EXAMPLES:
        counts[page] = counts.get(page, 0) + 1
    short = {page: (counts.get(page, 0), least) for page, least in AT_LEAST.items()}
    assert {page: pair for page, pair in short.items() if pair[0] < pair[1]} == {}
    assert len(EXAMPLES) >= 35


def test_the_checker_sees_a_wrong_output() -> None:
    checker = doctest.OutputChecker()
    assert not checker.check_output("rack ('r1',)\n", "rack ('r2',)\n", doctest.ELLIPSIS)
    assert checker.check_output(
        "gang ... does not fit\n", "gang x does not fit\n", doctest.ELLIPSIS
    )


def _anchor(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower().replace("`", ""))
    return text.replace(" ", "-")


def _anchors(page: Path) -> set[str]:
    text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)
    return {_anchor(heading) for heading in re.findall(r"^#+ (.+)$", text, flags=re.M)}


def test_every_link_between_the_pages_leads_somewhere() -> None:
    broken = []
    for page in PAGES:
        text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if re.match(r"[a-z]+:", target):
                continue
            path, _, fragment = target.partition("#")
            destination = (page.parent / path).resolve() if path else page
            if not destination.exists():
                broken.append(f"{page.name}: {target}")
            elif fragment and destination.suffix == ".md" and fragment not in _anchors(destination):
                broken.append(f"{page.name}: {target} (no such heading)")
    assert broken == []


def test_the_index_lists_every_page() -> None:
    index = (ROOT / "docs" / "README.md").read_text()
    pages = {page.name for page in (ROOT / "docs").glob("*.md")} - {"README.md"}
    assert len(pages) >= 18
    assert {page for page in pages if f"]({page})" not in index} == set()


def test_the_readme_is_a_front_door() -> None:
    """Issue 43: at most ~400 lines, the two commands, and a link to every page."""
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 400
    assert "bash scripts/example.sh" in readme and "bash scripts/test.sh" in readme
    pages = {page.name for page in (ROOT / "docs").glob("*.md")} - {"README.md"}
    assert {page for page in pages if f"docs/{page}" not in readme} == set()


@pytest.mark.parametrize(
    "module",
    [
        gangplace,
        gangplace._quick,
        gangplace.k8s.build,
        gangplace.reference,
        gangplace.scheduler.core,
        gangplace.slurm,
        gangplace.synth,
    ],
)
def test_doctests(module: ModuleType) -> None:
    result = doctest.testmod(module)
    assert result.attempted > 0
    assert result.failed == 0
