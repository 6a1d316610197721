"""The placement rules, as pure functions over a picture of the nodes.

This is a transcription of the docs/placement.md (the one canonical text),
rule by rule and in the same order, written for reading rather than speed: every function
recomputes what it needs from the nodes it is given. ``gangplace.reference.Cluster`` (the
oracle of the differential tests) calls :func:`place` and :func:`unschedulable_reason` on
the state it keeps; the Rust core must give the same answers.

Example:
    >>> nodes = [NodeView("a", ("r1",), free=(0, 1, 2, 3)), NodeView("b", ("r2",), free=(0,))]
    >>> placement = place(nodes, ("rack",), Gang(pods=2, gpus_per_pod=2))
    >>> placement.level, placement.domain, [pod.gpus for pod in placement.pods]
    ('node', ('r1', 'a'), [(0, 1), (2, 3)])

"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from gangplace.reference import fractions
from gangplace.reference import gpus as gpus_module
from gangplace.reference import slices as slicing
from gangplace.reference.filters import Filter
from gangplace.reference.values import CLUSTER, NODE, Path, Placement, PodPlacement

__all__ = ["Gang", "NodeView", "capacity", "place", "unschedulable_reason"]

UNBOUNDED = 2**63  # the pods a node's GPUs hold for pods without GPUs: no bound


@dataclass(frozen=True)
class NodeView:
    """What the rules read of one node.

    Attributes:
        name: The node's name.
        path: Its domain names, outermost level first (one per level).
        free: Its free healthy GPU indices, ascending.
        cordoned: Whether it takes no new placements.
        labels: Its labels.

    """

    name: str
    path: Path
    free: tuple[int, ...]
    cordoned: bool = False
    labels: Mapping[str, str] = field(default_factory=dict)
    gpu_paths: tuple[tuple[int, ...], ...] | None = None  # its GPU groups, if any
    gpu_levels: tuple[str, ...] = ()
    numa_single: bool = False  # the request counts pods per NUMA group
    # docs/resources.md "Node resources": the pods of the request its free resources hold (None: the
    # request asks none), and the resource that bounds them (fewest pods, then first name).
    resource_pods: int | None = None
    bound_by: str | None = None
    # docs/resources.md "Fractions of a GPU": the thousandths each pod of the request asks (None:
    # whole GPUs), and ``(gpu, room)`` of every GPU a share may use (free, or shared and healthy).
    milli: int | None = None
    room: tuple[tuple[int, int], ...] = ()
    taints: tuple[tuple[str, str, str], ...] = ()  # docs/placement.md, rule 1
    # docs/resources.md "Node resources", for a request asking some: the node's free resources by
    # name, what its use passes its capacity by (a capacity that shrank under running pods: freed
    # amounts pay that back first), and what each pod of the request asks. Multi-role
    # groups read ``resources`` less what the earlier groups took; preemption adds back what
    # its victims free (empty: not asked).
    resources: Mapping[str, int] = field(default_factory=dict)
    overused: Mapping[str, int] = field(default_factory=dict)
    asks: Mapping[str, int] = field(default_factory=dict)

    def pods(self, gpus_per_pod: int) -> int:
        """Rule 1: pods of ``gpus_per_pod`` GPUs the node holds.

        With ``numa="single"``, the sum over its NUMA groups (the level named ``numa``, else
        the outermost; a node without groups is one group). With resources, no more than its
        free resources hold.
        """
        by_gpus = self.gpu_pods(gpus_per_pod)
        return by_gpus if self.resource_pods is None else min(by_gpus, self.resource_pods)

    def gpu_pods(self, gpus_per_pod: int) -> int:
        """The pods its free GPUs hold (per NUMA group with ``numa="single"``).

        No bound for pods without GPUs: their resources count them. Fractional pods: the
        shares the GPUs' room holds (docs/resources.md "Fractions of a GPU").
        """
        if self.milli is not None:
            return fractions.share_pods(self.room, self.milli)
        if gpus_per_pod == 0:
            return UNBOUNDED
        if not self.numa_single or self.gpu_paths is None:
            return len(self.free) // gpus_per_pod
        level = self.gpu_levels.index("numa") if "numa" in self.gpu_levels else 0
        groups: dict[tuple[int, ...], int] = {}
        for gpu in self.free:
            key = self.gpu_paths[gpu][: level + 1]
            groups[key] = groups.get(key, 0) + 1
        return sum(free // gpus_per_pod for free in groups.values())

    @property
    def full_path(self) -> Path:
        """Its domain path followed by its name: its place in path order (rule 9)."""
        return (*self.path, self.name)


@dataclass(frozen=True)
class Gang:
    """What the rules read of a request (the fields of ``gangplace.GangRequest``)."""

    pods: int
    gpus_per_pod: int = 1
    min_pods: int | None = None
    required_level: str | None = None
    selector: Mapping[str, str] | Filter = field(default_factory=dict)  # labels, or a Filter
    name: str = ""
    slices: tuple[tuple[str, int], ...] = ()
    spread: str = "pack"
    numa: str = "none"
    gpu_milli: int | None = None  # docs/resources.md (then ``gpus_per_pod`` is 0)


# Rule 1: feasible nodes, and capacity in whole pods.


def feasible(
    nodes: Sequence[NodeView], selector: Mapping[str, str] | Filter, numa: str = "none"
) -> list[NodeView]:
    """Rule 1: the uncordoned nodes the filter admits (labels alone: a filter of them).

    With ``numa="single"`` they are marked to count pods per NUMA group.
    """
    flt = selector if isinstance(selector, Filter) else Filter(dict(selector))
    usable = [node for node in nodes if not node.cordoned and flt.admits(node.labels, node.taints)]
    if numa == "single":
        usable = [replace(node, numa_single=True) for node in usable]
    return usable


def capacity(nodes: Sequence[NodeView], gpus_per_pod: int) -> int:
    """Rule 1: pods a set of feasible nodes holds; a pod never spans nodes."""
    return sum(node.pods(gpus_per_pod) for node in nodes)


def domains_at(nodes: Sequence[NodeView], depth: int) -> dict[Path, list[NodeView]]:
    """The domains of one depth (0: the cluster; last: single nodes) with their nodes."""
    domains: dict[Path, list[NodeView]] = {}
    for node in nodes:
        domains.setdefault(node.full_path[:depth], []).append(node)
    return domains


# Rules 2 and 3: the level, then the domain.


def fitting_domain(
    nodes: Sequence[NodeView],
    node_depth: int,
    pods: int,
    gpus_per_pod: int,
    coarsest: int,
    policy: str,
    held: Callable[[Path], int] | None = None,
) -> tuple[int, Path] | None:
    """Rules 2 and 3: the finest level with a domain holding ``pods``, and the chosen one.

    Levels are tried finest first (``node_depth`` down to ``coarsest``). Best-fit takes the
    domain with the fewest free healthy GPUs over its feasible nodes, then the one whose
    parent has the fewest (over its feasible nodes), then the grandparent's, and so on up to
    the root, then the smallest path; best-fit-path the fewest free, then the smallest path;
    first-fit the smallest path. ``nodes`` are the feasible
    ones; ``held`` gives the pods a path holds in whole slices (slice gangs), else rule 1's
    capacity counts.
    """
    free_by_path = free_gpus_by_path(nodes)
    for depth in range(node_depth, coarsest - 1, -1):
        candidates = []
        for path, members in domains_at(nodes, depth).items():
            room = capacity(members, gpus_per_pod) if held is None else held(path)
            if room >= pods:
                candidates.append((best_fit_key(free_by_path, path), path))
        if candidates:
            if policy == "best-fit":
                return depth, min(candidates)[1]
            if policy == "best-fit-path":  # the rule before the ancestor tie-break
                return depth, min((key[0], path) for key, path in candidates)[1]
            return depth, min(path for _, path in candidates)
    return None


def free_gpus_by_path(nodes: Sequence[NodeView]) -> dict[Path, int]:
    """Free healthy GPUs over the feasible ``nodes`` of every domain (and node) path."""
    free: dict[Path, int] = {}
    for node in nodes:
        for depth in range(len(node.full_path) + 1):
            prefix = node.full_path[:depth]
            free[prefix] = free.get(prefix, 0) + len(node.free)
    return free


def best_fit_key(free_by_path: Mapping[Path, int], path: Path) -> tuple[int, ...]:
    """Rule 3's best-fit key: free GPUs of the domain, of its parent, ..., of the root."""
    return tuple(free_by_path[path[:depth]] for depth in range(len(path), -1, -1))


