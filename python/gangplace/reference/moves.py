"""Defragmentation's moves (docs/preemption.md D1-D5), as pure functions over the nodes.

Which sets are accepted, and where their members go again.

The sets themselves are :mod:`gangplace.reference.preemption`'s (P3-P4 over the movable
allocations); here each member of a set is placed again outside the gang's domain, biggest
first, by its own request, fractional members by the room of the GPUs (D5).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from gangplace.reference import roles, rules
from gangplace.reference.fractions import WHOLE
from gangplace.reference.preemption import (
    Candidate,
    Choice,
    choices,
    given_back,
    place_after_removal,
    roles_choices,
    taking,
    with_removed,
)
from gangplace.reference.rules import Gang, NodeView
from gangplace.reference.values import Placement

__all__ = ["Accepted", "Mover", "Shares", "defrag_choices", "defrag_choices_roles"]

Shares = Mapping[str, Mapping[int, int]]
"""Per node, the thousandths used on each healthy shared GPU."""


@dataclass(frozen=True)
class Mover:
    """A defragmentation member as D2 re-places it: its own request, its current size."""

    candidate: Candidate
    gang: Gang | None  # None: held from a placement, nothing to place it by again
    pods: int
    level: str
    evictable: bool


def defrag_choices(
    nodes: Sequence[NodeView],
    levels: Sequence[str],
    gang: Gang,
    candidates: Sequence[Candidate],
    movers: Mapping[str, Mover],
    policy: str,
    allow_downgrade: bool,
    evict_unplaceable: bool,
    max_moves: int | None,
    gang_nodes: Sequence[NodeView] | None = None,
    shares: Shares | None = None,
) -> tuple[Choice, Placement, list[tuple[str, Placement]], list[str]] | None:
    """D1-D3: the accepted set at the finest level that has one.

    Sets are ranked by (moves, moved GPUs in thousandths, evictions, path); the answer
    carries the gang's placement, the moves and the evictions. ``gang_nodes``: the views the
    gang is counted and placed on (a fractional gang's, by the room of the GPUs: D5),
    ``nodes`` the movers'; ``shares``: the thousandths used on each healthy shared GPU, per
    node (fractional movers are placed by the room of the GPUs: D5).
    """
    coarsest = rules.depth_of(levels, gang.required_level)
    d2 = (movers, policy, allow_downgrade, evict_unplaceable, max_moves, shares or {})
    counted = nodes if gang_nodes is None else gang_nodes
    for depth in range(len(levels) + 1, coarsest - 1, -1):
        placed = [
            (choice, place_after_removal(counted, levels, gang, choice, gang.pods))
            for choice in choices(counted, levels, gang, depth, gang.pods, candidates)
        ]
        found = _best_accepted(nodes, levels, placed, *d2)
        if found is not None:
            return found
    return None


Accepted = tuple[Choice, Placement, list[tuple[str, Placement]], list[str]]
"""An accepted set: the choice, the gang's placement, the moves and the evictions."""


def _best_accepted(
    nodes: Sequence[NodeView],
    levels: Sequence[str],
    placed: Sequence[tuple[Choice, Placement]],
    movers: Mapping[str, Mover],
    policy: str,
    allow_downgrade: bool,
    evict_unplaceable: bool,
    max_moves: int | None,
    shares: Shares,
) -> Accepted | None:
    """D2-D3 at one level: the best set whose members all move (or are evicted).

    The smallest by (moves, moved GPUs in thousandths, evictions, path), or ``None``.
    """
    accepted = []
    for choice, placement in placed:
        d2 = (policy, allow_downgrade, evict_unplaceable, shares)
        outcome = _moves(nodes, levels, choice, movers, *d2)
        if outcome is None:
            continue
        moves, evictions = outcome
        if max_moves is not None and len(moves) > max_moves:
            continue
        moved = sum(movers[hid].candidate.held_milli for hid, _ in moves)
        key = (len(moves), moved, len(evictions), choice.path)
        accepted.append((key, choice, placement, moves, evictions))
    if not accepted:
        return None
    _, choice, placement, moves, evictions = min(accepted, key=lambda item: item[0])
    return choice, placement, moves, evictions


def defrag_choices_roles(
    nodes: Sequence[NodeView],
    levels: Sequence[str],
    unit: roles.MultiGang,
    candidates: Sequence[Candidate],
    movers: Mapping[str, Mover],
    policy: str,
    allow_downgrade: bool,
    evict_unplaceable: bool,
    max_moves: int | None,
    shares: Shares | None = None,
) -> Accepted | None:
    """D1-D3 for a multi-role unit: :func:`defrag_choices` over :func:`roles_choices`.

    Levels as in :func:`find_roles` (finest first, then the elastic retry at the coarsest);
    each choice's unit placement is the unit's in its domain with the members removed.
    """
    coarsest = rules.depth_of(levels, unit.required_level)
    tries = [(depth, False) for depth in range(len(levels) + 1, coarsest - 1, -1)]
    if unit.elastic:  # some group has min_pods (a group without GPUs too)
        tries.append((coarsest, True))
    d2 = (movers, policy, allow_downgrade, evict_unplaceable, max_moves, shares or {})
    for depth, elastic in tries:
        placed = []
        for choice in roles_choices(nodes, levels, unit, depth, candidates, elastic):
            planner = roles.Planner(with_removed(nodes, choice.members), levels, unit, coarsest)
            outcome = planner.in_candidate(depth, choice.path, elastic)
            if isinstance(outcome, roles.Failure):
                raise AssertionError("a chosen set no longer fits")
            placed.append((choice, roles.unit_placement(levels, unit, depth, choice.path, outcome)))
        found = _best_accepted(nodes, levels, placed, *d2)
        if found is not None:
            return found
    return None


def _moves(
    nodes: Sequence[NodeView],
    levels: Sequence[str],
    choice: Choice,
    movers: Mapping[str, Mover],
    policy: str,
    allow_downgrade: bool,
    evict_unplaceable: bool,
    shares: Shares,
) -> tuple[list[tuple[str, Placement]], list[str]] | None:
    """D2: every member placed again outside the gang's domain, or ``None``.

    Biggest first (thousandths held, then id), each by its own request, each seeing the GPUs
    and shares the earlier ones took: a whole pod takes its GPUs, a share its room on its
    GPU; a free GPU an earlier share took stays free for further shares (its room lessened,
    as in a repair: docs/repair.md R7), never for a whole pod (D5).
    """
    inside = {node.name for node in nodes if node.full_path[: len(choice.path)] == choice.path}
    # Movers ask no resources (docs/resources.md "Node resources"): the gang's counts do not bound
    # them.
    world = [
        replace(
            node,
            cordoned=node.cordoned or node.name in inside,
            resource_pods=None,
            bound_by=None,
            asks={},
        )
        for node in with_removed(nodes, choice.members)
    ]
    moves: list[tuple[str, Placement]] = []
    evictions: list[str] = []
    back = {at: milli for at, (milli, _) in given_back(choice.members).items()}
    taken: dict[tuple[str, int], int] = {}
    started: set[tuple[str, int]] = set()
    for member in sorted(choice.members, key=lambda c: (-c.held_milli, c.id)):
        mover = movers[member.id]
        milli = mover.gang.gpu_milli if mover.gang is not None else None
        views = world
        if milli is not None:
            views = _share_views(world, milli, shares, back, taken, started)
        target = _replace(views, levels, mover, policy, allow_downgrade)
        if target is None:
            if evict_unplaceable and mover.evictable:
                evictions.append(member.id)
                continue
            return None
        free = {view.name: set(view.free) for view in world}
        for pod in target.pods:
            for gpu in pod.gpus:
                taken[(pod.node, gpu)] = taken.get((pod.node, gpu), 0) + (milli or WHOLE)
                if milli is not None and gpu in free.get(pod.node, set()):
                    started.add((pod.node, gpu))
        world = taking(world, target)
        moves.append((member.id, target))
    return moves, evictions


def _share_views(
    world: Sequence[NodeView],
    milli: int,
    shares: Shares,
    back: Mapping[tuple[str, int], int],
    taken: Mapping[tuple[str, int], int],
    started: set[tuple[str, int]],
) -> list[NodeView]:
    """The movers' world as a fractional mover sees it.

    Each usable GPU's room (free, shared, or free and started by an earlier move's share),
    less the shares given back and taken.
    """
    out = []
    for view in world:
        name = view.name
        used = shares.get(name, {})
        free = tuple(sorted({*view.free, *(g for n, g in started if n == name)}))
        room = tuple(
            (gpu, WHOLE - (used.get(gpu, 0) - back.get((name, gpu), 0) + taken.get((name, gpu), 0)))
            for gpu in sorted({*free, *used})
        )
        out.append(replace(view, free=free, milli=milli, room=room))
    return out


def _replace(
    world: Sequence[NodeView],
    levels: Sequence[str],
    mover: Mover,
    policy: str,
    allow_downgrade: bool,
) -> Placement | None:
    if mover.gang is None:
        return None
    required = mover.gang.required_level
    if not allow_downgrade:
        deepest = max(rules.depth_of(levels, required), rules.depth_of(levels, mover.level))
        required = rules.level_name(levels, deepest)
    gang = replace(mover.gang, pods=mover.pods, min_pods=None, required_level=required)
    placement = rules.place(world, levels, gang, policy)
    if placement is None or gang.gpu_milli is None:
        return placement
    return replace(placement, gpu_milli=gang.gpu_milli)  # a fractional mover keeps its share
