"""docs/kubernetes.md K10-K11: pending pods carry their own constraints into the request.

A gang's pods keep their ``nodeSelector``, required node affinity, tolerations and requests;
placements made from them pass the kubelet's admission checks (restated below as the
kubelet runs them: node selector and affinity, taints, resources against allocatable less
what runs); what cannot be expressed is a warning; bad fields are ``PodGroupError`` naming
the pod and field.
"""

from __future__ import annotations

import copy
from typing import Any

import hypothesis.strategies as st
import pytest
from hypothesis import given, note, settings
from kubernetes import client

from gangplace import GangRequest, MultiGangRequest
from gangplace.k8s import (
    GANG_SIZE_ANNOTATION,
    ClusterSync,
    GangIncomplete,
    PodGroupError,
    binding_plan,
    request_from_pod_template,
    request_from_pods,
)
from gangplace.k8s.quantity import quantity

LEVELS = {"rack": "example.com/rack"}
DEDICATED = {"key": "dedicated", "value": "llm", "effect": "NoSchedule"}
TOLERATE = {"key": "dedicated", "operator": "Equal", "value": "llm", "effect": "NoSchedule"}


def node(name: str, rack: str, *, cpu: str = "128", pool: str = "a", taints: Any = ()) -> Any:
    capacity = {"nvidia.com/gpu": "8", "cpu": cpu, "memory": "1Ti"}
    return {
        "kind": "Node",
        "metadata": {
            "name": name,
            "uid": f"node-{name}",
            "labels": {"example.com/rack": rack, "pool": pool, "kubernetes.io/hostname": name},
        },
        "spec": {"taints": list(taints)},
        "status": {"capacity": capacity, "allocatable": capacity},
    }


def pending(name: str, gpus: int = 8, *, cpu: str | None = None, **spec: Any) -> Any:
    requests = {"cpu": cpu} if cpu else {}
    metadata = spec.pop("metadata", {})
    return {
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "ml", "uid": f"uid-{name}", **metadata},
        "spec": {
            "schedulerName": "gangplace",
            "containers": [
                {
                    "name": "main",
                    "resources": {"limits": {"nvidia.com/gpu": str(gpus)}, "requests": requests},
                }
            ],
            **spec,
        },
        "status": {"phase": "Pending"},
    }


def pools() -> ClusterSync:
    """Pool a (r0): 128-CPU nodes, tainted for one team; pool b (r1): 16-CPU nodes."""
    sync = ClusterSync(LEVELS, clock=lambda: 0.0)
    nodes = [node(f"a{i}", "r0", taints=[DEDICATED]) for i in range(4)]
    nodes += [node(f"b{i}", "r1", cpu="16", pool="b") for i in range(4)]
    sync.resync(nodes)
    return sync


def test_a_gang_tolerating_a_dedicated_pool_with_big_pods_goes_there() -> None:
    """The issue's case: 100-CPU pods tolerating the tainted pool are placed there, never on
    the pool of 16-CPU nodes; the same pods without their toleration fit nowhere."""
    sync = pools()
    pods = [
        pending(f"w-{i}", cpu="100", nodeSelector={"pool": "a"}, tolerations=[TOLERATE])
        for i in range(3)
    ]
    gang = request_from_pods(pods, levels=LEVELS)
    request = gang.request
    assert isinstance(request, GangRequest)
    assert request.resources_per_pod == {"cpu": 100_000}
    assert request.selector == {"pool": "a"}
    assert request.tolerations == (("dedicated", "Equal", "llm", "NoSchedule"),)
    placement = sync.cluster.place_gang(request)
    assert placement is not None and set(placement.nodes) <= {"a0", "a1", "a2", "a3"}
    plain = [pending(f"p-{i}", cpu="100") for i in range(3)]
    assert sync.cluster.place_gang(request_from_pods(plain, levels=LEVELS).request) is None


def test_required_node_affinity_is_kept_and_client_objects_read_alike() -> None:
    term = {"matchExpressions": [{"key": "pool", "operator": "In", "values": ["b"]}]}
    affinity = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [term]}}}  # fmt: skip
    pods = [pending(f"w-{i}", 4, affinity=affinity) for i in range(2)]
    gang = request_from_pods(pods, levels=LEVELS)
    assert gang.request.affinity == ((("pool", "In", ("b",)),),)  # type: ignore[union-attr]
    api = client.ApiClient()
    models = [api._ApiClient__deserialize(p, "V1Pod") for p in pods]  # type: ignore[attr-defined]
    assert request_from_pods(models, levels=LEVELS).request == gang.request
    placement = pools().cluster.place_gang(gang.request)
    assert placement is not None and placement.nodes == ("b0",)