# Rules 4 and 5: spreading inside the domain, GPUs on a node.


def spread(
    nodes: Sequence[NodeView],
    node_depth: int,
    depth: int,
    path: Path,
    pods: int,
    gpus_per_pod: int,
    how: str = "pack",
) -> list[PodPlacement]:
    """Rule 4: ``pods`` pods over the domain ``path``, as few children as possible per level.

    A child that can hold all remaining pods takes them (the smallest such capacity, then the
    smallest path); otherwise the child with the largest capacity (then the smallest path) is
    filled and the rest continues. ``nodes`` are the feasible ones. With ``how="balanced"``
    the pods are split by :func:`balanced` instead, at every level.
    """
    if depth == node_depth:
        (node,) = (node for node in nodes if node.full_path == path)
        return take_gpus(node, pods, gpus_per_pod)
    children = {
        child: capacity(members, gpus_per_pod)
        for child, members in domains_at(nodes, depth + 1).items()
        if child[:depth] == path
    }
    return distribute(
        children,
        pods,
        lambda child, count: spread(nodes, node_depth, depth + 1, child, count, gpus_per_pod, how),
        how,
    )


def distribute(
    children: Mapping[Path, int],
    units: int,
    place: Callable[[Path, int], list[PodPlacement]],
    how: str,
) -> list[PodPlacement]:
    """Units over children: rule 4's :func:`fill`, or the :func:`balanced` split."""
    return balanced(children, units, place) if how == "balanced" else fill(children, units, place)


