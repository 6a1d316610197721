"""GRES as Slurm writes them, and what each is in gangplace (docs/slurm.md "GRES").

One reader for every place a GRES list appears: ``Gres=`` of ``slurm.conf`` and of
``scontrol show node``, ``GresUsed=`` of ``scontrol -d show node``. An item is
``name[:type][:count][(S:0-1)|(IDX:0-3)]``: ``gpu``, ``gpu:8``, ``gpu:h100:8(S:0-1)``,
``gpu:h100:4(IDX:0-3)``, ``gpu:1g.10gb:14``, ``shard:16``, ``shard:(null):0(IDX:N/A)``.

What each becomes:

- A ``gpu`` whose type is not a MIG profile: whole GPUs.
- A ``gpu`` whose type is a MIG profile (it ends in ``<n>g.<m>gb``, with ``+me`` or a prefix
  such as ``a100_`` as AutoDetect names them): the named resource ``nvidia.com/mig-<type>``
  (docs/resources.md "Node resources"), never a whole GPU, as the Kubernetes adapter names
  the mixed strategy's profiles.
- ``shard``: the named resource ``shard`` (a count per node). Chosen: a shard is a share of
  one of the node's GPUs that Slurm hands out; gangplace counts them, and Slurm decides which
  GPU serves them.
- Any other GRES (``nic``, ``mps``...) is not counted.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from gangplace.slurm.text import SlurmError, _split_top_level

__all__ = ["MIG_PREFIX", "SHARD", "GresItem", "gres_amounts", "parse_gres"]

MIG_PREFIX = "nvidia.com/mig-"
SHARD = "shard"
_MIG_PROFILE = re.compile(r"(?:^|_)\d+g\.\d+gb(?:\+me)?$")
_ITEM = re.compile(r"([A-Za-z][\w.-]*)((?::[^:()]*)*)(?:\((.*)\))?")


@dataclass(frozen=True)
class GresItem:
    """One GRES item: its name, type (``""``: none), count and indices.

    ``indices`` is ``None`` when none were printed; ``IDX:N/A`` gives ``()``.
    """

    name: str
    type: str
    count: int
    indices: tuple[int, ...] | None

    @property
    def is_mig(self) -> bool:
        """A MIG profile of a GPU, not a whole GPU."""
        return self.name == "gpu" and bool(_MIG_PROFILE.search(self.type))

    @property
    def resource(self) -> str | None:
        """The named resource it counts as (``None``: whole GPUs, or not counted)."""
        if self.is_mig:
            return MIG_PREFIX + self.type
        return SHARD if self.name == SHARD else None


def parse_gres(text: str, where: str, field: str = "Gres") -> list[GresItem]:
    """The items of a GRES list (``(null)`` or empty: none).

    Raises:
        SlurmError: An item whose count or index list is not numbers, naming ``where`` and
            ``field``.

    """
    if text in ("", "(null)", "N/A"):
        return []
    items = []
    for part in _split_top_level(text):
        match = _ITEM.fullmatch(part.replace(":(null)", ":"))  # an untyped item, printed
        if match is None:
            raise SlurmError(f"{where}: {field}: cannot read the item {part!r}")
        name, colons, extra = match.group(1), match.group(2), match.group(3)
        pieces = [piece for piece in colons.split(":")[1:]]
        count = 1
        if pieces and pieces[-1].isdigit():
            count = int(pieces.pop())
        elif pieces and len(pieces) > 1:
            raise SlurmError(f"{where}: {field}: the count of {part!r} is not a number")
        kind = pieces[0] if pieces else ""
        if len(pieces) > 1:
            raise SlurmError(f"{where}: {field}: cannot read the item {part!r}")
        items.append(GresItem(name, kind, count, _indices(extra, part, where, field)))
    return items


def _indices(extra: str | None, part: str, where: str, field: str) -> tuple[int, ...] | None:
    """``IDX:0-3,5`` as indices; ``IDX:N/A`` as none; a socket binding (``S:0-1``) as None."""
    if extra is None or not extra.startswith("IDX:"):
        return None
    spec = extra[4:]
    if spec == "N/A":
        return ()
    found: list[int] = []
    for item in spec.split(","):
        low, _, high = item.partition("-")
        if not low.isdigit() or (high and not high.isdigit()):
            raise SlurmError(f"{where}: {field}: bad index list {spec!r} in {part!r}")
        found.extend(range(int(low), int(high or low) + 1))
    return tuple(found)


def gres_amounts(items: list[GresItem]) -> tuple[int, dict[str, int]]:
    """Whole GPUs and named resources (MIG profiles, shards) of a GRES list, summed."""
    gpus = 0
    resources: dict[str, int] = {}
    for item in items:
        resource = item.resource
        if resource is not None:
            resources[resource] = resources.get(resource, 0) + item.count
        elif item.name == "gpu":
            gpus += item.count
    return gpus, resources