def test_what_cannot_be_expressed_is_named_in_a_warning() -> None:
    spread = [{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}]
    anti: dict[str, Any] = {
        "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{}]}
    }
    pods = [pending("w-0", topologySpreadConstraints=spread, affinity=anti)]
    warnings = request_from_pods(pods, levels=LEVELS).warnings
    assert warnings == (
        "pod ml/w-0: spec.affinity.podAntiAffinity is not read: gangplace places the gang by "
        "its own topology rules",
        "pod ml/w-0: spec.topologySpreadConstraints is not read: gangplace places the gang by "
        "its own topology rules",
    )


def test_init_containers_and_sidecars_count_as_kubernetes_counts_them() -> None:
    """A sidecar (restartPolicy Always) runs beside the containers and the later inits."""

    def container(name: str, cpu: str, **extra: Any) -> Any:
        return {"name": name, "resources": {"requests": {"cpu": cpu}}, **extra}

    sidecar = container("proxy", "2", restartPolicy="Always")
    pod = pending("w-0", cpu="4", initContainers=[sidecar, container("setup", "10")])
    assert request_from_pods([pod], levels=LEVELS).request.resources_per_pod == {"cpu": 12_000}  # type: ignore[union-attr]
    pod = pending("w-0", cpu="4", initContainers=[container("setup", "10"), sidecar])
    assert request_from_pods([pod], levels=LEVELS).request.resources_per_pod == {"cpu": 10_000}  # type: ignore[union-attr]
    pod = pending("w-0", cpu="4", initContainers=[sidecar, container("setup", "1")])
    assert request_from_pods([pod], levels=LEVELS).request.resources_per_pod == {"cpu": 6_000}  # type: ignore[union-attr]


def test_ranks_follow_pod_indices_then_names_in_number_order() -> None:
    names = ["w-10", "w-9", "w-1", "w-0"]
    gang = request_from_pods([pending(n, 1) for n in names], levels=LEVELS)
    assert [p["metadata"]["name"] for p in gang.pods] == ["w-0", "w-1", "w-9", "w-10"]
    indexed = [
        pending(n, 1, metadata={"labels": {"batch.kubernetes.io/job-completion-index": str(i)}})
        for n, i in (("b", "1"), ("a", "0"), ("z", "2"))
    ]
    gang = request_from_pods(indexed, levels=LEVELS)
    assert [p["metadata"]["name"] for p in gang.pods] == ["a", "b", "z"]


def test_pods_of_several_shapes_are_one_multi_role_unit() -> None:
    launcher = pending("launcher", 0, cpu="2")
    workers = [pending(f"worker-{i}", 8) for i in range(3)]
    gang = request_from_pods([*workers, launcher], levels=LEVELS)
    request = gang.request
    assert isinstance(request, MultiGangRequest)
    assert [(g.name, g.pods, g.gpus_per_pod) for g in request.groups] == [
        ("launcher", 1, 0),
        ("worker-0", 3, 8),
    ]
    names = [p["metadata"]["name"] for p in gang.pods]
    assert names == ["launcher", "worker-0", "worker-1", "worker-2"]
    placement = pools().cluster.place_gang(request)
    assert placement is not None
    plan = binding_plan(placement, list(gang.pods))
    assert plan[0]["pod"] == "launcher"
    assert plan[0]["gpus"] == []


def test_the_gangs_size_priority_and_level() -> None:
    annotated = {"annotations": {GANG_SIZE_ANNOTATION: "4"}}
    pods = [pending(f"w-{i}", metadata=annotated) for i in range(3)]
    with pytest.raises(GangIncomplete, match="3 of the gang's 4 pods"):
        request_from_pods(pods, levels=LEVELS)
    podgroup = {"kind": "PodGroup", "spec": {"minMember": 2}}
    elastic = request_from_pods([pending(f"w-{i}") for i in range(3)], levels=LEVELS,
                                podgroup=podgroup)  # fmt: skip
    assert (elastic.request.pods, elastic.request.min_pods) == (3, 2)  # type: ignore[union-attr]
    with pytest.raises(GangIncomplete):
        request_from_pods([pending("w-0")], levels=LEVELS, podgroup=podgroup)
    ranked = [pending("w-0", priority=10), pending("w-1", priority=1000)]
    request = request_from_pods(ranked, levels=LEVELS).request
    assert (request.priority, request.preemptible) == (1000, True)
    critical = [pending("w-0", priority=2_000_000_000)]
    assert not request_from_pods(critical, levels=LEVELS).request.preemptible
    topology = {"annotations": {"kueue.x-k8s.io/podset-required-topology": "example.com/rack"}}
    racked = [pending(f"w-{i}", metadata=topology) for i in range(2)]
    assert request_from_pods(racked, levels=LEVELS).request.required_level == "rack"


