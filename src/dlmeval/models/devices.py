"""Devices and dtypes of models: ``--device`` values (a device, ``auto``, or an accelerate placement
``map[:NAME]``) and ``--dtype`` names."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from dlmeval.errors import InputError

if TYPE_CHECKING:
    import torch

_F = TypeVar("_F", bound=Callable[..., Any])

#: accelerate's placements for ``--device map[:NAME]`` (big-model inference: one model over several devices)
DEVICE_MAPS = ("auto", "balanced", "balanced_low_0", "sequential")


def device_map_of(device: str | None) -> str | None:
    """``"auto"`` for ``--device map``, ``NAME`` for ``--device map:NAME``; None for a plain device."""
    if not isinstance(device, str) or not (device == "map" or device.startswith("map:")):
        return None
    name = device.partition(":")[2] or "auto"
    if name not in DEVICE_MAPS:
        raise InputError(
            f"--device {device!r}: the placements are map, {', '.join('map:' + m for m in DEVICE_MAPS)}"
        )
    return name


def place_kwargs(device: str | None) -> dict[str, Any]:
    """What ``from_pretrained`` takes for ``device``: ``device_map=`` for ``--device map[:NAME]`` (accelerate
    spreads the layers over the visible devices), nothing otherwise (the caller moves the module)."""
    m = device_map_of(device)
    return {"device_map": m} if m else {}


def place(module, dev: torch.device, device: str | None):
    """``module`` on ``dev`` (already placed by accelerate under ``--device map``), in eval mode."""
    return (module if device_map_of(device) else module.to(dev)).eval()


def resolve_device(device: str | None) -> torch.device:
    """The device of a model's inputs. Under ``--device map`` that is the first device accelerate fills."""
    import torch

    if device_map_of(device):
        return torch.device("cuda:0" if torch.cuda.is_available() else "cpu")
    if device in (None, "auto"):
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise InputError(
            f"device {device!r} was asked for, but no CUDA device is available; use --device cpu"
        )
    return torch.device(device)


def resolve_dtype(dtype: str | torch.dtype | None, device: torch.device) -> torch.dtype:
    import torch

    if isinstance(dtype, torch.dtype):
        return dtype
    if dtype in (None, "auto"):
        return torch.bfloat16 if device.type == "cuda" else torch.float32
    table = {
        "float32": torch.float32,
        "fp32": torch.float32,
        "bfloat16": torch.bfloat16,
        "bf16": torch.bfloat16,
        "float16": torch.float16,
        "fp16": torch.float16,
    }
    if dtype not in table:
        raise InputError(f"unknown dtype {dtype!r}; choose one of float32, bfloat16, float16")
    return table[dtype]


def no_grad(fn: _F) -> _F:
    """``@torch.no_grad()`` with torch imported when ``fn`` is called, not when it is defined: the models layer
    imports no torch until a model is used, so that ``dlmeval models`` reads the families' facts without it (#36)."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        import torch

        with torch.no_grad():
            return fn(*args, **kwargs)

    return wrapper  # type: ignore[return-value]
