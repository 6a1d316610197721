"""The reference's own snapshot format (JSON).

What ``Cluster.snapshot`` writes and ``Cluster.restore`` reads. Not the engine's format; the
two never exchange bytes.

Like the engine, a restore shifts every reservation deadline and every hold's start time
(``since``) by the difference between the restoring clock and the snapshot's.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from gangplace.errors import InvalidRequest, InvalidSnapshot
from gangplace.reference.values import Placement, PodPlacement, Request

if TYPE_CHECKING:
    from gangplace.reference.oracle import Cluster

__all__ = ["RequestRecord", "dump", "load"]

FORMAT = "gangplace-reference/2"
C = TypeVar("C", bound="Cluster")


@dataclass(frozen=True)
class RequestRecord:
    """A request as a snapshot keeps it: the fields the reference reads of one."""

    pods: int
    gpus_per_pod: int
    min_pods: int | None
    required_level: str | None
    selector: dict[str, str] = field(default_factory=dict)
    name: str = ""
    priority: int = 0
    preemptible: bool = True
    movable: bool = False
    slices: tuple[tuple[str, int], ...] = ()
    spread: str = "pack"
    numa: str = "none"
    spares: int = 0
    resources_per_pod: dict[str, int] = field(default_factory=dict)
    gpu_milli: int | None = None
    affinity: tuple[Any, ...] = ()  # docs/placement.md, rule 1
    tolerations: tuple[Any, ...] = ()


def _filter_fields(request: Any) -> tuple[tuple[Any, ...], tuple[Any, ...]]:
    """A request's affinity terms and tolerations, as tuples all the way down."""
    affinity = tuple(
        tuple((key, operator, tuple(values)) for key, operator, values in term)
        for term in getattr(request, "affinity", ())
    )
    return affinity, tuple(tuple(t) for t in getattr(request, "tolerations", ()))


def record(request: Request) -> dict[str, Any]:
    """The fields of a request, for a snapshot."""
    return asdict(
        RequestRecord(
            request.pods,
            request.gpus_per_pod,
            request.min_pods,
            request.required_level,
            dict(request.selector),
            request.name,
            request.priority,
            request.preemptible,
            request.movable,
            tuple((str(level), int(size)) for level, size in request.slices),
            request.spread,
            request.numa,
            getattr(request, "spares", 0),
            dict(getattr(request, "resources_per_pod", None) or {}),
            getattr(request, "gpu_milli", None),
            *_filter_fields(request),
        )
    )


def request_from(fields: dict[str, Any]) -> RequestRecord | RolesRecord:
    """A snapshot's request record (JSON lists back to tuples)."""
    if "groups" in fields:
        groups = tuple(
            GroupRecord(
                **{
                    **group,
                    "slices": tuple(tuple(s) for s in group["slices"]),
                    **_filters_back(group),
                }
            )
            for group in fields.pop("groups")
        )
        colocate = tuple(tuple(entry) for entry in fields.pop("colocate"))
        return RolesRecord(groups=groups, colocate=colocate, **fields)
    layers = tuple((str(level), int(size)) for level, size in fields.pop("slices", ()))
    return RequestRecord(**{**fields, **_filters_back(fields)}, slices=layers)


def _filters_back(fields: dict[str, Any]) -> dict[str, Any]:
    """JSON lists of a record's affinity and tolerations back to tuples."""
    affinity = tuple(
        tuple((key, operator, tuple(values)) for key, operator, values in term)
        for term in fields.get("affinity", ())
    )
    return {
        "affinity": affinity,
        "tolerations": tuple(tuple(t) for t in fields.get("tolerations", ())),
    }


@dataclass(frozen=True)
class GroupRecord:
    """One group of a multi-role request, as a snapshot keeps it."""

    name: str
    pods: int
    gpus_per_pod: int
    min_pods: int | None
    selector: dict[str, str]
    slices: tuple[tuple[str, int], ...]
    spares: int = 0
    resources_per_pod: dict[str, int] = field(default_factory=dict)
    affinity: tuple[Any, ...] = ()  # docs/placement.md, rule 1
    tolerations: tuple[Any, ...] = ()


