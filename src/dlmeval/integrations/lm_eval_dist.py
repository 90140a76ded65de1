"""The lm-eval model's process group and device: lm-eval's data-parallel contract on dlmeval's collectives.

lm-eval's ``evaluate()`` gives each rank every ``world_size``-th document (``rank`` / ``world_size`` of the model),
pads the shorter ranks with copies of their last request, and gathers the per-document metrics and logged samples
on rank 0 with ``lm.all_gather`` / ``lm.gather_object`` (``HFLM`` does this through accelerate and
``torch.distributed.gather_object``, i.e. pickles). Here the group is :mod:`dlmeval.parallel`'s gloo group (joined
from the ``torchrun`` / ``accelerate launch`` environment; a no-op in one process) and objects travel as tagged JSON
(:mod:`dlmeval.store.jsonsafe`), never as pickles: tuples, dicts with non-string keys (lm-eval keys its metrics
by ``(metric, filter)``) and numpy values are tagged and restored; anything else becomes its ``str`` (as lm-eval's
own JSON output writes it).
"""

from __future__ import annotations

import logging
from typing import Any

from dlmeval import parallel

_log = logging.getLogger("dlmeval.lm_eval")
_TUPLE, _ITEMS = "$tuple", "$items"


def join_group() -> parallel.ParallelContext:
    """The job's context: the one ``dlmeval lm-eval`` joined, else joined here from the launcher's environment
    (``python -m dlmeval.integrations.lm_eval`` under torchrun); a single-process context otherwise."""
    par = parallel.current()
    if par.distributed:
        return par
    return parallel.init_from_env()


def lm_eval_device(device: str | None, par: parallel.ParallelContext) -> str:
    """lm-eval's ``--device`` (default ``cuda:0``) as dlmeval loads it: CUDA when present, else CPU; a CUDA device
    asked for on a machine without one falls back to the CPU with a warning (as lm-eval's ``hf`` model does); under
    torchrun a CUDA device becomes ``cuda:LOCAL_RANK`` (one model per rank)."""
    import torch

    dev = None if device is None else str(device)
    if dev in (None, "", "auto"):
        dev = "cuda" if torch.cuda.is_available() else "cpu"
    if dev.startswith("cuda") and not torch.cuda.is_available():
        _log.warning(
            "dlmeval lm-eval: device %s asked for but no CUDA device is available; using the CPU", dev
        )
        dev = "cpu"
    if par.distributed and dev.startswith("cuda"):
        dev = f"cuda:{par.local_rank % max(torch.cuda.device_count(), 1)}"
    return dev


def encode(obj: Any) -> Any:
    """JSON values with tuples and non-string-keyed dicts tagged (:func:`decode` restores them)."""
    if obj is None or isinstance(obj, (bool, int, float, str)):
        return obj
    if isinstance(obj, tuple):
        return {_TUPLE: [encode(v) for v in obj]}
    if isinstance(obj, list):
        return [encode(v) for v in obj]
    if isinstance(obj, dict):
        if all(isinstance(k, str) and not k.startswith("$") for k in obj):
            return {k: encode(v) for k, v in obj.items()}
        return {_ITEMS: [[encode(k), encode(v)] for k, v in obj.items()]}
    if hasattr(obj, "tolist"):  # numpy / torch values
        return encode(obj.tolist())
    return str(obj)


def decode(obj: Any) -> Any:
    if isinstance(obj, list):
        return [decode(v) for v in obj]
    if isinstance(obj, dict):
        if set(obj) == {_TUPLE}:
            return tuple(decode(v) for v in obj[_TUPLE])
        if set(obj) == {_ITEMS}:
            return {_key(decode(k)): decode(v) for k, v in obj[_ITEMS]}
        return {k: decode(v) for k, v in obj.items()}
    return obj


def _key(k: Any) -> Any:
    return tuple(_key(v) for v in k) if isinstance(k, list) else k


def all_gather_tensor(par: parallel.ParallelContext, tensor):
    """lm-eval's ``all_gather``: every rank's (small) tensor, concatenated in rank order."""
    import torch

    if not par.distributed:
        return tensor
    values = par.all_gather(tensor.detach().cpu().tolist())
    flat = [v for vs in values for v in (vs if isinstance(vs, list) else [vs])]
    return torch.tensor(flat)


def gather_object(par: parallel.ParallelContext, obj: Any, dst: int = 0) -> list[Any] | None:
    """lm-eval's ``gather_object``: every rank's ``obj`` on ``dst`` (in rank order), None elsewhere."""
    if not par.distributed:
        return [obj]
    got = par.all_gather(encode(obj))
    return [decode(v) for v in got] if par.rank == dst else None