def test_a_pod_template_keeps_its_constraints() -> None:
    template = pending("t", 8, cpu="100", nodeSelector={"pool": "a"}, tolerations=[TOLERATE])
    warnings: list[str] = []
    request = request_from_pod_template(template, 2, levels=LEVELS, warnings=warnings)
    assert request.tolerations and request.selector == {"pool": "a"} and not warnings
    assert request.resources_per_pod == {"cpu": 100_000}


def _affinity(term: Any) -> Any:
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": term}}


def _expression(key: str, operator: str, values: list[str], kind: str = "matchExpressions") -> Any:
    expression = {"key": key, "operator": operator, "values": values}
    return _affinity({"nodeSelectorTerms": [{kind: [expression]}]})


BAD: list[tuple[str, Any, str]] = [
    ("bound", pending("w-0", nodeName="a0"), "pod ml/w-0: spec.nodeName: is set"),
    (
        "matchFields",
        pending("w-0", affinity=_expression("metadata.name", "In", ["a0"], "matchFields")),
        "nodeSelectorTerms[0].matchFields: is not read",
    ),
    (
        "an unknown operator",
        pending("w-0", affinity=_expression("pool", "Near", ["a"])),
        "matchExpressions[0].operator: 'Near' is not one of",
    ),
    (
        "no terms",
        pending("w-0", affinity=_affinity({"nodeSelectorTerms": []})),
        "is empty (Kubernetes matches no node with it)",
    ),
    (
        "Gt without an integer",
        pending("w-0", affinity=_expression("gen", "Gt", ["x"])),
        "matchExpressions[0].values: Gt takes one integer, got ['x']",
    ),
    (
        "In without values",
        pending("w-0", affinity=_expression("gen", "In", [])),
        "matchExpressions[0].values: is empty (In needs a value)",
    ),
    (
        "a toleration operator",
        pending("w-0", tolerations=[{"key": "k", "operator": "Is"}]),
        "spec.tolerations[0].operator: 'Is' is not Equal or Exists",
    ),
    ("a selector value", pending("w-0", nodeSelector={"pool": 1}), "spec.nodeSelector[pool]"),
    ("a CPU quantity", pending("w-0", cpu="lots"), "spec.containers[0].resources.requests[cpu]"),
    ("a finished pod", {**pending("w-0"), "status": {"phase": "Succeeded"}}, "status.phase"),
    ("no name", {**pending("w-0"), "metadata": {}}, "pod #0: metadata.name: is missing"),
    ("not a pod", 7, "pod #0: expected a V1Pod or a dict, not int"),
]


@pytest.mark.parametrize(("label", "bad", "message"), BAD, ids=[b[0] for b in BAD])
def test_bad_pods_are_named(label: str, bad: Any, message: str) -> None:
    with pytest.raises(PodGroupError, match=None) as raised:
        request_from_pods([bad], levels=LEVELS)
    assert message in str(raised.value)


def test_bad_gangs_are_named() -> None:
    with pytest.raises(PodGroupError, match="non-empty sequence"):
        request_from_pods([], levels=LEVELS)
    one = {"annotations": {"kueue.x-k8s.io/podset-required-topology": "example.com/rack"}}
    with pytest.raises(PodGroupError, match="disagree on the required topology"):
        request_from_pods([pending("w-0", metadata=one), pending("w-1")], levels=LEVELS)
    size = {"annotations": {GANG_SIZE_ANNOTATION: "two"}}
    with pytest.raises(PodGroupError, match="is not a positive count"):
        request_from_pods([pending("w-0", metadata=size)], levels=LEVELS)
    with pytest.raises(PodGroupError, match=r"spec\.minMember 0"):
        request_from_pods([pending("w-0")], levels=LEVELS, podgroup={"spec": {"minMember": 0}})


# ---------------------------------------------------------------- the kubelet's admission