@dataclass(frozen=True)
class RolesRecord:
    """A multi-role request as a snapshot keeps it (docs/roles.md)."""

    groups: tuple[GroupRecord, ...]
    required_level: str | None
    colocate: tuple[tuple[str, str, str], ...]
    name: str
    spread: str
    priority: int
    preemptible: bool
    movable: bool


def roles_record(request: Any) -> dict[str, Any]:
    """The fields of a multi-role request, for a snapshot."""
    return asdict(
        RolesRecord(
            tuple(
                GroupRecord(
                    g.name,
                    g.pods,
                    g.gpus_per_pod,
                    g.min_pods,
                    dict(g.selector),
                    tuple((str(level), int(size)) for level, size in g.slices),
                    getattr(g, "spares", 0),
                    dict(getattr(g, "resources_per_pod", None) or {}),
                    *_filter_fields(g),
                )
                for g in request.groups
            ),
            request.required_level,
            tuple(tuple(entry) for entry in request.colocate),
            request.name,
            request.spread,
            request.priority,
            request.preemptible,
            request.movable,
        )
    )


def any_record(request: Any) -> dict[str, Any] | None:
    """A hold's request for a snapshot: a gang's, a multi-role gang's, or ``None``."""
    if request is None:
        return None
    return roles_record(request) if hasattr(request, "colocate") else record(request)


@dataclass(frozen=True)
class _Groups:
    """A node's GPU groups as a snapshot keeps them (what ``add_node`` reads)."""

    levels: list[str]
    paths: list[list[int]]


def dump(cluster: Cluster) -> bytes:
    """The state of ``cluster`` as JSON bytes."""
    now = cluster._reclaim()
    state = {
        "format": FORMAT,
        "levels": list(cluster.levels),
        "policy": cluster.policy,
        "cap": cluster.max_held_gpus_per_owner,
        "max_level": cluster.max_level,
        "taken_at": now,
        "nodes": [
            [n.name, n.gpus, list(n.path), n.labels, n.cordoned, sorted(n.unhealthy)]
            for n in sorted(cluster._nodes.values(), key=lambda n: n.name)
        ],
        "resources": {n.name: n.resources for n in cluster._nodes.values() if n.resources},
        "taints": {
            n.name: [list(t) for t in n.taints] for n in cluster._nodes.values() if n.taints
        },
        "resource_names": sorted(cluster._resource_names),
        "gpu_topologies": {
            n.name: [list(n.gpu_levels), [list(path) for path in n.gpu_paths]]
            for n in cluster._nodes.values()
            if n.gpu_paths is not None
        },
        "holds": [
            {
                "id": hid,
                "committed": hold.committed,
                "expires_at": hold.expires_at,
                "owner": hold.owner,
                "gpus": {name: sorted(gpus) for name, gpus in sorted(hold.gpus.items())},
                "pods": [[pod.node, list(pod.gpus)] for pod in hold.placement.pods],
                "level": hold.placement.level,
                "domain": list(hold.placement.domain),
                "slices": [list(path) for path in hold.placement.slices],
                "terms": [hold.priority, hold.preemptible, hold.movable],
                "since": hold.since,
                "groups": [list(entry) for entry in hold.placement.groups_counts],
                "request": any_record(hold.asked),
                "repairs": [hold.repairs, list(hold.repaired_ranks)],
                "repair_spares": [[r, p.node, list(p.gpus)] for r, p in hold.repair_spares],
                "spares": [[pod.node, list(pod.gpus)] for pod in hold.placement.spares],
                "ended": list(hold.ended),
                "asks": [dict(asks) for asks in hold.asks],
                "res_nodes": sorted(hold.res_nodes),
                "gpu_milli": hold.placement.gpu_milli,
            }
            for hid, hold in sorted(cluster._holds.items())
        ],
        "ended": [[hid, ending, owner] for hid, (ending, owner) in cluster._ended.items()],
    }
    return json.dumps(state, sort_keys=True).encode()


