"""The example notebook runs, and its stored outputs are what a fresh run gives.

No Jupyter is needed: ``scripts/render_notebook.py`` reads the cells from the notebook's JSON
and runs them in order in one namespace, as a kernel would; a cell's last expression is
rendered the way a notebook would (``_repr_html_`` when there is one), so the pictures are
exercised too. The notebook is stored with those outputs (pictures included) so that a
reader browsing the repository sees them; this test fails when they go stale.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from helpers import load_script

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK = ROOT / "examples" / "tour.ipynb"


def _renderer() -> Any:
    return load_script("render_notebook")


def _text(output: dict[str, Any], key: str) -> str:
    if output["output_type"] == "stream":
        return "".join(output["text"])
    return "".join(output["data"].get(key, []))


def test_the_tour_notebook_runs_and_its_stored_outputs_are_current() -> None:
    notebook = json.loads(NOTEBOOK.read_text())
    assert notebook["nbformat"] == 4
    fresh = _renderer().rendered(notebook)
    code = [cell for cell in fresh["cells"] if cell["cell_type"] == "code"]
    outputs = [output for cell in code for output in cell["outputs"]]
    printed = "".join(_text(o, "") for o in outputs if o["output_type"] == "stream")
    shown = [
        _text(o, "text/html") or _text(o, "text/plain")
        for o in outputs
        if o["output_type"] == "execute_result"
    ]
    assert "rack ('s0', 's0-r1') ('s0-r1-n0', 's0-r1-n1', 's0-r1-n2', 's0-r1-n3')" in printed
    assert "does not fit" in printed
    assert "nodes with 8 free GPUs" in printed
    assert "pod-by-pod" in printed and "SYNTHETIC" in printed
    assert shown[0].startswith("<") and "<svg" in shown[0]  # the cluster's rack map
    assert "<svg" in shown[1]  # the placement, highlighted
    assert shown[2] == "([('big', False), ('short', True)], 'blocked')"
    assert "blocked 3600.0 ('a', 'b')" in printed  # the head's reservation (docs/scheduler.md S5)
    assert "('short',) [] 1" in printed  # a GPU under it failed: requeued (S13)
    stale = [
        i for i, (a, b) in enumerate(zip(notebook["cells"], fresh["cells"], strict=True)) if a != b
    ]
    assert stale == [], f"cells {stale} have stale outputs: run scripts/render_notebook.py"
