"""GPUs per node from ``slurm.conf`` and ``gres.conf`` (docs/slurm.md)."""

from __future__ import annotations

import shlex
import warnings
from pathlib import Path

from gangplace.slurm.text import SlurmError, _hosts

# Include files nested deeper than this are refused (a cycle, most likely).
MAX_INCLUDE_DEPTH = 16


class SlurmConfWarning(UserWarning):
    """Something in a Slurm config that gangplace cannot count, named by file and line."""


def _conf_fields(line: str, where: str) -> dict[str, str]:
    """``Key=Value`` tokens (quotes as the shell reads them), keys lower-cased."""
    try:
        tokens = shlex.split(line)
    except ValueError as error:
        raise SlurmError(f"{where}: {error}") from None
    fields = {}
    for token in tokens:
        key, equals, value = token.partition("=")
        if not equals:
            raise SlurmError(f"{where}: expected Key=Value, got {token!r}")
        fields[key.lower()] = value
    return fields


def _gres_gpus(gres: str, where: str) -> int:
    """GPUs of a ``Gres=`` list: ``gpu``, ``gpu:8``, ``gpu:h100:8``, ``gpu:a100:4(S:0-1)``."""
    total = 0
    for item in gres.split(","):
        item = item.split("(", 1)[0].strip()
        parts = item.split(":")
        if parts[0] != "gpu":
            continue
        count = parts[-1] if len(parts) > 1 and parts[-1].isdigit() else None
        if count is None and len(parts) == 3:
            raise SlurmError(f"{where}: Gres item {item!r}: the count is not a number")
        total += 1 if count is None else int(count)
    return total


def _files_count(files: str, where: str) -> int:
    """Devices of ``File=/dev/nvidia[0-7]`` (a hostlist-style range; commas list several)."""
    return len(_hosts(files, where))


def _read(text: str, filename: str, base: Path | None, depth: int) -> list[tuple[str, str]]:
    """The config's lines with ``Include`` files inlined, each with ``file:line``."""
    lines: list[tuple[str, str]] = []
    for number, raw in enumerate(text.splitlines(), start=1):
        where = f"{filename}:{number}"
        line = raw.split("#", 1)[0].strip()
        keyword, _, rest = line.partition(" ")
        if keyword.lower() != "include":
            if line:
                lines.append((where, line))
            continue
        target = rest.strip()
        if not target:
            raise SlurmError(f"{where}: Include without a file")
        if base is None and not Path(target).is_absolute():
            raise SlurmError(f"{where}: Include {target}: pass base_dir to follow it")
        if depth >= MAX_INCLUDE_DEPTH:
            raise SlurmError(f"{where}: Include {target}: nested more than {depth} deep")
        path = Path(target) if Path(target).is_absolute() else (base or Path()) / target
        try:
            included = path.read_text()
        except OSError as error:
            raise SlurmError(f"{where}: Include {target}: {error.strerror or error}") from None
        lines.extend(_read(included, str(path), path.parent, depth + 1))
    return lines


def gpus_from_conf(
    text: str, *, filename: str = "slurm.conf", base_dir: str | Path | None = None
) -> dict[str, int]:
    """GPUs per node from ``slurm.conf`` or ``gres.conf`` text (docs/slurm.md).

    - ``NodeName=... Gres=gpu:8`` (``slurm.conf``): typed GRES (``gpu:h100:8``), several
      GRES per line (their GPUs add up), socket bindings (``gpu:4(S:0-1)``), ``gpu`` alone
      (one GPU); node hostlists (``a[1-4]``). ``NodeName=DEFAULT`` sets what the node lines
      after it leave out, until the next ``DEFAULT`` line. A node line without a GPU GRES
      (and no default) is a CPU node: not listed.
    - ``NodeName=... Name=gpu`` (``gres.conf``): ``Count=N``, else the devices of
      ``File=/dev/nvidia[0-7]``, else one; several lines for one node add up. A line without
      ``NodeName`` (the reading node's own) and ``AutoDetect`` (counts found at run time)
      cannot be counted here: a :class:`SlurmConfWarning` names them.
    - ``Include file``: followed relative to ``base_dir`` (absolute paths as they are).

    Args:
        text: The file's text.
        filename: Its name, for messages.
        base_dir: Where relative ``Include`` files are (the file's directory).

    Raises:
        SlurmError: A malformed line, an unreadable or unfollowable ``Include``, or a GPU
            count that is not a number, naming the file and line.

    """
    base = None if base_dir is None else Path(base_dir)
    gpus: dict[str, int] = {}
    defaults: dict[str, str] = {}
    for where, line in _read(text, filename, base, 0):
        fields = _conf_fields(line, where)
        if "autodetect" in fields and "nodename" not in fields:
            _warn(f"{where}: AutoDetect={fields['autodetect']}: GPU counts found at run time")
        if "nodename" not in fields:
            if fields.get("name") == "gpu":
                _warn(f"{where}: a gres.conf line without NodeName (the reading node's own)")
            continue
        if fields["nodename"].upper() == "DEFAULT":
            defaults.update({k: v for k, v in fields.items() if k != "nodename"})
            continue
        if fields.get("name") == "gpu" and "gres" not in fields:
            _add_gres_conf(gpus, fields, where)
            continue
        gres = fields.get("gres", defaults.get("gres"))
        if gres is None:
            continue
        count = _gres_gpus(gres, where)
        for node in _hosts(fields["nodename"], where):
            gpus[node] = count
    return gpus


def _add_gres_conf(gpus: dict[str, int], fields: dict[str, str], where: str) -> None:
    if "autodetect" in fields:
        _warn(f"{where}: AutoDetect={fields['autodetect']}: GPU counts found at run time")
    if "count" in fields:
        if not fields["count"].isdigit():
            raise SlurmError(f"{where}: Count={fields['count']} is not a number")
        count = int(fields["count"])
    elif "file" in fields:
        count = _files_count(fields["file"], where)
    else:
        count = 1
    for node in _hosts(fields["nodename"], where):
        gpus[node] = gpus.get(node, 0) + count


def _warn(message: str) -> None:
    warnings.warn(message, SlurmConfWarning, stacklevel=3)