def balanced(
    children: Mapping[Path, int],
    units: int,
    place: Callable[[Path, int], list[PodPlacement]],
) -> list[PodPlacement]:
    """The balanced spread (docs/shapes.md "Balanced spread").

    As many children as :func:`fill` would use (the fewest whose largest capacities reach
    ``units``), chosen by (capacity descending, path); each gets ``min(capacity, L)`` for the
    largest ``L`` that does not overshoot, then the leftover units go one each to the chosen
    children that can take one more, in path order.
    """
    usable = [(held, child) for child, held in sorted(children.items()) if held > 0]
    by_size = sorted(usable, key=lambda item: -item[0])  # stable: path order among equals
    count = next(
        used
        for used in range(1, len(by_size) + 1)
        if sum(held for held, _ in by_size[:used]) >= units
    )
    chosen = sorted(by_size[:count], key=lambda item: item[1])
    level = max(
        height
        for height in range(units + 1)
        if sum(min(held, height) for held, _ in chosen) <= units
    )
    shares = [min(held, level) for held, _ in chosen]
    left = units - sum(shares)
    for index, (held, _) in enumerate(chosen):
        if left and held > shares[index]:
            shares[index] += 1
            left -= 1
    placed: list[PodPlacement] = []
    for (_, child), share in zip(chosen, shares, strict=True):
        placed += place(child, share)
    return placed


def fill(
    children: Mapping[Path, int],
    units: int,
    place: Callable[[Path, int], list[PodPlacement]],
) -> list[PodPlacement]:
    """Rule 4 over children with their capacities (pods, or slices of a slice gang).

    A child that holds all remaining units takes them (the smallest such capacity, then the
    smallest path); otherwise the child with the largest capacity (then the smallest path) is
    filled and the rest continues. ``place`` puts a number of units into one child.
    """
    left = {child: held for child, held in children.items() if held > 0}
    placed: list[PodPlacement] = []
    remaining = units
    while remaining > 0:
        holding_all = [(held, child) for child, held in left.items() if held >= remaining]
        if holding_all:
            _, child = min(holding_all)
            return placed + place(child, remaining)
        largest, child = min((-held, child) for child, held in left.items())
        placed += place(child, -largest)
        remaining += largest
        del left[child]
    return placed


def take_gpus(node: NodeView, pods: int, gpus_per_pod: int) -> list[PodPlacement]:
    """Rule 5: each pod takes the lowest-indexed free healthy GPUs of the node.

    On a node with GPU groups, the GPUs :func:`gangplace.reference.gpus.choose` picks. Pods
    without GPUs (docs/resources.md "Node resources") take none; fractional pods take a share of one
    GPU each by rule F2 (docs/resources.md "Fractions of a GPU").
    """
    if node.milli is not None:
        chosen = fractions.take_shares(node.room, node.milli, pods)
        return [PodPlacement(node.name, (gpu,)) for gpu in chosen]
    if node.gpu_paths is None or gpus_per_pod == 0:
        return [
            PodPlacement(node.name, node.free[i * gpus_per_pod : (i + 1) * gpus_per_pod])
            for i in range(pods)
        ]
    placed = []
    free = list(node.free)
    for _ in range(pods):
        gpus = gpus_module.choose(free, node.gpu_paths, gpus_per_pod)
        placed.append(PodPlacement(node.name, gpus))
        free = [gpu for gpu in free if gpu not in gpus]
    return placed


# Rule 6: ranks.


