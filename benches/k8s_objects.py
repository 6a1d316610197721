"""Node and pod objects as an API server returns them (``kubectl get -o json``), for the
Kubernetes benchmarks: labels, annotations, managed fields, conditions, images, containers
with env, ports, mounts and requests, an init container and a sidecar."""

from __future__ import annotations

from typing import Any


def node(index: int, version: int = 1) -> dict[str, Any]:
    """An 8-GPU node, 32 to a rack."""
    name = f"gpu-{index:05d}"
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "uid": f"6f0b1c2e-{index:04x}-4c1d-9a77-0a1b2c3d4e5f",
            "resourceVersion": str(version),
            "creationTimestamp": "2026-11-30T08:00:00Z",
            "labels": {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "node.kubernetes.io/instance-type": "p5.48xlarge",
                "topology.kubernetes.io/zone": "us-east-1a",
                "example.com/rack": f"r{index // 32}",
                "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
                "nvidia.com/gpu.count": "8",
                "nvidia.com/cuda.driver.major": "550",
            },
            "annotations": {
                "node.alpha.kubernetes.io/ttl": "0",
                "volumes.kubernetes.io/controller-managed-attach-detach": "true",
            },
            "managedFields": [
                {
                    "manager": "kubelet",
                    "operation": "Update",
                    "apiVersion": "v1",
                    "time": "2026-11-30T08:00:00Z",
                    "fieldsType": "FieldsV1",
                    "fieldsV1": {"f:status": {"f:conditions": {}}},
                }
            ],
        },
        "spec": {"providerID": f"aws:///us-east-1a/i-{index:017x}", "podCIDR": "10.0.0.0/24"},
        "status": {
            "capacity": {
                "cpu": "192",
                "memory": "2097152Mi",
                "nvidia.com/gpu": "8",
                "pods": "110",
                "ephemeral-storage": "3750Gi",
                "hugepages-1Gi": "0",
                "hugepages-2Mi": "0",
                "vpc.amazonaws.com/efa": "32",
            },
            "allocatable": {
                "cpu": "191450m",
                "memory": "2060000Mi",
                "nvidia.com/gpu": "8",
                "pods": "110",
                "ephemeral-storage": "3500Gi",
                "hugepages-1Gi": "0",
                "hugepages-2Mi": "0",
                "vpc.amazonaws.com/efa": "32",
            },
            "conditions": [
                {
                    "type": t,
                    "status": "False",
                    "reason": "KubeletHasSufficient",
                    "lastHeartbeatTime": "2026-12-07T04:00:00Z",
                    "lastTransitionTime": "2026-11-30T08:00:00Z",
                }
                for t in ("MemoryPressure", "DiskPressure", "PIDPressure")
            ]
            + [
                {
                    "type": "Ready",
                    "status": "True",
                    "reason": "KubeletReady",
                    "lastHeartbeatTime": "2026-12-07T04:00:00Z",
                    "lastTransitionTime": "2026-11-30T08:00:00Z",
                }
            ],
            "addresses": [
                {"type": "InternalIP", "address": f"10.1.{index // 256}.{index % 256}"},
                {"type": "Hostname", "address": name},
            ],
            "nodeInfo": {
                "kubeletVersion": "v1.31.2",
                "containerRuntimeVersion": "containerd://1.7.22",
                "kernelVersion": "6.1.0",
                "osImage": "Ubuntu 22.04",
                "architecture": "amd64",
                "operatingSystem": "linux",
                "machineID": "x",
                "systemUUID": "y",
                "bootID": "z",
                "kubeProxyVersion": "v1.31.2",
            },
            "images": [
                {"names": [f"nvcr.io/nvidia/pytorch:24.{i:02d}-py3"], "sizeBytes": 20000000000}
                for i in range(6)
            ],
        },
    }


