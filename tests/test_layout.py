"""The core's modules import each other without cycles (issue 29), checked from the source.

Each ``.rs`` file of ``rust/gangplace-core/src`` is a module (``mod.rs`` is its folder's). A
use of ``crate::a::b`` or ``super::x`` is an edge from the file's module to the module it
names; an edge counts in the folder that holds both ends, between that folder's two children
that contain them. In every folder the children must form a DAG. Comments and
``#[cfg(test)]`` modules are left out, and so is ``testing/`` (test machinery).
"""

from __future__ import annotations

import re
from collections import defaultdict
from pathlib import Path

import pytest

CORE = Path(__file__).resolve().parent.parent / "rust/gangplace-core/src"


def _module(path: Path) -> tuple[str, ...]:
    parts = path.relative_to(CORE).with_suffix("").parts
    if parts[-1] in ("mod", "lib"):
        parts = parts[:-1]
    return tuple(parts)


def _edges() -> list[tuple[tuple[str, ...], tuple[str, ...]]]:
    modules = {_module(path) for path in CORE.rglob("*.rs")}
    edges = []
    for path in sorted(CORE.rglob("*.rs")):
        source = path.read_text()
        source = source.split("#[cfg(test)]\nmod tests", 1)[0]
        source = re.sub(r"//.*", "", source)
        me = _module(path)
        if me[:1] == ("testing",):
            continue
        # a file's super is its parent module (for mod.rs, the folder's parent)
        parent = me[:-1]
        for chain in re.findall(r"\b((?:crate|super)(?:::\w+)+)", source):
            names = chain.split("::")
            base = () if names[0] == "crate" else parent
            target = (*base, *names[1:])
            while target and target not in modules:
                target = target[:-1]  # an item inside a module
            if target and target != me and target[:1] != ("testing",):
                edges.append((me, target))
    return edges


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one member."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for other in sorted(graph.get(node, ())):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def _per_folder() -> dict[tuple[str, ...], dict[str, set[str]]]:
    folders: dict[tuple[str, ...], dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
    for source, target in _edges():
        common = 0
        while common < min(len(source), len(target)) and source[common] == target[common]:
            common += 1
        if common == len(source) or common == len(target):
            continue  # a module and its own submodule
        folders[source[:common]][source[common]].add(target[common])
    return folders


def test_the_checker_sees_the_core() -> None:
    folders = _per_folder()
    assert len(_edges()) > 100
    assert "engine" in folders[()] and "search" in folders[()]["engine"]


def test_no_import_cycle_in_any_folder_of_the_core() -> None:
    cycles = {
        "/".join(folder) or "src": found
        for folder, graph in _per_folder().items()
        if (found := _cycles(graph))
    }
    assert cycles == {}


def test_a_cycle_would_be_seen() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


LIMIT = 600
ROOT = CORE.parent.parent.parent
LENGTH_CHECKED = (
    ("rust/gangplace-core/src", "*.rs"),
    ("rust/gangplace-core/tests", "*.rs"),
    ("rust/gangplace-py/src", "*.rs"),
    ("python/gangplace/reference", "*.py"),
)


def test_every_file_of_the_core_binding_and_reference_is_short() -> None:
    """At most 600 lines a file (issue 29); the stub ``_gangplace.pyi`` is not checked."""
    long = {
        str(path.relative_to(ROOT)): lines
        for folder, pattern in LENGTH_CHECKED
        for path in sorted((ROOT / folder).rglob(pattern))
        if (lines := len(path.read_text().splitlines())) > LIMIT
    }
    assert sum(1 for folder, pattern in LENGTH_CHECKED for _ in (ROOT / folder).rglob(pattern)) > 80
    assert long == {}


PACKAGE = ROOT / "python" / "gangplace"


def _python_imports(folder: Path) -> dict[str, set[str]]:
    """Module -> the modules of the same folder it imports (``TYPE_CHECKING`` ones too)."""
    package = "gangplace." + ".".join(folder.relative_to(PACKAGE).parts)
    names = {path.stem for path in folder.glob("*.py")}
    graph: dict[str, set[str]] = {}
    for path in sorted(folder.glob("*.py")):
        source = path.read_text()
        found = set(re.findall(rf"from {re.escape(package)}\.(\w+) import", source))
        found |= set(re.findall(rf"^\s*import {re.escape(package)}\.(\w+)", source, re.M))
        found |= {
            name
            for group in re.findall(rf"from {re.escape(package)} import \(?([\w, \n]+)\)?", source)
            for name in re.split(r"[,\s]+", group)
            if name in names
        }
        graph[path.stem] = {name for name in found if name in names and name != path.stem}
    return graph


def test_no_scheduler_helper_imports_the_scheduler() -> None:
    """Issue 43: helpers receive the parts they use, never ``gangplace.scheduler.core``."""
    graph = _python_imports(PACKAGE / "scheduler")
    assert len(graph) > 15 and "cycle" in graph
    assert sorted(name for name, edges in graph.items() if "core" in edges) == ["__init__"]


@pytest.mark.parametrize("folder", ["scheduler", "k8s", "slurm"])
def test_no_import_cycle_in_the_python_adapters_and_scheduler(folder: str) -> None:
    graph = _python_imports(PACKAGE / folder)
    assert graph, folder
    assert _cycles(graph) == []
