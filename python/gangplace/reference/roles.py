"""Multi-role gangs, as pure functions: the docs/roles.md.

Several pod groups go into one domain as one all-or-nothing unit. Levels are tried finest
first; at each, the candidate domains are those with the unit's GPUs free (over every
uncordoned node), in rule 3's order. Inside a candidate the groups are placed in order of
(total GPUs descending, name), each by the single-gang rules (its selector, its slices) on
the GPUs the earlier groups left; a group whose colocation anchor is already placed goes
inside the anchor's rank-0 domain of the colocation level; when it has no room there, the
candidate is tried once more with that follower placed there just before its anchor, and the
anchor (without slices) filling what that domain still holds first. The first candidate
where every group and every colocation succeeds wins. If no level holds the full unit, the
coarsest level is tried again with every elastic group at its ``min_pods``. The Rust core
(``roles/``) must give the same answers.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from gangplace.reference import rules
from gangplace.reference import slices as slicing
from gangplace.reference.filters import Filter, order_filter
from gangplace.reference.resources import pods_fitting
from gangplace.reference.values import Path, Placement, PodPlacement

__all__ = [
    "Failure",
    "MultiGang",
    "Planner",
    "place_roles",
    "roles_reason",
    "taking_resources",
    "unit_placement",
]


@dataclass(frozen=True)
class MultiGang:
    """What the rules read of a ``gangplace.MultiGangRequest``."""

    groups: tuple[rules.Gang, ...]
    required_level: str | None = None
    colocate: tuple[tuple[str, str, str], ...] = ()
    name: str = ""
    # docs/resources.md "Node resources": what each group's pods ask besides GPUs (empty: none
    # asked).
    asks: tuple[Mapping[str, int], ...] = ()

    @property
    def total_gpus(self) -> int:
        """GPUs of every group at full size."""
        return sum(group.pods * group.gpus_per_pod for group in self.groups)

    @property
    def elastic(self) -> bool:
        """Whether some group accepts fewer pods (``min_pods``)."""
        return any(_smallest(group) < group.pods for group in self.groups)

    @property
    def min_gpus(self) -> int:
        """GPUs of every group at its smallest accepted size."""
        return sum(_smallest(group) * group.gpus_per_pod for group in self.groups)

    def placing_order(self) -> list[int]:
        """Group indices by (total GPUs descending, name)."""
        return sorted(
            range(len(self.groups)),
            key=lambda i: (-self.groups[i].pods * self.groups[i].gpus_per_pod, self.groups[i].name),
        )


@dataclass(frozen=True)
class Failure:
    """The first group that failed in a candidate: its index, why, pods with room, wanted."""

    group: int
    why: str
    held: int
    wanted: int


Trial = tuple[int, Path | None, Failure | None]
"""One level tried: its depth, its first candidate and why that one failed."""

Pin = tuple[int, int, int, Path]
"""A follower placed in its anchor's rank-0 domain before the anchor: (follower, anchor,
depth, domain)."""

Taken = list[tuple[int, PodPlacement]]
"""The pods the earlier groups of a trial placed, each with its group."""


def _smallest(group: rules.Gang) -> int:
    return group.min_pods if group.min_pods is not None else group.pods


class Planner:
    """One search over a picture of the nodes."""

    def __init__(
        self,
        nodes: Sequence[rules.NodeView],
        levels: Sequence[str],
        request: MultiGang,
        coarsest: int,
    ) -> None:
        self.nodes, self.levels, self.request = nodes, levels, request
        self.node_depth = len(levels) + 1
        self.layers = [slicing.resolve(g.slices, levels, coarsest) for g in request.groups]
        names = [group.name for group in request.groups]
        self.colocations = [
            (names.index(group), names.index(anchor), rules.depth_of(levels, level))
            for group, anchor, level in request.colocate
        ]

    def held(self, group: int, usable: Sequence[rules.NodeView], path: Path, most: int) -> int:
        """Pods of a group, up to ``most``, that ``path`` holds (in whole outer slices)."""
        gang = self.request.groups[group]
        members = [node for node in usable if node.full_path[: len(path)] == path]
        layers = self.layers[group]
        count = rules.slice_counter(members, gang.gpus_per_pod, layers)
        if count is None:
            return min(rules.capacity(members, gang.gpus_per_pod), most)
        outer = layers[0][1]
        return min(count(path, 0), most // outer) * outer

    def usable(self, group: int, taken: Taken) -> list[rules.NodeView]:
        """The group's feasible nodes, without the GPUs and resources earlier groups took.

        A group asking resources counts each node's pods by its free resources less the
        earlier groups' pods' asks there (docs/resources.md "Node resources").
        """
        gang = self.request.groups[group]
        gpus: dict[str, set[int]] = {}
        used: dict[str, dict[str, int]] = {}
        for owner, pod in taken:
            gpus.setdefault(pod.node, set()).update(pod.gpus)
            on_node = used.setdefault(pod.node, {})
            for name, quantity in self.asks(owner).items():
                on_node[name] = on_node.get(name, 0) + quantity
        views = [
            replace(node, free=tuple(g for g in node.free if g not in gpus.get(node.name, ())))
            for node in rules.feasible(self.nodes, gang.selector)
        ]
        asks = self.asks(group)
        if not asks:
            return views
        bounded = []
        for view in views:
            taken_here = used.get(view.name, {})
            free = {r: q - taken_here.get(r, 0) for r, q in view.resources.items()}
            pods, bound = pods_fitting(free, asks)
            bounded.append(replace(view, resource_pods=pods, bound_by=bound))
        return bounded

    def asks(self, group: int) -> Mapping[str, int]:
        """What each pod of a group asks besides GPUs."""
        return self.request.asks[group] if self.request.asks else {}

    def place_in(
        self, group: int, usable: list[rules.NodeView], depth: int, path: Path, pods: int
    ) -> tuple[tuple[PodPlacement, ...], tuple[Path, ...]]:
        """Rules 4-6 (and slices) for one group inside ``path``."""
        gang = self.request.groups[group]
        layers = self.layers[group]
        count = rules.slice_counter(usable, gang.gpus_per_pod, layers)
        if count is None:
            placed = rules.spread(
                usable, self.node_depth, depth, path, pods, gang.gpus_per_pod, gang.spread
            )
        else:
            placed = rules.spread_slices(
                usable,
                self.node_depth,
                path,
                pods // layers[0][1],
                gang.gpus_per_pod,
                layers,
                0,
                count,
                gang.spread,
            )
        paths = {node.name: node.full_path for node in usable}
        ranked = rules.ranked(placed, paths)
        return ranked, slicing.slice_paths(ranked, layers, paths)

    def sizes(self, group: int, elastic: bool) -> int:
        """Pods a group takes: all, or its ``min_pods`` in the elastic retry."""
        gang = self.request.groups[group]
        return _smallest(gang) if elastic else gang.pods

    def in_candidate(
        self, depth: int, path: Path, elastic: bool
    ) -> list[tuple[tuple[PodPlacement, ...], tuple[Path, ...]]] | Failure:
        """Every group inside one candidate, or the first that failed."""
        order = self.request.placing_order()
        for group in order:
            wanted = self.sizes(group, elastic)
            held = self.held(group, self.usable(group, []), path, wanted)
            if held < wanted:
                return Failure(group, f"holds {held} of its {wanted} pods", held, wanted)
        outcome = self.place_all(depth, path, elastic, None)
        if isinstance(outcome, tuple):
            failure, pin = outcome
            if pin is None:
                return failure
            # Room for a follower: once more, the follower placed in its anchor's rank-0
            # domain just before the anchor; if that fails too, the first failure stands.
            again = self.place_all(depth, path, elastic, pin)
            return failure if isinstance(again, tuple) else again
        return outcome

    def anchor_first(
        self,
        group: int,
        usable: list[rules.NodeView],
        domain: tuple[int, Path],
        within: tuple[int, Path],
        wanted: int,
        taken: Taken,
    ) -> tuple[tuple[PodPlacement, ...], tuple[Path, ...]] | Failure | None:
        """The anchor of a pinned follower, placed around it.

        As many pods as ``domain`` holds go there first, the rest by rules 4-6 in ``within``
        (the anchor's own target); None when the domain holds none of them (the usual
        placement then decides).
        """
        depth, path = domain
        inside = self.held(group, usable, path, wanted)
        if inside == 0:
            return None
        first, _ = self.place_in(group, usable, depth, path, inside)
        if inside == wanted:
            return first, ()
        more = [*taken, *((group, pod) for pod in first)]
        rest_usable = self.usable(group, more)
        left = wanted - inside
        held = self.held(group, rest_usable, within[1], left)
        if held < left:
            why = f"has room for {held} of its {left} pods after the earlier groups"
            return Failure(group, why, held, left)
        rest, _ = self.place_in(group, rest_usable, within[0], within[1], left)
        paths = {node.name: node.full_path for node in usable}
        return rules.ranked([*first, *rest], paths), ()

    def place_all(
        self, depth: int, path: Path, elastic: bool, pin: Pin | None
    ) -> list[tuple[tuple[PodPlacement, ...], tuple[Path, ...]]] | tuple[Failure, Pin | None]:
        """Every group in placing order, or the failure and the follower to pin.

        With ``pin``, its follower goes in its domain just before its anchor. On a failure,
        the pin for a second try when the group that failed did not fit in its anchor's
        rank-0 domain.
        """
        taken: Taken = []
        plans: dict[int, tuple[tuple[PodPlacement, ...], tuple[Path, ...]]] = {}
        node_paths = {node.name: node.full_path for node in self.nodes}
        turns: list[tuple[int, tuple[int, Path] | None]] = []
        for group in self.request.placing_order():
            if pin is not None and group == pin[0]:
                continue
            if pin is not None and group == pin[1]:
                turns.append((pin[0], (pin[2], pin[3])))
            turns.append((group, None))
        for group, forced in turns:
            target_depth, target, anchor_of = depth, path, None
            if forced is not None:
                target_depth, target = forced
            else:
                for member, anchor, at in self.colocations:
                    if member == group and at > depth and anchor in plans:
                        first = plans[anchor][0][0]
                        target_depth, target = at, node_paths[first.node][:at]
                        anchor_of = anchor
                        break
            usable = self.usable(group, taken)
            wanted = self.sizes(group, elastic)
            if pin is not None and group == pin[1] and not self.layers[group]:
                within = (target_depth, target)
                around = self.anchor_first(group, usable, (pin[2], pin[3]), within, wanted, taken)
                if isinstance(around, Failure):
                    return around, None
                if around is not None:
                    plans[group] = around
                    taken.extend((group, pod) for pod in around[0])
                    continue
            held = self.held(group, usable, target, wanted)
            if held < wanted:
                where = "after the earlier groups"
                if (target_depth, target) != (depth, path):
                    level = rules.level_name(self.levels, target_depth)
                    where = f"in {level} {'/'.join(target)} (its colocation)"
                why = f"has room for {held} of its {wanted} pods {where}"
                retry = None
                if anchor_of is not None and pin is None:
                    retry = (group, anchor_of, target_depth, target)
                return Failure(group, why, held, wanted), retry
            plans[group] = self.place_in(group, usable, target_depth, target, wanted)
            taken.extend((group, pod) for pod in plans[group][0])
        for member, anchor, at in self.colocations:
            if at <= depth:
                continue
            home = node_paths[plans[anchor][0][0].node][:at]
            pods = plans[member][0]
            inside = sum(1 for pod in pods if node_paths[pod.node][:at] == home)
            if inside < len(pods):
                level = rules.level_name(self.levels, at)
                anchor_name = self.request.groups[anchor].name
                why = f'is not all in the {level} of rank 0 of group "{anchor_name}"'
                return Failure(member, why, inside, len(pods)), None
        return [plans[group] for group in range(len(self.request.groups))]

    def _filters(self) -> list[Filter]:
        return [
            g.selector if isinstance(g.selector, Filter) else Filter(dict(g.selector))
            for g in self.request.groups
        ]

    def candidates(self, depth: int, need: int, policy: str) -> list[Path]:
        """Domains of ``depth`` with ``need`` free GPUs, in rule 3's order.

        Over the uncordoned nodes some group's tolerations admit (docs/roles.md, rule 2).
        """
        usable = rules.feasible(self.nodes, order_filter(self._filters()))
        free = rules.free_gpus_by_path(usable)
        paths = [p for p in rules.domains_at(usable, depth) if free[p] >= need]
        if policy == "best-fit":
            return sorted(paths, key=lambda p: (rules.best_fit_key(free, p), p))
        if policy == "best-fit-path":
            return sorted(paths, key=lambda p: (free[p], p))
        return sorted(paths)


def place_roles(
    nodes: Sequence[rules.NodeView],
    levels: Sequence[str],
    request: MultiGang,
    policy: str = "best-fit",
) -> tuple[Placement | None, list[Trial]]:
    """Where a multi-role gang goes, and the levels tried (for its reason).

    If no level holds the full unit and some group is elastic, the coarsest level is tried
    again with every elastic group at its ``min_pods``.

    Raises:
        ValueError: An unknown level, or slice levels that do not nest.

    """
    coarsest = rules.depth_of(levels, request.required_level)
    planner = Planner(nodes, levels, request, coarsest)
    trials: list[Trial] = []
    for depth in range(planner.node_depth, coarsest - 1, -1):
        first: tuple[Path, Failure] | None = None
        for path in planner.candidates(depth, request.total_gpus, policy):
            outcome = planner.in_candidate(depth, path, elastic=False)
            if not isinstance(outcome, Failure):
                return unit_placement(levels, request, depth, path, outcome), trials
            first = first or (path, outcome)
        trials.append((depth, *first) if first else (depth, None, None))
    if request.elastic:
        for path in planner.candidates(coarsest, request.min_gpus, policy):
            outcome = planner.in_candidate(coarsest, path, elastic=True)
            if not isinstance(outcome, Failure):
                return unit_placement(levels, request, coarsest, path, outcome), trials
    return None, trials


def taking_resources(
    views: Sequence[rules.NodeView], request: MultiGang, placement: Placement
) -> list[rules.NodeView]:
    """The views once a unit's pods use what their groups ask (docs/resources.md)."""
    if not request.asks:
        return list(views)
    used: dict[str, dict[str, int]] = {}
    pods = iter(placement.pods)
    for asks, (_, count) in zip(request.asks, placement.groups_counts, strict=True):
        for pod in (next(pods) for _ in range(count)):
            on_node = used.setdefault(pod.node, {})
            for name, quantity in asks.items():
                on_node[name] = on_node.get(name, 0) + quantity
    return [
        replace(
            view,
            resources={r: q - used.get(view.name, {}).get(r, 0) for r, q in view.resources.items()},
        )
        for view in views
    ]


