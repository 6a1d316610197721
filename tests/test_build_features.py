"""The test machinery stays out of a default build.

The test command builds the extension with the cargo feature ``testing`` (for the
failpoint); this builds the binding again without it (a debug build, into ``target/``), loads
it in a fresh interpreter next to a copy of the Python package, and checks that the
failpoint is not there, while the rest of the extension works.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

import gangplace
from gangplace import Cluster

ROOT = Path(__file__).resolve().parents[1]


def test_the_test_build_has_the_failpoint() -> None:
    assert hasattr(Cluster, "_set_failpoint")


@pytest.mark.skipif(shutil.which("cargo") is None, reason="needs cargo to build the binding")
def test_a_default_build_has_no_failpoint(tmp_path: Path) -> None:
    built = subprocess.run(
        ["cargo", "build", "--quiet", "-p", "gangplace-py", "--message-format=json"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    libraries = [
        filename
        for line in built.stdout.splitlines()
        if line.startswith("{")
        for message in [json.loads(line)]
        if message.get("reason") == "compiler-artifact"
        and message["target"]["name"] == "_gangplace"
        for filename in message["filenames"]
        if filename.endswith((".so", ".dylib", ".pyd"))
    ]
    assert libraries, built.stdout[-2000:]
    package = tmp_path / "gangplace"
    shutil.copytree(Path(gangplace.__file__).parent, package, ignore=shutil.ignore_patterns("*.so"))
    suffix = sysconfig.get_config_var("EXT_SUFFIX")
    shutil.copy(libraries[0], package / f"_gangplace{suffix}")
    probe = (
        "import gangplace, gangplace._gangplace as native\n"
        f"assert native.__file__.startswith({str(tmp_path)!r}), native.__file__\n"
        "c = gangplace.Cluster(('rack',))\n"
        "c.add_node('a', gpus=8, topology={'rack': 'r'})\n"
        "assert c.place_gang(gangplace.GangRequest(1, 8)) is not None\n"
        "print(hasattr(gangplace.Cluster, '_set_failpoint'))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=tmp_path,
        env={"PYTHONPATH": str(tmp_path), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        check=True,
    )
    assert result.stdout.strip() == "False"
