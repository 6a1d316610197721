"""The example notebook runs: every code cell in order, in one namespace, as a kernel would.

No Jupyter is needed: the cells are read from the notebook's JSON and executed; a cell's last
expression is evaluated and rendered the way a notebook would (``_repr_html_`` when there is
one), so the pictures are exercised too.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path
from typing import Any

NOTEBOOK = Path(__file__).resolve().parents[1] / "examples" / "tour.ipynb"


def _run_cell(source: str, namespace: dict[str, Any]) -> Any:
    tree = ast.parse(source)
    last = tree.body[-1] if tree.body else None
    if not isinstance(last, ast.Expr):
        exec(compile(tree, str(NOTEBOOK), "exec"), namespace)
        return None
    tree.body.pop()
    exec(compile(tree, str(NOTEBOOK), "exec"), namespace)
    return eval(compile(ast.Expression(last.value), str(NOTEBOOK), "eval"), namespace)


def test_the_tour_notebook_runs_top_to_bottom(capsys: Any) -> None:
    notebook = json.loads(NOTEBOOK.read_text())
    assert notebook["nbformat"] == 4
    namespace: dict[str, Any] = {"__name__": "__main__"}
    shown = []
    for cell in notebook["cells"]:
        if cell["cell_type"] != "code":
            continue
        assert cell["outputs"] == [], "keep the notebook without outputs"
        value = _run_cell("".join(cell["source"]), namespace)
        if value is not None:
            html = getattr(value, "_repr_html_", None)
            shown.append(html() if callable(html) else repr(value))
    printed = capsys.readouterr().out
    assert "rack ('s0', 's0-r1') ('s0-r1-n0', 's0-r1-n1', 's0-r1-n2', 's0-r1-n3')" in printed
    assert "does not fit" in printed
    assert "nodes with 8 free GPUs" in printed
    assert "pod-by-pod" in printed and "SYNTHETIC" in printed
    assert shown[0].startswith("<") and "<svg" in shown[0]  # the cluster's rack map
    assert "<svg" in shown[1]  # the placement, highlighted
    assert shown[2] == "([('big', False), ('short', True)], 'blocked')"