def pod(gang: int, member: int, where: int, version: int = 1, gpus: int = 1) -> dict[str, Any]:
    """A running worker of gang ``gang`` on node ``where``."""
    name = f"train-{gang}-worker-{member}"
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "ml",
            "uid": f"9a8b7c6d-{gang:04x}-{member:04x}-8000-1234567890ab",
            "resourceVersion": str(version),
            "creationTimestamp": "2026-12-07T03:00:00Z",
            "generateName": f"train-{gang}-worker-",
            "labels": {
                "scheduling.x-k8s.io/pod-group": f"train-{gang}",
                "app": "train",
                "batch.kubernetes.io/job-name": f"train-{gang}",
                "training.kubeflow.org/replica-index": str(member),
            },
            "annotations": {
                "kubectl.kubernetes.io/default-container": "pytorch",
                "sidecar.istio.io/inject": "false",
            },
            "ownerReferences": [
                {
                    "apiVersion": "batch/v1",
                    "kind": "Job",
                    "name": f"train-{gang}",
                    "uid": "x",
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
            "managedFields": [
                {
                    "manager": "kube-controller-manager",
                    "operation": "Update",
                    "apiVersion": "v1",
                    "time": "2026-12-07T03:00:00Z",
                    "fieldsType": "FieldsV1",
                    "fieldsV1": {"f:metadata": {"f:labels": {}}},
                }
            ],
        },
        "spec": {
            "nodeName": f"gpu-{where:05d}",
            "schedulerName": "gangplace",
            "priority": 1000,
            "priorityClassName": "training",
            "restartPolicy": "Never",
            "serviceAccountName": "default",
            "terminationGracePeriodSeconds": 30,
            "tolerations": [
                {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
                {
                    "key": "node.kubernetes.io/not-ready",
                    "operator": "Exists",
                    "effect": "NoExecute",
                    "tolerationSeconds": 300,
                },
            ],
            "volumes": [
                {"name": "dshm", "emptyDir": {"medium": "Memory"}},
                {
                    "name": "kube-api-access",
                    "projected": {"sources": [{"serviceAccountToken": {"path": "token"}}]},
                },
            ],
            "initContainers": [
                {
                    "name": "init",
                    "image": "busybox",
                    "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}},
                }
            ],
            "containers": [
                {
                    "name": "pytorch",
                    "image": "nvcr.io/nvidia/pytorch:24.10-py3",
                    "command": ["torchrun"],
                    "args": ["--nnodes=8", "train.py"],
                    "env": [{"name": f"ENV_{i}", "value": str(i)} for i in range(12)],
                    "ports": [{"containerPort": 23456, "protocol": "TCP"}],
                    "resources": {
                        "limits": {
                            "nvidia.com/gpu": str(gpus),
                            "vpc.amazonaws.com/efa": "4",
                            "memory": "200Gi",
                        },
                        "requests": {
                            "cpu": "20",
                            "memory": "200Gi",
                            "nvidia.com/gpu": str(gpus),
                            "vpc.amazonaws.com/efa": "4",
                        },
                    },
                    "volumeMounts": [
                        {"name": "dshm", "mountPath": "/dev/shm"},
                        {"name": "kube-api-access", "mountPath": "/var/run/secrets"},
                    ],
                },
                {
                    "name": "sidecar",
                    "image": "fluent-bit",
                    "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}},
                },
            ],
        },
        "status": {
            "phase": "Running",
            "podIP": "10.2.0.1",
            "hostIP": "10.1.0.1",
            "qosClass": "Burstable",
            "startTime": "2026-12-07T03:00:05Z",
            "conditions": [
                {"type": t, "status": "True", "lastTransitionTime": "2026-12-07T03:00:10Z"}
                for t in ("Initialized", "Ready", "ContainersReady", "PodScheduled")
            ],
            "containerStatuses": [
                {
                    "name": "pytorch",
                    "ready": True,
                    "restartCount": 0,
                    "image": "x",
                    "imageID": "y",
                    "containerID": "containerd://z",
                    "started": True,
                    "state": {"running": {"startedAt": "2026-12-07T03:00:09Z"}},
                }
            ],
        },
    }
