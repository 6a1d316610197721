"""Writes the stub's docstrings into the binding's Rust doc comments (its runtime ``__doc__``).

The stub (``python/gangplace/_gangplace.pyi``) is the one text of every public class and
method docstring; pyo3 turns a Rust item's doc comment into its ``__doc__``. This script
replaces the doc comment of every ``#[pyclass]`` struct and every ``#[pymethods]`` function
that the stub documents with the stub's text, so ``help()`` in a notebook shows what the stub
says. ``tests/test_docstrings.py`` fails when they drift apart; run
``python scripts/sync_docstrings.py`` after editing the stub. Constructors (``#[new]``) and
dunder methods other than ``_repr_html_`` are left as they are.
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STUB = ROOT / "python" / "gangplace" / "_gangplace.pyi"
BINDING = ROOT / "rust" / "gangplace-py" / "src"


def stub_docs() -> dict[str, str]:
    """``"Class"`` and ``"Class.member"`` -> docstring, for every documented stub item."""
    docs: dict[str, str] = {}
    for node in ast.parse(STUB.read_text()).body:
        if not isinstance(node, ast.ClassDef):
            continue
        text = ast.get_docstring(node)
        if text:
            docs[node.name] = text
        for item in node.body:
            if isinstance(item, ast.FunctionDef):
                text = ast.get_docstring(item)
                if text and (not item.name.startswith("_") or item.name == "_repr_html_"):
                    docs[f"{node.name}.{item.name}"] = text
    return docs


def comment(text: str, indent: str) -> list[str]:
    """The docstring as Rust doc-comment lines."""
    return [f"{indent}///{' ' + line if line else ''}" for line in text.split("\n")]


def rewrite(source: str, docs: dict[str, str]) -> tuple[str, list[str]]:
    """The source with its doc comments replaced; and the items it documented."""
    lines = source.split("\n")
    out: list[str] = []
    block: list[str] = []  # doc comments and attributes waiting for their item
    impl: str | None = None
    done: list[str] = []
    in_methods = False
    for line in lines:
        stripped = line.strip()
        if stripped.startswith(("///", "#[")) or (block and not _starts_item(stripped)):
            if stripped == "#[pymethods]":
                in_methods = True
            block.append(line)
            continue
        match_impl = re.match(r"impl (\w+) \{", stripped)
        if match_impl:
            impl = match_impl.group(1) if in_methods else None
            in_methods = False
        key = _item_key(stripped, block, impl)
        if key is not None and key in docs:
            indent = line[: len(line) - len(line.lstrip())]
            block = [b for b in block if not b.strip().startswith("///")]
            block = comment(docs[key], indent) + block
            done.append(key)
        out.extend(block)
        block = []
        out.append(line)
    out.extend(block)
    return "\n".join(out), done


def _starts_item(stripped: str) -> bool:
    return bool(re.match(r"(pub(\(crate\))? )?(struct|fn|impl|enum|const|mod|use) ", stripped))


def _item_key(stripped: str, block: list[str], impl: str | None) -> str | None:
    attributes = " ".join(b.strip() for b in block)
    match_struct = re.match(r"pub struct (\w+)", stripped)
    if match_struct and "#[pyclass" in attributes:
        return match_struct.group(1)
    match_fn = re.match(r"(pub(\(crate\))? )?fn (\w+)", stripped)
    if match_fn and impl is not None and "#[new]" not in attributes:
        name = match_fn.group(3)
        renamed = re.search(r'name = "(\w+)"', attributes)
        return f"{impl}.{renamed.group(1) if renamed else name}"
    return None


def main() -> int:
    """Rewrites the binding's sources; prints what changed."""
    docs = stub_docs()
    seen: set[str] = set()
    for path in sorted(BINDING.glob("*.rs")):
        before = path.read_text()
        after, done = rewrite(before, docs)
        seen.update(done)
        if after != before:
            path.write_text(after)
            print(f"sync_docstrings: rewrote {path.relative_to(ROOT)}")
    missing = sorted(set(docs) - seen)
    if missing:
        print("sync_docstrings: no Rust item for: " + ", ".join(missing), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
