"""Who must make room for a gang: the rules of preemption and defragmentation.

The rules P1-P6 (preemption) and D1-D3 (defragmentation) of docs/preemption.md, as pure functions
over a picture of the nodes. Readable rather than fast: every capacity is recomputed from the nodes.
A :class:`Candidate` is an allocation that may be removed, with the healthy GPUs its removal
would return per node. The oracle (:mod:`gangplace.reference.oracle`) builds the candidates
from its holds and calls :func:`find` and :func:`defrag_choices`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from fractions import Fraction

from gangplace.reference import roles, rules
from gangplace.reference.fractions import WHOLE
from gangplace.reference.resources import pods_fitting
from gangplace.reference.rules import Gang, NodeView
from gangplace.reference.values import Path, Placement

__all__ = [
    "Candidate",
    "Choice",
    "choices",
    "choose",
    "find",
    "find_roles",
    "freed_inside",
    "freed_milli_inside",
    "freed_totals",
    "given_back",
    "place_after_removal",
]


@dataclass(frozen=True)
class Candidate:
    """An allocation that may be removed.

    Attributes:
        id: Its id.
        priority: Its priority.
        since: When it was committed.
        held: Whole GPUs it holds in total, healthy or not.
        freed: Node name -> the healthy GPUs its removal returns there.
        freed_resources: Node name -> the resources its removal returns there.
        shares: Node name -> ``(GPU, thousandths, thousandths used there in all)`` of each
            share of a healthy GPU its removal gives back (a fractional allocation, P8).
        shared_milli: The thousandths of its shares, healthy GPUs or not.

    """

    id: str
    priority: int
    since: float
    held: int
    freed: Mapping[str, tuple[int, ...]]
    # docs/resources.md "Node resources": node name -> what its removal gives back of the node's
    # resources (filled for a request asking some; empty otherwise).
    freed_resources: Mapping[str, Mapping[str, int]] = field(default_factory=dict)
    shares: Mapping[str, tuple[tuple[int, int, int], ...]] = field(default_factory=dict)
    shared_milli: int = 0

    @property
    def held_milli(self) -> int:
        """What it holds in thousandths of a GPU (P4's order and P5's key count this)."""
        return self.held * WHOLE + self.shared_milli


@dataclass(frozen=True)
class Choice:
    """The set chosen in one domain (P4): members in removal order."""

    depth: int
    path: Path
    members: tuple[Candidate, ...]
    free_after: int


def with_removed(nodes: Sequence[NodeView], removed: Sequence[Candidate]) -> list[NodeView]:
    """The nodes as they would be with ``removed`` ended: their healthy GPUs free again.

    Where the views carry free resources (a request asking some), the resources they free
    too, each first paying back what a node's use passes its capacity by; a gang's pods
    recounted (``NodeView.asks``; a multi-role unit's groups count them from ``resources``).
    """
    freed, given = freed_totals(removed)
    shares = given_back(removed)
    for (node, gpu), (milli, used) in shares.items():  # a GPU whose shares all end is free (P8)
        if milli >= used:
            freed.setdefault(node, set()).add(gpu)
    views = []
    for before in nodes:
        view = replace(before, free=tuple(sorted({*before.free, *freed.get(before.name, ())})))
        if before.milli is not None and (freed.get(before.name) or shares):
            # A victim's GPUs come back whole: each with a whole GPU's room; its shares give
            # their GPU's room back (P8).
            room = dict(before.room)
            for (node, gpu), (milli, _) in shares.items():
                if node == before.name and gpu in room:
                    room[gpu] = min(WHOLE, room[gpu] + milli)
            room |= dict.fromkeys(freed.get(before.name, ()), WHOLE)
            view = replace(view, room=tuple(sorted(room.items())))
        back = given.get(before.name)
        if before.resources and back:
            over = before.overused
            free = {
                r: q + max(0, back.get(r, 0) - over.get(r, 0)) for r, q in before.resources.items()
            }
            view = replace(view, resources=free)
            if before.asks:
                pods, bound = pods_fitting(free, before.asks)
                view = replace(view, resource_pods=pods, bound_by=bound)
        views.append(view)
    return views


def freed_totals(
    removed: Sequence[Candidate],
) -> tuple[dict[str, set[int]], dict[str, dict[str, int]]]:
    """The healthy GPUs and the resources ``removed`` give back, per node."""
    freed: dict[str, set[int]] = {}
    given: dict[str, dict[str, int]] = {}
    for candidate in removed:
        for node, gpus in candidate.freed.items():
            freed.setdefault(node, set()).update(gpus)
        for node, amounts in candidate.freed_resources.items():
            on_node = given.setdefault(node, {})
            for name, quantity in amounts.items():
                on_node[name] = on_node.get(name, 0) + quantity
    return freed, given


def given_back(removed: Sequence[Candidate]) -> dict[tuple[str, int], tuple[int, int]]:
    """The shares ``removed`` give back per ``(node, GPU)``, with the thousandths used there."""
    back: dict[tuple[str, int], tuple[int, int]] = {}
    for candidate in removed:
        for node, shares in candidate.shares.items():
            for gpu, milli, used in shares:
                before = back.get((node, gpu), (0, used))[0]
                back[(node, gpu)] = (before + milli, used)
    return back


def _touches(candidate: Candidate, members: Sequence[NodeView]) -> bool:
    return any(
        candidate.freed.get(node.name)
        or candidate.freed_resources.get(node.name)
        or candidate.shares.get(node.name)
        for node in members
    )


def freed_inside(candidate: Candidate, members: Sequence[NodeView]) -> int:
    """The healthy GPUs ``candidate``'s removal frees on ``members``."""
    return sum(len(candidate.freed.get(node.name, ())) for node in members)


def freed_milli_inside(candidate: Candidate, members: Sequence[NodeView]) -> int:
    """The thousandths ``candidate``'s removal frees on ``members``: whole GPUs and shares."""
    shares = sum(milli for node in members for _, milli, _ in candidate.shares.get(node.name, ()))
    return freed_inside(candidate, members) * WHOLE + shares


def choose(
    members: list[NodeView],
    depth: int,
    path: Path,
    touching: list[Candidate],
    fits: Callable[[Sequence[Candidate]], bool],
) -> Choice:
    """P4 in one domain: greedy removal in order, then restoration in reverse order.

    The restoration pass is repeated until one restores nothing, so that the set is
    1-minimal even where fitting is not monotone in free GPUs (a multi-role unit's greedy
    placement); for a single gang, whose fit is a capacity, the second pass never restores
    anything.
    """

    def order(candidate: Candidate) -> tuple[int, Fraction, float, str]:
        share = Fraction(freed_milli_inside(candidate, members), max(candidate.held_milli, 1))
        return (candidate.priority, -share, -candidate.since, candidate.id)

    removed: list[Candidate] = []
    for candidate in sorted(touching, key=order):
        if fits(removed):
            break
        removed.append(candidate)
    restored = True
    while restored:
        restored = False
        for candidate in reversed(list(removed)):
            rest = [other for other in removed if other is not candidate]
            if fits(rest):
                removed, restored = rest, True
    after = with_removed(members, removed)
    return Choice(depth, path, tuple(removed), sum(len(node.free) for node in after))


def choices(
    nodes: Sequence[NodeView],
    levels: Sequence[str],
    gang: Gang,
    depth: int,
    pods: int,
    candidates: Sequence[Candidate],
) -> list[Choice]:
    """P3-P4 at ``depth``: the domains that could hold ``pods``, each with its 1-minimal set.

    A domain qualifies if a candidate touches it and it would hold ``pods`` with all the
    candidates touching it removed.
    """
    usable = rules.feasible(nodes, gang.selector)
    found = []
    for path, members in sorted(rules.domains_at(usable, depth).items()):
        touching = [c for c in candidates if _touches(c, members)]
        if not touching:
            continue
        if rules.capacity(with_removed(members, touching), gang.gpus_per_pod) < pods:
            continue

        def fits(removed: Sequence[Candidate], members: list[NodeView] = members) -> bool:
            return rules.capacity(with_removed(members, removed), gang.gpus_per_pod) >= pods

        found.append(choose(members, depth, path, touching, fits))
    return found


def preemption_key(choice: Choice) -> tuple[int, int, int, int, Path]:
    """P5: (highest member priority, members, thousandths they hold, free GPUs after, path)."""
    highest = max(member.priority for member in choice.members)
    held = sum(member.held_milli for member in choice.members)
    return (highest, len(choice.members), held, choice.free_after, choice.path)


def find(
    nodes: Sequence[NodeView],
    levels: Sequence[str],
    gang: Gang,
    candidates: Sequence[Candidate],
    max_members: int | None = None,
) -> tuple[Choice, Placement] | None:
    """P3-P6: the best choice at the finest level that has one, and the gang's placement.

    P6: when no level yields a choice and the gang is elastic, the largest capacity of one
    domain at the coarsest allowed level, with every candidate touching it removed, is tried
    (if it reaches ``min_pods``).
    """
    coarsest = rules.depth_of(levels, gang.required_level)
    found = _best(nodes, levels, gang, gang.pods, coarsest, candidates, max_members)
    pods = gang.pods
    if found is None and gang.min_pods is not None and gang.min_pods < gang.pods:
        usable = rules.feasible(nodes, gang.selector)
        widest = 0
        for members in rules.domains_at(usable, coarsest).values():
            touching = [c for c in candidates if _touches(c, members)]
            widest = max(widest, rules.capacity(with_removed(members, touching), gang.gpus_per_pod))
        if widest >= gang.min_pods:
            pods = min(widest, gang.pods)
            found = _best(nodes, levels, gang, pods, coarsest, candidates, max_members)
    if found is None:
        return None
    return found, place_after_removal(nodes, levels, gang, found, pods)


def _best(
    nodes: Sequence[NodeView],
    levels: Sequence[str],
    gang: Gang,
    pods: int,
    coarsest: int,
    candidates: Sequence[Candidate],
    max_members: int | None,
) -> Choice | None:
    for depth in range(len(levels) + 1, coarsest - 1, -1):
        allowed = [
            choice
            for choice in choices(nodes, levels, gang, depth, pods, candidates)
            if max_members is None or len(choice.members) <= max_members
        ]
        if allowed:
            return min(allowed, key=preemption_key)
    return None


def place_after_removal(
    nodes: Sequence[NodeView], levels: Sequence[str], gang: Gang, choice: Choice, pods: int
) -> Placement:
    """Rules 4-6 inside the chosen domain on the nodes with the members removed."""
    after = rules.feasible(with_removed(nodes, choice.members), gang.selector)
    node_depth = len(levels) + 1
    placed = rules.spread(
        after, node_depth, choice.depth, choice.path, pods, gang.gpus_per_pod, gang.spread
    )
    paths = {node.name: node.full_path for node in after}
    return Placement(
        rules.ranked(placed, paths),
        rules.level_name(levels, choice.depth),
        choice.path,
        gpu_milli=gang.gpu_milli,
    )


def _unit_nodes(nodes: Sequence[NodeView], unit: roles.MultiGang) -> list[NodeView]:
    """The nodes feasible for a multi-role unit: uncordoned, accepted by some group's selector."""
    names = {node.name for group in unit.groups for node in rules.feasible(nodes, group.selector)}
    return [node for node in nodes if node.name in names]


def roles_choices(
    nodes: Sequence[NodeView],
    levels: Sequence[str],
    unit: roles.MultiGang,
    depth: int,
    candidates: Sequence[Candidate],
    elastic: bool,
) -> list[Choice]:
    """P3-P4 for a multi-role unit at ``depth``: the domains where removal makes it fit.

    The unit "fits" a domain when every group and colocation succeeds there by the placement
    rules ("Multi-role gangs", 3), on the nodes with the removed candidates' healthy GPUs
    free; ``elastic`` puts elastic groups at their ``min_pods``.
    """
    coarsest = rules.depth_of(levels, unit.required_level)
    usable = _unit_nodes(nodes, unit)
    found = []
    for path, members in sorted(rules.domains_at(usable, depth).items()):
        touching = [c for c in candidates if _touches(c, members)]
        if not touching:
            continue

        def fits(removed: Sequence[Candidate], path: Path = path) -> bool:
            planner = roles.Planner(with_removed(nodes, removed), levels, unit, coarsest)
            return not isinstance(planner.in_candidate(depth, path, elastic), roles.Failure)

        if fits(touching):
            found.append(choose(members, depth, path, touching, fits))
    return found


def find_roles(
    nodes: Sequence[NodeView],
    levels: Sequence[str],
    unit: roles.MultiGang,
    candidates: Sequence[Candidate],
    max_members: int | None = None,
) -> tuple[Choice, Placement] | None:
    """P3-P6 for a multi-role unit: the best choice and the unit's placement there.

    The best choice (P5) at the finest level with one; if none and some group is elastic, the
    coarsest allowed level again with elastic groups at their ``min_pods`` (as placement does).
    """
    coarsest = rules.depth_of(levels, unit.required_level)
    node_depth = len(levels) + 1
    tries = [(depth, False) for depth in range(node_depth, coarsest - 1, -1)]
    if unit.elastic:  # some group has min_pods (a group without GPUs too)
        tries.append((coarsest, True))
    for depth, elastic in tries:
        allowed = [
            choice
            for choice in roles_choices(nodes, levels, unit, depth, candidates, elastic)
            if max_members is None or len(choice.members) <= max_members
        ]
        if not allowed:
            continue
        best = min(allowed, key=preemption_key)
        planner = roles.Planner(with_removed(nodes, best.members), levels, unit, coarsest)
        outcome = planner.in_candidate(depth, best.path, elastic)
        if isinstance(outcome, roles.Failure):
            raise AssertionError("a chosen set no longer fits")
        return best, roles.unit_placement(levels, unit, depth, best.path, outcome)
    return None


def taking(world: Sequence[NodeView], placement: Placement) -> list[NodeView]:
    """The nodes with ``placement``'s GPUs taken."""
    taken: dict[str, set[int]] = {}
    for pod in placement.pods:
        taken.setdefault(pod.node, set()).update(pod.gpus)
    return [
        replace(node, free=tuple(g for g in node.free if g not in taken.get(node.name, ())))
        for node in world
    ]