def unit_placement(
    levels: Sequence[str],
    request: MultiGang,
    depth: int,
    path: Path,
    plans: list[tuple[tuple[PodPlacement, ...], tuple[Path, ...]]],
) -> Placement:
    """The unit's placement from each group's ranked pods and slice paths (request order)."""
    pods = tuple(pod for ranked, _ in plans for pod in ranked)
    sliced = tuple(s for _, paths in plans for s in paths)
    groups = tuple(
        (g.name, len(ranked)) for g, (ranked, _) in zip(request.groups, plans, strict=True)
    )
    return Placement(pods, rules.level_name(levels, depth), path, sliced, groups)


def trial_text(levels: Sequence[str], request: MultiGang, trial: Trial) -> str:
    """One level of the reason: its first candidate and the group that failed there."""
    depth, path, failure = trial
    level = rules.level_name(levels, depth)
    if path is None or failure is None:
        return f"no {level} has {request.total_gpus} free GPUs"
    where = f"{level} {'/'.join(path)}" if path else "the cluster"
    return f'in {where}, group "{request.groups[failure.group].name}" {failure.why}'


def lone_failure(
    nodes: Sequence[rules.NodeView], levels: Sequence[str], request: MultiGang, depth: int
) -> tuple[int, int, int] | None:
    """The first group, in placing order, that no domain of ``depth`` holds even alone.

    Returns (group, pods the best such domain holds, pods wanted), the group at its smallest
    accepted size, or None.
    """
    planner = Planner(nodes, levels, request, rules.depth_of(levels, request.required_level))
    for group in request.placing_order():
        wanted = _smallest(request.groups[group])
        usable = planner.usable(group, [])
        held = max(
            (planner.held(group, usable, path, wanted) for path in rules.domains_at(usable, depth)),
            default=0,
        )
        if held < wanted:
            return group, held, wanted
    return None


def lone_text(levels: Sequence[str], depth: int, held: int, wanted: int) -> str:
    """The text of a lone failure: ``cannot fit even alone: the best rack holds 2 of 3 pods``."""
    place = "the cluster" if depth == 0 else f"the best {rules.level_name(levels, depth)}"
    return f"cannot fit even alone: {place} holds {held} of its {wanted} pods"


def roles_reason(
    nodes: Sequence[rules.NodeView], levels: Sequence[str], request: MultiGang, trials: list[Trial]
) -> str:
    """``Unschedulable.reason`` of a multi-role gang.

    The levels tried, then the first group that no domain of the coarsest level tried holds
    even alone, if any.
    """
    name = f' "{request.name}"' if request.name else ""
    parts = [trial_text(levels, request, trial) for trial in trials]
    if trials:
        depth = trials[-1][0]
        lone = lone_failure(nodes, levels, request, depth)
        if lone is not None:
            group, held, wanted = lone
            text = lone_text(levels, depth, held, wanted)
            parts.append(f'group "{request.groups[group].name}" {text}')
    tried = "; ".join(parts)
    return (
        f"multi-role gang{name} of {len(request.groups)} groups ({request.total_gpus} GPUs) "
        f"does not fit: {tried}"
    )
