"""GPU health from NVML (``pip install gangplace[nvml]``, the ``nvidia-ml-py`` package).

:func:`probe` reads the local host's GPUs: index, UUID, and the reasons a GPU must not be
placed on:

- ``ecc-uncorrectable``: volatile uncorrectable ECC errors since the last driver load;
- ``retired-pages-pending``: a page retirement waiting for a reboot;
- ``row-remap-failure``: row remapping failed (or is pending);
- ``lost``: the GPU cannot be queried (fallen off the bus, inaccessible).

:func:`apply` marks them on a cluster's node (healthy GPUs become healthy again) and returns
the ids of the reservations and allocations that hold a GPU that turned unhealthy.

Without the package, or without a driver, :class:`NvmlUnavailable` (a ``GangplaceError``)
says which.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

from gangplace.errors import GangplaceError

__all__ = ["GpuHealth", "NvmlUnavailable", "apply", "probe"]


class NvmlUnavailable(GangplaceError):
    """NVML cannot be used here: the package is missing or no NVIDIA driver answers."""


@dataclass(frozen=True)
class GpuHealth:
    """One GPU as NVML reports it.

    Attributes:
        index: NVML device index.
        uuid: Device UUID (empty when the GPU is lost).
        reasons: Why it is unhealthy; empty when healthy.

    """

    index: int
    uuid: str
    reasons: tuple[str, ...] = field(default_factory=tuple)

    @property
    def healthy(self) -> bool:
        """Whether no reason applies."""
        return not self.reasons


def _library(module: ModuleType | None) -> Any:
    if module is not None:
        return module
    try:
        return importlib.import_module("pynvml")
    except ImportError:
        raise NvmlUnavailable(
            "the nvidia-ml-py package is not installed (pip install gangplace[nvml])"
        ) from None


def _reasons(nvml: Any, handle: Any) -> list[str]:
    reasons = []
    try:
        errors = nvml.nvmlDeviceGetTotalEccErrors(
            handle, nvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, nvml.NVML_VOLATILE_ECC
        )
        if errors > 0:
            reasons.append("ecc-uncorrectable")
    except nvml.NVMLError:
        pass  # ECC not supported on this GPU
    try:
        pending = nvml.nvmlDeviceGetRetiredPagesPendingStatus(handle)
        if pending:
            reasons.append("retired-pages-pending")
    except nvml.NVMLError:
        pass
    try:
        remap = nvml.nvmlDeviceGetRemappedRows(handle)  # (corr, unc, pending, failure)
        if remap[3] or remap[2]:
            reasons.append("row-remap-failure")
    except nvml.NVMLError:
        pass
    return reasons


def probe(*, module: ModuleType | None = None) -> list[GpuHealth]:
    """The health of every GPU of this host, by NVML index.

    Args:
        module: A ``pynvml``-compatible module (tests inject a fake one).

    Raises:
        NvmlUnavailable: No ``pynvml``, or NVML cannot initialize (no driver).

    """
    nvml = _library(module)
    try:
        nvml.nvmlInit()
    except nvml.NVMLError as error:
        raise NvmlUnavailable(f"NVML did not initialize (no NVIDIA driver?): {error}") from None
    try:
        result = []
        for index in range(nvml.nvmlDeviceGetCount()):
            try:
                handle = nvml.nvmlDeviceGetHandleByIndex(index)
                uuid = nvml.nvmlDeviceGetUUID(handle)
            except nvml.NVMLError:
                result.append(GpuHealth(index, "", ("lost",)))
                continue
            uuid = uuid.decode() if isinstance(uuid, bytes) else str(uuid)
            result.append(GpuHealth(index, uuid, tuple(_reasons(nvml, handle))))
        return result
    finally:
        nvml.nvmlShutdown()


def apply(cluster: Any, node_name: str, probe_result: list[GpuHealth]) -> list[str]:
    """Sets the health of ``node_name``'s GPUs from a probe.

    Returns:
        The ids of the reservations and allocations holding a GPU that is unhealthy now
        (sorted, without repeats). Reservations among them were revoked.

    """
    affected: set[str] = set()
    for gpu in probe_result:
        holders = cluster.set_gpu_health(node_name, gpu.index, gpu.healthy)
        if not gpu.healthy:
            affected.update(holders)
    return sorted(affected)
