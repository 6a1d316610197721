"""Runtime docstrings: every public class and method of the extension documents itself.

``help(gangplace.Cluster.reserve)`` in a notebook must show what the stub says. The stub is
the one text; ``scripts/sync_docstrings.py`` writes it into the binding's doc comments, and
this test fails when the two drift apart or when a public member has no docstring at all.
"""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest

import gangplace._gangplace as extension

STUB = Path(__file__).resolve().parents[1] / "python" / "gangplace" / "_gangplace.pyi"


def _members() -> list[tuple[str, str | None]]:
    members = []
    for node in ast.parse(STUB.read_text()).body:
        if not isinstance(node, ast.ClassDef):
            continue
        members.append((node.name, ast.get_docstring(node)))
        for item in node.body:
            if not isinstance(item, ast.FunctionDef):
                continue
            if not item.name.startswith("_") or item.name == "_repr_html_":
                members.append((f"{node.name}.{item.name}", ast.get_docstring(item)))
    return members


MEMBERS = _members()


def test_every_public_member_has_a_stub_docstring() -> None:
    assert len(MEMBERS) > 100
    assert [name for name, doc in MEMBERS if not doc] == []


@pytest.mark.parametrize(("name", "stub"), MEMBERS, ids=[name for name, _ in MEMBERS])
def test_the_runtime_docstring_is_the_stubs(name: str, stub: str | None) -> None:
    obj: object = extension
    for part in name.split("."):
        obj = getattr(obj, part)
    runtime = inspect.getdoc(obj)
    assert runtime == stub, (
        f"run `python scripts/sync_docstrings.py` after editing the stub ({name})"
    )
