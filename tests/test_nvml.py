"""NVML health with an injected fake pynvml: healthy, ECC-failed, remap-failed and lost GPUs."""

from __future__ import annotations

import types
from typing import Any

import pytest
from helpers import tree

from gangplace import GangplaceError, GangRequest, ReservationRevoked
from gangplace.nvml import GpuHealth, NvmlUnavailable, apply, probe


class FakeError(Exception):
    pass


def fake_nvml(devices: list[dict[str, Any]], *, init_fails: bool = False) -> types.ModuleType:
    """A pynvml stand-in: each device is a dict of ecc, pending, remap, or lost."""
    module = types.ModuleType("pynvml")
    module.NVMLError = FakeError  # type: ignore[attr-defined]
    module.NVML_MEMORY_ERROR_TYPE_UNCORRECTED = 1  # type: ignore[attr-defined]
    module.NVML_VOLATILE_ECC = 0  # type: ignore[attr-defined]
    calls = {"shutdown": 0}

    def init() -> None:
        if init_fails:
            raise FakeError("Driver Not Loaded")

    def handle(index: int) -> dict[str, Any]:
        if devices[index].get("lost"):
            raise FakeError("GPU is lost")
        return devices[index]

    def shutdown() -> None:
        calls["shutdown"] += 1

    module.nvmlInit = init  # type: ignore[attr-defined]
    module.nvmlShutdown = shutdown  # type: ignore[attr-defined]
    module.nvmlDeviceGetCount = lambda: len(devices)  # type: ignore[attr-defined]
    module.nvmlDeviceGetHandleByIndex = handle  # type: ignore[attr-defined]
    module.nvmlDeviceGetUUID = lambda h: f"GPU-{id(h) % 1000:03d}".encode()  # type: ignore[attr-defined]
    module.nvmlDeviceGetTotalEccErrors = lambda h, kind, counter: h.get("ecc", 0)  # type: ignore[attr-defined]
    module.nvmlDeviceGetRetiredPagesPendingStatus = lambda h: h.get("pending", 0)  # type: ignore[attr-defined]
    module.nvmlDeviceGetRemappedRows = lambda h: (0, 0, 0, h.get("remap", 0))  # type: ignore[attr-defined]
    module.calls = calls  # type: ignore[attr-defined]
    return module


def test_probe_reports_each_reason() -> None:
    module = fake_nvml([{}, {"ecc": 2}, {"pending": 1}, {"remap": 1}, {"lost": True}])
    result = probe(module=module)
    assert [gpu.reasons for gpu in result] == [
        (),
        ("ecc-uncorrectable",),
        ("retired-pages-pending",),
        ("row-remap-failure",),
        ("lost",),
    ]
    assert result[0].healthy and not result[4].healthy and result[4].uuid == ""
    assert module.calls["shutdown"] == 1


def test_apply_marks_health_and_returns_affected_holds() -> None:
    cluster = tree(("rack",), (1, 1))  # one node "r0-n0", 8 GPUs
    reservation = cluster.reserve(GangRequest(1, 2))  # GPUs 0 and 1
    allocation = cluster.commit(cluster.reserve(GangRequest(1, 2)))  # GPUs 2 and 3
    health = [GpuHealth(i, f"GPU-{i}") for i in range(8)]
    health[1] = GpuHealth(1, "GPU-1", ("ecc-uncorrectable",))
    health[3] = GpuHealth(3, "", ("lost",))
    affected = apply(cluster, "r0-n0", health)
    assert affected == sorted([reservation.id, allocation.id])
    assert cluster.node("r0-n0").unhealthy == (1, 3)
    with pytest.raises(ReservationRevoked):
        cluster.commit(reservation)
    apply(cluster, "r0-n0", [GpuHealth(i, f"GPU-{i}") for i in range(8)])  # all healthy again
    assert cluster.node("r0-n0").unhealthy == ()


def test_no_driver_and_no_package() -> None:
    with pytest.raises(NvmlUnavailable, match="no NVIDIA driver"):
        probe(module=fake_nvml([], init_fails=True))
    try:
        import pynvml  # type: ignore[import-untyped]  # noqa: F401
    except ImportError:
        with pytest.raises(NvmlUnavailable, match="not installed"):
            probe()
    else:
        # The real package is installed but this machine has no driver.
        with pytest.raises(NvmlUnavailable) as caught:
            probe()
        assert isinstance(caught.value, GangplaceError)
