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
says which. What NVML answers is checked like any outside input: a device count that is not
an integer in 0..64 raises :class:`NvmlUnavailable`; a health field of the wrong type or shape
(an ECC count that is not a number, a remapped-rows answer of the wrong length) is left out of
the reasons and named in the GPU's ``notes``. :func:`apply` checks the whole probe (indices
within the node, none twice) before it changes anything.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

from gangplace.errors import GangplaceError, InvalidRequest

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
        notes: Health fields NVML answered with values of the wrong type or shape (left out
            of ``reasons``), each naming the field.

    """

    index: int
    uuid: str
    reasons: tuple[str, ...] = field(default_factory=tuple)
    notes: tuple[str, ...] = field(default_factory=tuple)

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


def _reasons(nvml: Any, handle: Any) -> tuple[list[str], list[str]]:
    """The reasons a GPU is unhealthy, and notes on fields NVML answered with garbage."""
    reasons: list[str] = []
    notes: list[str] = []

    def number(value: Any, field: str) -> int | None:
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            notes.append(f"{field}: {value!r} is not a count")
            return None
        return value

    try:
        errors = nvml.nvmlDeviceGetTotalEccErrors(
            handle, nvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, nvml.NVML_VOLATILE_ECC
        )
        if (number(errors, "nvmlDeviceGetTotalEccErrors") or 0) > 0:
            reasons.append("ecc-uncorrectable")
    except nvml.NVMLError:
        pass  # ECC not supported on this GPU
    try:
        pending = nvml.nvmlDeviceGetRetiredPagesPendingStatus(handle)
        if number(pending, "nvmlDeviceGetRetiredPagesPendingStatus"):
            reasons.append("retired-pages-pending")
    except nvml.NVMLError:
        pass
    try:
        remap = nvml.nvmlDeviceGetRemappedRows(handle)  # (corr, unc, pending, failure)
        if not isinstance(remap, (tuple, list)) or len(remap) != 4:
            notes.append(f"nvmlDeviceGetRemappedRows: {remap!r} is not four counts")
        elif remap[3] or remap[2]:
            reasons.append("row-remap-failure")
    except nvml.NVMLError:
        pass
    return reasons, notes


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
        count = nvml.nvmlDeviceGetCount()
        if isinstance(count, bool) or not isinstance(count, int) or not 0 <= count <= 64:
            raise NvmlUnavailable(f"nvmlDeviceGetCount answered {count!r}, not a GPU count")
        for index in range(count):
            try:
                handle = nvml.nvmlDeviceGetHandleByIndex(index)
                uuid = nvml.nvmlDeviceGetUUID(handle)
            except nvml.NVMLError:
                result.append(GpuHealth(index, "", ("lost",)))
                continue
            uuid = uuid.decode(errors="replace") if isinstance(uuid, bytes) else str(uuid)
            reasons, notes = _reasons(nvml, handle)
            result.append(GpuHealth(index, uuid, tuple(reasons), tuple(notes)))
        return result
    finally:
        nvml.nvmlShutdown()


def apply(cluster: Any, node_name: str, probe_result: list[GpuHealth]) -> list[str]:
    """Sets the health of ``node_name``'s GPUs from a probe.

    The whole probe is checked first: nothing changes when it names a GPU the node does not
    have, names one twice, or holds something else than ``GpuHealth`` values.

    Returns:
        The ids of the reservations and allocations holding a GPU that is unhealthy now
        (sorted, without repeats). Reservations among them were revoked.

    Raises:
        UnknownNode: No such node.
        InvalidRequest: A bad probe result (nothing changed).

    """
    gpus = cluster.node(node_name).gpus  # UnknownNode first
    seen: set[int] = set()
    for position, gpu in enumerate(probe_result):
        if not isinstance(gpu, GpuHealth):
            raise InvalidRequest(f"probe result {position}: expected a GpuHealth, got {gpu!r}")
        if isinstance(gpu.index, bool) or not isinstance(gpu.index, int):
            raise InvalidRequest(f"probe result {position}: index {gpu.index!r} is not an int")
        if not 0 <= gpu.index < gpus or gpu.index in seen:
            why = "twice" if gpu.index in seen else f"outside node {node_name!r}'s {gpus} GPUs"
            raise InvalidRequest(f"probe result {position}: GPU {gpu.index} is {why}")
        seen.add(gpu.index)
    affected: set[str] = set()
    for gpu in probe_result:
        holders = cluster.set_gpu_health(node_name, gpu.index, gpu.healthy)
        if not gpu.healthy:
            affected.update(holders)
    return sorted(affected)
