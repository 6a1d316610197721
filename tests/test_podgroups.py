"""PodGroups (scheduler-plugins, Volcano) and Kueue topologies read into gangs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from gangplace import GangRequest
from gangplace.k8s import cluster_from_nodes
from gangplace.podgroups import (
    PodGroupError,
    gang_from_podgroup,
    levels_from_kueue_topology,
    request_from_pod_template,
)

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "k8s"


def _items() -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = json.loads((FIXTURES / "podgroups.json").read_text())["items"]
    return items


def test_both_podgroup_kinds_and_both_spellings() -> None:
    plugins, volcano, guide = (
        gang_from_podgroup(item, priorities={"high-priority": 1000}) for item in _items()
    )
    assert plugins.request == GangRequest(16, 8, name="llama-pretrain")
    assert (plugins.namespace, plugins.timeout_s, plugins.queue) == ("research", 600.0, None)
    assert volcano.request == GangRequest(4, 4, name="finetune-7b-0b1c2", priority=1000)
    assert (volcano.queue, volcano.priority_class) == ("team-b", "high-priority")
    assert guide.request == GangRequest(2, 1, name="guide-style")  # minAvailable
    assert gang_from_podgroup(_items()[1]).request.priority == 0  # no priorities given


GPU = "nvidia.com/gpu"
PREFERRED = "kueue.x-k8s.io/podset-preferred-topology"


def _template(required: str | None, resources: dict[str, Any]) -> dict[str, Any]:
    annotations = {} if required is None else {"kueue.x-k8s.io/podset-required-topology": required}
    return {
        "metadata": {"annotations": annotations},
        "spec": {"containers": [{"name": "trainer", "resources": resources}]},
    }


def test_kueue_topology_gives_the_levels_of_a_cluster() -> None:
    topology = json.loads((FIXTURES / "kueue-topology.json").read_text())
    levels = levels_from_kueue_topology(topology)
    assert levels == {
        "gce-topology-block": "cloud.google.com/gce-topology-block",
        "gce-topology-subblock": "cloud.google.com/gce-topology-subblock",
        "gce-topology-host": "cloud.google.com/gce-topology-host",
    }
    nodes = [
        {
            "metadata": {
                "name": f"n{index}",
                "labels": {
                    "cloud.google.com/gce-topology-block": "b0",
                    "cloud.google.com/gce-topology-subblock": f"sb{index // 4}",
                    "cloud.google.com/gce-topology-host": f"h{index // 2}",
                },
            },
            "status": {"capacity": {"nvidia.com/gpu": "8"}},
        }
        for index in range(8)
    ]
    cluster, warnings = cluster_from_nodes(nodes, levels=levels)
    assert warnings == [] and cluster.levels == tuple(levels)
    template = _template("cloud.google.com/gce-topology-subblock", {"limits": {GPU: "8"}})
    request = request_from_pod_template(template, 4, levels=levels, name="worker")
    assert request == GangRequest(4, 8, required_level="gce-topology-subblock", name="worker")
    placement = cluster.place_gang(request)
    assert placement is not None and placement.level == "gce-topology-subblock"
    preferred = _template(None, {"requests": {GPU: 2}})
    preferred["metadata"]["annotations"] = {PREFERRED: "kubernetes.io/hostname"}
    assert request_from_pod_template(preferred, 3, levels=levels).required_level is None
    on_a_node = _template("kubernetes.io/hostname", {"limits": {GPU: 1}})
    assert request_from_pod_template(on_a_node, 2, levels=levels).required_level == "node"


def test_client_objects_work_too() -> None:
    api = client.ApiClient()
    template = api._ApiClient__deserialize(  # type: ignore[attr-defined]
        {"spec": {"containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": "4"}}}]}},
        "V1PodTemplateSpec",
    )
    assert request_from_pod_template(template, 2, levels={}) == GangRequest(2, 4)


def _podgroup(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.x-k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": "pg"},
        "spec": spec,
    }


@pytest.mark.parametrize(
    ("obj", "message"),
    [
        ({"kind": "Pod", "apiVersion": "v1"}, "expected kind PodGroup"),
        ({"kind": "PodGroup", "apiVersion": "batch/v1"}, "expected kind PodGroup"),
        ({"kind": "PodGroup", "apiVersion": "scheduling.x-k8s.io/v1alpha1"}, "no spec"),
        (_podgroup(minResources={"nvidia.com/gpu": "8"}), r"spec.minMember \(or minAvailable\)"),
        (_podgroup(minMember="many", minResources={}), "spec.minMember must be an integer"),
        (_podgroup(minMember=0, minResources={}), "spec.minMember must be >= 1"),
        (_podgroup(minMember=True), "must be an integer"),
        (_podgroup(minMember=3, minResources={"nvidia.com/gpu": "8"}), "not a positive multiple"),
        (_podgroup(minMember=2), "not a positive multiple"),
        (_podgroup(minMember=2, minResources=[1]), "minResources must be a mapping"),
        (_podgroup(minMember=2, minResources={"nvidia.com/gpu": "4"}, scheduleTimeoutSeconds=-5),
         "scheduleTimeoutSeconds must be >= 0"),
        (_podgroup(minMember=10**9, minResources={"nvidia.com/gpu": str(10**11)}),
         "PodGroup pg: pods must be between 1 and"),
        ({"kind": "PodGroup", "apiVersion": "scheduling.x-k8s.io/v1alpha1", "metadata": ["x"]},
         r"PodGroup \(unnamed\): metadata: expected an object, got list"),
        ({"kind": "PodGroup", "apiVersion": "scheduling.x-k8s.io/v1alpha1",
          "metadata": {"name": 7}}, "metadata.name must be a string, got 7"),
        ({**_podgroup(minMember=2, minResources={"nvidia.com/gpu": "4"}),
          "metadata": {"name": "pg", "namespace": ["a"]}}, "metadata.namespace must be a string"),
    ],
)  # fmt: skip
def test_bad_podgroups_name_the_field(obj: dict[str, Any], message: str) -> None:
    with pytest.raises(PodGroupError, match=message):
        gang_from_podgroup(obj)


@pytest.mark.parametrize(
    ("obj", "message"),
    [
        ({"kind": "Topology", "apiVersion": "v1"}, "expected kind Topology"),
        ({"kind": "Topology", "apiVersion": "kueue.x-k8s.io/v1beta1", "spec": {}}, "spec.levels"),
        ({"kind": "Topology", "apiVersion": "kueue.x-k8s.io/v1beta1", "spec": {"levels": [{}]}},
         r"spec.levels\[0\].nodeLabel"),
        ({"kind": "Topology", "apiVersion": "kueue.x-k8s.io/v1beta1",
          "spec": {"levels": [{"nodeLabel": "kubernetes.io/hostname"}, {"nodeLabel": "a/rack"}]}},
         "must be the last"),
        ({"kind": "Topology", "apiVersion": "kueue.x-k8s.io/v1beta1",
          "spec": {"levels": [{"nodeLabel": "a/rack"}, {"nodeLabel": "b/rack"}]}}, "both be named"),
        ({"kind": "Topology", "apiVersion": "kueue.x-k8s.io/v1beta1",
          "spec": {"levels": [{"nodeLabel": f"x/l{i}"} for i in range(40)]}},
         "spec.levels has 40 levels; at most"),
        ({"kind": "Topology", "apiVersion": "kueue.x-k8s.io/v1beta1", "metadata": "t",
          "spec": {"levels": [{"nodeLabel": "a/rack"}]}}, "metadata: expected an object, got str"),
        ({"kind": "Topology", "apiVersion": "kueue.x-k8s.io/v1beta1", "spec": "levels"},
         r"Topology \(unnamed\): spec: expected an object, got str"),
    ],
)  # fmt: skip
def test_bad_topologies_name_the_field(obj: dict[str, Any], message: str) -> None:
    with pytest.raises(PodGroupError, match=message):
        levels_from_kueue_topology(obj)


def test_bad_templates_and_wrong_types() -> None:
    with pytest.raises(PodGroupError, match=r"request no nvidia\.com/gpu"):
        request_from_pod_template({"spec": {"containers": [{}]}}, 2, levels={})
    bad_level = {
        "metadata": {"annotations": {"kueue.x-k8s.io/podset-required-topology": "x/row"}},
        "spec": {"containers": [{"resources": {"limits": {"nvidia.com/gpu": 1}}}]},
    }
    with pytest.raises(PodGroupError, match="names 'x/row', not a level label"):
        request_from_pod_template(bad_level, 2, levels={"rack": "x/rack"})
    with pytest.raises(TypeError, match="expected a PodGroup"):
        gang_from_podgroup("pg")
    with pytest.raises(PodGroupError, match=r"pod template \(unnamed\): metadata: expected an"):
        request_from_pod_template({"metadata": "x", "spec": {"containers": []}}, 2, levels={})
    containers_null = {"metadata": {"name": "w"}, "spec": {"containers": None}}
    with pytest.raises(PodGroupError, match=r"pod template w: spec\.containers: is null"):
        request_from_pod_template(containers_null, 2, levels={})
    text_gpus = {"spec": {"containers": [{"resources": {"limits": {"nvidia.com/gpu": "x"}}}]}}
    with pytest.raises(PodGroupError, match=r"limits\[nvidia.com/gpu\]: 'x' is not a GPU"):
        request_from_pod_template(text_gpus, 2, levels={}, name="t")
    annotations_list = {
        "metadata": {"annotations": ["a"]},
        "spec": {"containers": [{"resources": {"limits": {"nvidia.com/gpu": 1}}}]},
    }
    with pytest.raises(PodGroupError, match=r"metadata\.annotations: expected an object"):
        request_from_pod_template(annotations_list, 2, levels={})


def _sliced_template(annotations: dict[str, str]) -> dict[str, Any]:
    return {
        "metadata": {"name": "workers", "annotations": annotations},
        "spec": {"containers": [{"resources": {"limits": {"nvidia.com/gpu": "4"}}}]},
    }


def test_kueue_slice_annotations_become_a_slice_layer() -> None:
    levels = {
        "block": "cloud.provider.com/topology-block",
        "rack": "cloud.provider.com/topology-rack",
    }
    template = _sliced_template(
        {
            "kueue.x-k8s.io/podset-required-topology": "cloud.provider.com/topology-block",
            "kueue.x-k8s.io/podset-slice-required-topology": "cloud.provider.com/topology-rack",
            "kueue.x-k8s.io/podset-slice-size": "16",
        }
    )
    request = request_from_pod_template(template, 64, levels=levels)
    assert request == GangRequest(64, 4, required_level="block", slices=(("rack", 16),))
    per_node = _sliced_template(
        {
            "kueue.x-k8s.io/podset-slice-required-topology": "kubernetes.io/hostname",
            "kueue.x-k8s.io/podset-slice-size": "2",
        }
    )
    assert request_from_pod_template(per_node, 8, levels=levels).slices == (("node", 2),)


SLICE_LEVEL = "kueue.x-k8s.io/podset-slice-required-topology"
SLICE_SIZE = "kueue.x-k8s.io/podset-slice-size"


@pytest.mark.parametrize(
    ("annotations", "message"),
    [
        ({SLICE_SIZE: "4"}, "podset-slice-size without"),
        ({SLICE_LEVEL: "a/rack"}, "without kueue.x-k8s.io/podset-slice-size"),
        ({SLICE_LEVEL: "a/row", SLICE_SIZE: "4"}, "names 'a/row', not a level label"),
        ({SLICE_LEVEL: "a/rack", SLICE_SIZE: "x"}, "podset-slice-size must be an integer"),
        ({SLICE_LEVEL: "a/rack", SLICE_SIZE: "0"}, "podset-slice-size must be >= 1"),
        ({SLICE_LEVEL: "a/rack", SLICE_SIZE: "3"}, r"must divide the PodSet's count \(8\)"),
        ({SLICE_LEVEL: "a/rack", SLICE_SIZE: "99999999999999999999999"}, "must divide"),
    ],
)
def test_bad_slice_annotations_name_the_field(annotations: dict[str, str], message: str) -> None:
    with pytest.raises(PodGroupError, match=message) as raised:
        request_from_pod_template(_sliced_template(annotations), 8, levels={"rack": "a/rack"})
    assert "pod template workers" in str(raised.value)