def load(cls: type[C], data: bytes, clock: Callable[[], float] | None) -> C:
    """A cluster of class ``cls`` rebuilt from ``dump`` bytes."""
    from gangplace.reference.oracle import _Hold

    try:
        state = json.loads(data)
        if state.get("format") != FORMAT:
            raise ValueError("not a reference snapshot")
        cluster = cls(
            state["levels"],
            policy=state["policy"],
            clock=clock,
            max_held_gpus_per_owner=state["cap"],
            max_level=state.get("max_level"),
        )
        offset = cluster._now() - state["taken_at"]
        groups = state.get("gpu_topologies", {})
        resources = state.get("resources", {})
        taints = state.get("taints", {})
        cluster._declare(state.get("resource_names", ()))
        for name, gpus, path, labels, cordoned, unhealthy in state["nodes"]:
            given = groups.get(name)
            cluster.add_node(
                name,
                gpus=gpus,
                topology=dict(zip(cluster.levels, path, strict=True)),
                labels=labels,
                unhealthy=unhealthy,
                gpu_topology=None if given is None else _Groups(*given),
                resources=resources.get(name),
                taints=[tuple(t) for t in taints.get(name, ())],
            )
            cluster._nodes[name].cordoned = cordoned
        for entry in state["holds"]:
            held = {name: set(indices) for name, indices in entry["gpus"].items()}
            pods = tuple(PodPlacement(node, tuple(g)) for node, g in entry["pods"])
            slices = tuple(tuple(path) for path in entry.get("slices", ()))
            groups = tuple((str(name), int(count)) for name, count in entry.get("groups", ()))
            extra = tuple(PodPlacement(node, tuple(g)) for node, g in entry.get("spares", ()))
            placement = Placement(
                pods,
                entry["level"],
                tuple(entry["domain"]),
                slices,
                groups,
                extra,
                entry.get("gpu_milli"),
            )
            committed = entry["committed"]
            deadline = entry["expires_at"] + (0.0 if committed else offset)
            priority, preemptible, movable = entry["terms"]
            request = None if entry["request"] is None else request_from(entry["request"])
            roles = request if isinstance(request, RolesRecord) else None
            gang = request if isinstance(request, RequestRecord) else None
            cluster._holds[entry["id"]] = _Hold(
                committed,
                deadline,
                held,
                placement,
                entry["owner"],
                priority,
                preemptible,
                movable,
                entry["since"] + offset,
                gang,
                roles,
            )
            repairs, ranks = entry.get("repairs", (None, ()))
            cluster._holds[entry["id"]].repairs = repairs
            cluster._holds[entry["id"]].repaired_ranks = tuple(int(r) for r in ranks)
            cluster._holds[entry["id"]].repair_spares = tuple(
                (int(r), PodPlacement(node, tuple(g)))
                for r, node, g in entry.get("repair_spares", ())
            )
            cluster._holds[entry["id"]].ended = tuple(int(r) for r in entry.get("ended", ()))
            cluster._holds[entry["id"]].asks = tuple(dict(a) for a in entry.get("asks", ()))
            cluster._holds[entry["id"]].res_nodes = set(entry.get("res_nodes", ()))
            for name, indices in held.items():
                node = cluster._nodes[name]
                (node.allocated if committed else node.reserved).update(indices)
        for hid, ending, owner in state["ended"]:
            cluster._remember(hid, ending, owner)
        cluster._sync_shares()
    except (ValueError, KeyError, TypeError, InvalidRequest) as error:
        raise InvalidSnapshot(f"invalid snapshot: {error}") from None
    return cluster