def kubelet_admits(pod: Any, node: Any, running: list[Any]) -> bool:
    """The kubelet's admission checks of a pod bound to ``node``, restated: node selector,
    required node affinity, NoSchedule/NoExecute taints tolerated, and every request within
    allocatable less the requests of the pods already there."""
    labels = node["metadata"]["labels"]
    spec = pod["spec"]
    if any(labels.get(k) != v for k, v in spec.get("nodeSelector", {}).items()):
        return False
    terms = (
        spec.get("affinity", {}).get("nodeAffinity", {})
        .get("requiredDuringSchedulingIgnoredDuringExecution", {}).get("nodeSelectorTerms")
    )  # fmt: skip
    if terms and not any(all(_holds(e, labels) for e in t["matchExpressions"]) for t in terms):
        return False
    for taint in node["spec"].get("taints", []):
        if taint["effect"] != "PreferNoSchedule" and not any(
            _tolerates(t, taint) for t in spec.get("tolerations", [])
        ):
            return False
    allocatable = node["status"]["allocatable"]
    for resource in ("cpu", "nvidia.com/gpu"):
        used = sum(_request(other, resource) for other in [*running, pod])
        if used > quantity(allocatable[resource], resource, "allocatable"):
            return False
    return True


def _holds(expression: Any, labels: Any) -> bool:
    value, values = labels.get(expression["key"]), expression.get("values", [])
    return {
        "In": value in values,
        "NotIn": value not in values,
        "Exists": value is not None,
        "DoesNotExist": value is None,
    }[expression["operator"]]


def _tolerates(toleration: Any, taint: Any) -> bool:
    if toleration.get("effect") and toleration["effect"] != taint["effect"]:
        return False
    if toleration.get("operator") == "Exists":
        return not toleration.get("key") or toleration["key"] == taint["key"]
    same_key = toleration.get("key") == taint["key"]
    return bool(same_key and toleration.get("value") == taint.get("value"))


def _request(pod: Any, resource: str) -> int:
    main = pod["spec"]["containers"][0]["resources"]
    given = main.get("requests", {}).get(resource) or main.get("limits", {}).get(resource)
    return 0 if given is None else quantity(given, resource, "request")


@st.composite
def clusters_and_gangs(draw: st.DrawFn) -> tuple[list[Any], list[Any]]:
    nodes = []
    for index in range(draw(st.integers(2, 8))):
        taints = draw(st.sampled_from(([], [DEDICATED], [{**DEDICATED, "effect": "NoExecute"}])))
        nodes.append(
            node(
                f"n{index}", f"r{index % 3}", cpu=draw(st.sampled_from(("16", "64", "128"))),
                pool=draw(st.sampled_from("ab")), taints=taints,
            )
        )  # fmt: skip
    spec: dict[str, Any] = {}
    if draw(st.booleans()):
        spec["nodeSelector"] = {"pool": draw(st.sampled_from("ab"))}
    if draw(st.booleans()):
        operator = draw(st.sampled_from(("In", "NotIn", "Exists", "DoesNotExist")))
        expression: dict[str, Any] = {"key": draw(st.sampled_from(("pool", "gen"))),
                                      "operator": operator}  # fmt: skip
        if operator in ("In", "NotIn"):
            expression["values"] = [draw(st.sampled_from("ab"))]
        spec["affinity"] = _affinity({"nodeSelectorTerms": [{"matchExpressions": [expression]}]})
    tolerations = draw(st.sampled_from(([], [TOLERATE], [{"operator": "Exists"}])))
    if tolerations:
        spec["tolerations"] = tolerations
    cpu = draw(st.sampled_from((None, "8", "40", "100")))
    gpus = draw(st.sampled_from((1, 4, 8)))
    count = draw(st.integers(1, 5))
    pods = [pending(f"w-{i}", gpus, cpu=cpu, **copy.deepcopy(spec)) for i in range(count)]
    return nodes, pods


@settings(max_examples=300)
@given(clusters_and_gangs())
def test_placements_from_pending_pods_pass_the_kubelets_admission(drawn: Any) -> None:
    nodes, pods = drawn
    sync = ClusterSync(LEVELS, tolerations=(), clock=lambda: 0.0)
    sync.resync(nodes)
    gang = request_from_pods(pods, levels=LEVELS)
    placement = sync.cluster.place_gang(gang.request)
    note(f"{gang.request!r} -> {placement!r}")
    if placement is None:
        return
    by_name = {n["metadata"]["name"]: n for n in nodes}
    running: dict[str, list[Any]] = {}
    for entry, pod in zip(binding_plan(placement, list(gang.pods)), gang.pods, strict=True):
        where = entry["nodeName"]
        assert kubelet_admits(pod, by_name[where], running.get(where, [])), (pod, where)
        running.setdefault(where, []).append(pod)