def ranked(pods: list[PodPlacement], paths: Mapping[str, Path]) -> tuple[PodPlacement, ...]:
    """Rule 6: pods ordered by (node's domain path, node name, first GPU index).

    A pod without GPUs comes first on its node.
    """
    return tuple(sorted(pods, key=lambda pod: (paths[pod.node], min(pod.gpus, default=-1))))


# Rule 7: elastic gangs, and the whole placement.


def place(
    nodes: Sequence[NodeView], levels: Sequence[str], gang: Gang, policy: str = "best-fit"
) -> Placement | None:
    """Where a gang goes by rules 1-7, or ``None`` when no allowed domain holds it.

    Rule 7: when no allowed domain holds ``gang.pods`` and ``min_pods`` is smaller, the
    largest capacity of a single domain at the coarsest allowed level is taken if it reaches
    ``min_pods``, and that many pods are placed by rules 2-6. With slices, capacities are
    pods in whole outermost slices and pods go by :func:`spread_slices` (docs/shapes.md "Slices").

    Raises:
        ValueError: An unknown level, or slice levels that do not nest.

    """
    node_depth, size = len(levels) + 1, gang.gpus_per_pod
    coarsest = depth_of(levels, gang.required_level)
    layers = slicing.resolve(gang.slices, levels, coarsest)
    usable = feasible(nodes, gang.selector, gang.numa)
    count = slice_counter(usable, size, layers)
    held = None if count is None else lambda path: count(path, 0) * layers[0][1]
    pods = gang.pods
    found = fitting_domain(usable, node_depth, pods, size, coarsest, policy, held)
    if found is None and gang.min_pods is not None and gang.min_pods < pods:
        best = max(
            (
                capacity(members, size) if held is None else held(path)
                for path, members in domains_at(usable, coarsest).items()
            ),
            default=0,
        )
        if best >= gang.min_pods:
            pods = best
            found = fitting_domain(usable, node_depth, pods, size, coarsest, policy, held)
    if found is None:
        return None
    depth, path = found
    if count is None:
        placed = spread(usable, node_depth, depth, path, pods, size, gang.spread)
    else:
        outer = pods // layers[0][1]
        placed = spread_slices(usable, node_depth, path, outer, size, layers, 0, count, gang.spread)
    paths = {node.name: node.full_path for node in usable}
    pods_in_order = ranked(placed, paths)
    sliced = slicing.slice_paths(pods_in_order, layers, paths)
    return Placement(pods_in_order, level_name(levels, depth), path, sliced)


# Slices (docs/shapes.md "Slices").

SliceCounter = Callable[[Path, int], int]
"""Slices of a layer that a path holds: ``count(path, layer)``."""


def slice_counter(
    nodes: Sequence[NodeView], gpus_per_pod: int, layers: slicing.Layers
) -> SliceCounter | None:
    """:func:`gangplace.reference.slices.units` over the feasible ``nodes``.

    Returns ``None`` without slices.
    """
    if not layers:
        return None
    held: dict[Path, int] = {}
    children: dict[Path, set[Path]] = {}
    for node in nodes:
        full = node.full_path
        for depth in range(len(full) + 1):
            held[full[:depth]] = held.get(full[:depth], 0) + node.pods(gpus_per_pod)
            if depth < len(full):
                children.setdefault(full[:depth], set()).add(full[: depth + 1])

    def count(path: Path, layer: int) -> int:
        return slicing.units(
            path,
            layers,
            layer,
            lambda path: held.get(path, 0),
            lambda path: sorted(children.get(path, ())),
        )

    return count


