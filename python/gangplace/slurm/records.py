"""``scontrol show node`` read into records, in every format it prints (docs/slurm.md).

The default multi-line form and ``-o`` (one line per node), each with or without ``-d``.
With ``-d`` Slurm prints ``GresUsed`` (the GPUs in use, with their indices when it knows
them: ``gpu:h100:4(IDX:0-3)``); without it, the GPUs in use appear only in ``AllocTRES``,
and only when ``AccountingStorageTRES`` counts ``gres/gpu``. A record says which it had.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from gangplace.slurm.gres import GresItem, gres_amounts, parse_gres
from gangplace.slurm.text import SlurmError

__all__ = ["NodeRecord", "node_records"]

MIB = 2**20
# The states in which a node runs jobs (its GPUs in use must be known).
BUSY_STATES = frozenset({"ALLOCATED", "MIXED", "COMPLETING"})


@dataclass
class NodeRecord:
    """One node of the output.

    Attributes:
        name: ``NodeName``.
        where: ``scontrol:<line>`` of its first line.
        fields: Every ``Key=Value`` of the record.
        gpus: Whole GPUs of its ``Gres`` (``None``: no ``Gres`` field).
        resources: Its CPUs (``CPUEfctv``, else ``CPUTot``; millicores), memory
            (``RealMemory`` less ``MemSpecLimit``; bytes), MIG profiles and shards.
        used_gpus: Whole GPUs in use: a count, with indices when Slurm printed them
            (``None``: not known from this output).
        used: CPUs (``CPUAlloc``), memory (``AllocMem``), MIG profiles and shards in use.
        busy: Whether it runs jobs (allocated CPUs, or an allocated state).

    """

    name: str
    where: str
    fields: dict[str, str]
    gpus: int | None = None
    resources: dict[str, int] = field(default_factory=dict)
    used_gpus: tuple[int, tuple[int, ...] | None] | None = None
    used: dict[str, int] = field(default_factory=dict)
    busy: bool = False
    warnings: list[str] = field(default_factory=list)


def _records(text: str) -> list[tuple[int, str]]:
    """Each node's text (one ``-o`` line, or the indented block of the default format)."""
    records: list[tuple[int, str]] = []
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if not stripped:
            continue
        if stripped.startswith("NodeName="):
            records.append((number, stripped))
        elif records:
            records[-1] = (records[-1][0], records[-1][1] + " " + stripped)
        else:
            raise SlurmError(f"scontrol:{number}: expected NodeName=..., got {stripped[:40]!r}")
    return records


def node_records(text: str) -> list[NodeRecord]:
    """Every node record of ``scontrol show node`` output (any of its four formats).

    Raises:
        SlurmError: Malformed output, naming the line and field.

    """
    if not isinstance(text, str):
        raise SlurmError(f"scontrol output must be text (str), got {type(text).__name__}")
    found = []
    for number, record in _records(text):
        where = f"scontrol:{number}"
        fields = dict(re.findall(r"(\w+)=(\S*)", record))
        name = fields.get("NodeName", "")
        if not name:
            raise SlurmError(f"{where}: a node record without a name")
        found.append(_read(name, where, fields))
    return found


def _read(name: str, where: str, fields: dict[str, str]) -> NodeRecord:
    record = NodeRecord(name, where, fields)
    if "Gres" in fields:
        record.gpus, gres = gres_amounts(parse_gres(fields["Gres"], where, "Gres"))
        record.resources.update(gres)
    cpus = _number(record, "CPUEfctv")
    cpus = _number(record, "CPUTot") if cpus is None else cpus
    memory = _number(record, "RealMemory")
    if cpus is not None:
        record.resources["cpu"] = cpus * 1000
    if memory is not None:
        spec = _number(record, "MemSpecLimit") or 0
        record.resources["memory"] = max(memory - spec, 0) * MIB
    record.used["cpu"] = (_number(record, "CPUAlloc") or 0) * 1000
    record.used["memory"] = (_number(record, "AllocMem") or 0) * MIB
    states = {part.rstrip("*~#!%$@^-") for part in fields.get("State", "").split("+")}
    record.busy = record.used["cpu"] > 0 or bool(states & BUSY_STATES)
    if "GresUsed" in fields:
        _used_from(record, parse_gres(fields["GresUsed"], where, "GresUsed"))
    elif "gres/gpu" in fields.get("AllocTRES", ""):
        _used_from(record, _alloc_tres(fields["AllocTRES"], where))
    return record


def _used_from(record: NodeRecord, items: list[GresItem]) -> None:
    """The GPUs (with indices when all are named) and named resources in use."""
    count, named = 0, True
    indices: list[int] = []
    for item in items:
        resource = item.resource
        if resource is not None:
            record.used[resource] = record.used.get(resource, 0) + item.count
        elif item.name == "gpu":
            count += item.count
            if item.indices is None:
                named = False
            else:
                indices.extend(item.indices)
    if named and count and len(indices) != count:
        raise SlurmError(f"{record.where}: GresUsed names {len(indices)} GPUs but counts {count}")
    record.used_gpus = (count, tuple(indices) if named and count else None)


def _alloc_tres(tres: str, where: str) -> list[GresItem]:
    """``gres/gpu=4,gres/gpu:1g.10gb=3`` of ``AllocTRES`` as GRES items.

    The untyped total counts every GPU GRES, MIG profiles included: whole GPUs are the total
    less the typed MIG counts.
    """
    total, typed = 0, []
    for entry in tres.split(","):
        key, _, value = entry.partition("=")
        if not key.startswith("gres/gpu"):
            continue
        if not value.isdigit():
            raise SlurmError(f"{where}: AllocTRES: {entry!r} is not a count")
        kind = key.partition(":")[2]
        if not kind:
            total = int(value)
            continue
        item = GresItem("gpu", kind, int(value), None)
        if item.is_mig:
            typed.append(item)
    whole = total - sum(item.count for item in typed)
    return [GresItem("gpu", "", max(whole, 0), None), *typed]


def _number(record: NodeRecord, key: str) -> int | None:
    """A whole-number field (absent or ``N/A``: ``None``; bad: a warning)."""
    value = record.fields.get(key)
    if value is None or value == "N/A":
        return None
    if not value.isdigit() or len(value) > 15:
        record.warnings.append(f"{record.name}: {key}={value} is not a count; left out")
        return None
    return int(value)
