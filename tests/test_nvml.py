"""NVML health with an injected fake pynvml: healthy, ECC-failed, remap-failed and lost GPUs."""

from __future__ import annotations

import types
from typing import Any

import pytest
from helpers import tree

from gangplace import GangplaceError, GangRequest, ReservationRevoked, UnknownNode
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


@pytest.mark.parametrize(
    ("device", "note"),
    [
        ({"ecc": "many"}, "nvmlDeviceGetTotalEccErrors: 'many' is not a count"),
        ({"ecc": None}, "nvmlDeviceGetTotalEccErrors: None is not a count"),
        ({"pending": -1}, "nvmlDeviceGetRetiredPagesPendingStatus: -1 is not a count"),
        ({"remap_rows": (0, 1)}, "nvmlDeviceGetRemappedRows: (0, 1) is not four counts"),
    ],
)
def test_garbage_from_nvml_is_named_not_raised(device: dict[str, Any], note: str) -> None:
    module = fake_nvml([{}, device])
    if "remap_rows" in device:
        rows = device["remap_rows"]
        module.nvmlDeviceGetRemappedRows = lambda h: rows if h is device else (0, 0, 0, 0)  # type: ignore[attr-defined]
    result = probe(module=module)
    assert result[1].notes == (note,) and result[1].healthy  # not guessed unhealthy
    assert result[0].notes == () and result[0].healthy


@pytest.mark.parametrize("count", [-1, 65, "8", None, True, 2.0])
def test_an_absurd_device_count_is_nvml_unavailable(count: Any) -> None:
    module = fake_nvml([])
    module.nvmlDeviceGetCount = lambda: count  # type: ignore[attr-defined]
    with pytest.raises(NvmlUnavailable, match="not a GPU count"):
        probe(module=module)
    assert module.calls["shutdown"] == 1


@pytest.mark.parametrize(
    ("probe_result", "error", "match"),
    [
        ([GpuHealth(8, "x", ("lost",))], "InvalidRequest", "GPU 8 is outside node 'r0-n0'"),
        ([GpuHealth(-1, "x")], "InvalidRequest", "GPU -1 is outside"),
        ([GpuHealth(0, "a"), GpuHealth(0, "b", ("lost",))], "InvalidRequest", "GPU 0 is twice"),
        ([GpuHealth(0, "a"), "GPU 1"], "InvalidRequest", "expected a GpuHealth"),
        ([GpuHealth("1", "a")], "InvalidRequest", "index '1' is not an int"),  # type: ignore[arg-type]
    ],
)
def test_a_bad_probe_changes_nothing(probe_result: Any, error: str, match: str) -> None:
    cluster = tree(("rack",), (1, 1), clock=lambda: 0.0)
    cluster.commit(cluster.reserve(GangRequest(1, 2)))
    before = cluster.snapshot()
    # The first entry alone would be applied: a bad later one must stop the whole probe.
    failing = [GpuHealth(3, "ok", ("ecc-uncorrectable",)), *probe_result]
    with pytest.raises(GangplaceError, match=match) as caught:
        apply(cluster, "r0-n0", failing)
    assert type(caught.value).__name__ == error
    assert cluster.snapshot() == before


def test_a_probe_for_an_unknown_node_is_unknown_node() -> None:
    cluster = tree(("rack",), (1, 1))
    with pytest.raises(UnknownNode):
        apply(cluster, "nope", [GpuHealth(0, "a", ("lost",))])