def spread_slices(
    nodes: Sequence[NodeView],
    node_depth: int,
    path: Path,
    units: int,
    gpus_per_pod: int,
    layers: slicing.Layers,
    layer: int,
    count: SliceCounter,
    how: str = "pack",
) -> list[PodPlacement]:
    """Rule 4 with slices: ``units`` slices of layer ``layer`` over the domain ``path``.

    Coarser than the layer's level, slices go to children as pods do (:func:`fill`, by their
    slice counts). Inside a domain of the layer's level its slices become slices of the next
    layer; inside the innermost one, pods follow rules 4 and 5.
    """
    depth, size = layers[layer]
    if len(path) >= depth:
        if layer + 1 < len(layers):
            inner = units * (size // layers[layer + 1][1])
            return spread_slices(
                nodes, node_depth, path, inner, gpus_per_pod, layers, layer + 1, count, how
            )
        return spread(nodes, node_depth, len(path), path, units * size, gpus_per_pod, how)
    children = {
        child: count(child, layer)
        for child in domains_at(nodes, len(path) + 1)
        if child[: len(path)] == path
    }
    return distribute(
        children,
        units,
        lambda child, n: spread_slices(
            nodes, node_depth, child, n, gpus_per_pod, layers, layer, count, how
        ),
        how,
    )


def depth_of(levels: Sequence[str], level: str | None) -> int:
    """The depth of a level name: ``cluster`` (or ``None``) 0, named levels 1.., ``node`` last.

    Raises:
        ValueError: An unknown level; the message lists the levels, finest first.

    """
    if level is None or level == CLUSTER:
        return 0
    if level == NODE:
        return len(levels) + 1
    if level in levels:
        return list(levels).index(level) + 1
    known = ", ".join([NODE, *reversed(levels), CLUSTER])
    raise ValueError(f"unknown required_level {level!r}; the levels are {known}")


def level_name(levels: Sequence[str], depth: int) -> str:
    """The level name of a depth."""
    if depth == 0:
        return CLUSTER
    if depth == len(levels) + 1:
        return NODE
    return levels[depth - 1]


def unschedulable_reason(nodes: Sequence[NodeView], levels: Sequence[str], gang: Gang) -> str:
    """``Unschedulable.reason``: the best domain of each level tried, finest first.

    With slices, a domain's count is its pods in whole outermost slices.
    """
    usable = feasible(nodes, gang.selector, gang.numa)
    coarsest = depth_of(levels, gang.required_level)
    layers = slicing.resolve(gang.slices, levels, coarsest)
    count = slice_counter(usable, gang.gpus_per_pod, layers)
    unit = "pod" if count is None else "slice"
    tried = []
    for depth in range(len(levels) + 1, coarsest - 1, -1):
        level = level_name(levels, depth)
        capacities = [
            (
                capacity(members, gang.gpus_per_pod)
                if count is None
                else count(path, 0) * layers[0][1],
                path,
            )
            for path, members in sorted(domains_at(usable, depth).items())
        ]
        best = max((held for held, _ in capacities), default=0)
        if best == 0:
            tried.append(f"no {level} holds a {unit}")
            continue
        path = next(path for held, path in capacities if held == best)
        where = f" {'/'.join(path)}" if path else ""
        members = domains_at(usable, depth)[path]
        bound = limited_by(members, gang.gpus_per_pod)
        limited = f", limited by {bound}" if bound else ""
        tried.append(f"best {level}{where} holds {best} of {gang.pods}{limited}")
    quoted = f' "{gang.name}"' if gang.name else ""
    minimum = ""
    if gang.min_pods is not None and gang.min_pods < gang.pods:
        minimum = f", at least {gang.min_pods}"
    return (
        f"gang{quoted} of {counted(gang.pods, 'pod')} x {pod_size(gang)}"
        f"{slices_text(gang.slices)}{minimum} does not fit: {'; '.join(tried)}"
    )


def limited_by(nodes: Sequence[NodeView], gpus_per_pod: int) -> str | None:
    """docs/resources.md "Node resources": the resource that bounds the most of ``nodes``.

    Bounds: keeps below the pods their free GPUs hold. Ties go to the first name; ``None``
    when none does.
    """
    counts: dict[str, int] = {}
    for node in nodes:
        if node.resource_pods is None or node.bound_by is None:
            continue
        by_gpus = len(node.free) // gpus_per_pod if gpus_per_pod else UNBOUNDED
        if node.milli is not None:
            by_gpus = node.gpu_pods(gpus_per_pod)  # fractions: their GPUs' room
        if node.resource_pods < by_gpus:
            counts[node.bound_by] = counts.get(node.bound_by, 0) + 1
    if not counts:
        return None
    most = max(counts.values())
    return min(name for name, count in counts.items() if count == most)


def slices_text(slices: Sequence[tuple[str, int]]) -> str:
    """`` in slices of 16 pods per rack, 4 per node`` (empty without slices)."""
    if not slices:
        return ""
    (level, size), *inner = slices
    layers = [f"{counted(size, 'pod')} per {level}"]
    layers += [f"{inner_size} per {inner_level}" for inner_level, inner_size in inner]
    return f" in slices of {', '.join(layers)}"


def pod_size(gang: Gang) -> str:
    """What each pod asks of GPUs: ``2 GPUs``, or ``460 thousandths of a GPU``."""
    if gang.gpu_milli is not None:
        return f"{gang.gpu_milli} thousandths of a GPU"
    return counted(gang.gpus_per_pod, "GPU")


def counted(count: int, noun: str) -> str:
    """``1 pod``, ``2 pods``."""
    return f"1 {noun}" if count == 1 else f"{count} {noun}s"
