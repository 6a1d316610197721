"""Runs ``examples/tour.ipynb`` top to bottom and stores its outputs in the file.

No Jupyter is needed: each code cell runs in one shared namespace, as a kernel would run it;
what it prints becomes a ``stream`` output, and its last expression an ``execute_result``
with ``text/plain`` and, when the value has one, ``text/html`` (the pictures are inline
SVG). The notebook is then readable with its pictures where it is browsed (GitHub renders
stored outputs). ``tests/test_notebook.py`` runs the cells the same way and checks that the
stored outputs are what a fresh run gives, so they never go stale.

Usage: ``.venv/bin/python scripts/render_notebook.py [--check]``.
"""

from __future__ import annotations

import ast
import contextlib
import io
import json
import sys
from pathlib import Path
from typing import Any

NOTEBOOK = Path(__file__).resolve().parents[1] / "examples" / "tour.ipynb"


def _lines(text: str) -> list[str]:
    return text.splitlines(keepends=True)


def run_cell(source: str, namespace: dict[str, Any]) -> tuple[str, Any]:
    """Runs one cell: what it printed, and the value of its last expression (or ``None``)."""
    tree = ast.parse(source)
    last = tree.body[-1] if tree.body and isinstance(tree.body[-1], ast.Expr) else None
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        if last is None:
            exec(compile(tree, str(NOTEBOOK), "exec"), namespace)
            return printed.getvalue(), None
        tree.body.pop()
        exec(compile(tree, str(NOTEBOOK), "exec"), namespace)
        assert isinstance(last, ast.Expr)
        value = eval(compile(ast.Expression(last.value), str(NOTEBOOK), "eval"), namespace)
    return printed.getvalue(), value


def outputs_of(printed: str, value: Any, count: int) -> list[dict[str, Any]]:
    """The cell's outputs in nbformat 4."""
    outputs: list[dict[str, Any]] = []
    if printed:
        outputs.append({"output_type": "stream", "name": "stdout", "text": _lines(printed)})
    if value is not None:
        data: dict[str, Any] = {"text/plain": _lines(repr(value))}
        html = getattr(value, "_repr_html_", None)
        if callable(html):
            data["text/html"] = _lines(html())
        outputs.append(
            {
                "output_type": "execute_result",
                "execution_count": count,
                "data": data,
                "metadata": {},
            }
        )
    return outputs


def rendered(notebook: dict[str, Any]) -> dict[str, Any]:
    """A copy of ``notebook`` with every code cell run and its outputs stored."""
    namespace: dict[str, Any] = {"__name__": "__main__"}
    count = 0
    cells = []
    for cell in notebook["cells"]:
        cell = dict(cell)
        if cell["cell_type"] == "code":
            count += 1
            printed, value = run_cell("".join(cell["source"]), namespace)
            cell["outputs"] = outputs_of(printed, value, count)
            cell["execution_count"] = count
        cells.append(cell)
    return {**notebook, "cells": cells}


def main(argv: list[str]) -> int:
    notebook = json.loads(NOTEBOOK.read_text())
    fresh = rendered(notebook)
    if "--check" in argv:
        if fresh != notebook:
            print(f"{NOTEBOOK} has stale outputs: run scripts/render_notebook.py", file=sys.stderr)
            return 1
        return 0
    NOTEBOOK.write_text(json.dumps(fresh, indent=1, ensure_ascii=False) + "\n")
    print(f"wrote {NOTEBOOK} with the outputs of {sum(1 for _ in fresh['cells'])} cells")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
