"""The process group of a data-parallel run: rank, world size, local device, and the few collectives dlmeval needs.

dlmeval runs under the launchers users already have (``torchrun``, ``accelerate launch``, SLURM ``srun`` with the
``torchrun`` environment variables); it has no launcher of its own. :func:`init_from_env` reads ``RANK``,
``WORLD_SIZE``, ``LOCAL_RANK``, ``MASTER_ADDR`` / ``MASTER_PORT`` and joins the group with the gloo backend: data
parallel evaluation never reduces tensors on the accelerator, so every collective here moves small JSON payloads
between host processes, and gloo does that on every machine (CUDA or not). Every collective has a timeout
(``DLMEVAL_DIST_TIMEOUT`` seconds, default 7200), so a rank never waits forever for a rank that died.

Payloads travel as :mod:`dlmeval.store.jsonsafe` text in uint8 tensors, never as pickles
(``torch.distributed.all_gather_object`` unpickles what peers send).
"""

from __future__ import annotations

import datetime as _dt
import logging
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from dlmeval.errors import InputError, ParallelError
from dlmeval.store import jsonsafe
from dlmeval.store.shard import rank_and_world_size, shard

log = logging.getLogger("dlmeval.parallel")

T = TypeVar("T")

TIMEOUT_ENV = "DLMEVAL_DIST_TIMEOUT"
#: two hours: a collective also waits for the slowest rank (a long D-GCG item, rank 0 training a DiffScore-FT
#: adapter the others then receive); a rank that died is noticed at once under torchrun, which stops the job
DEFAULT_TIMEOUT_S = 7200.0


def _timeout_from_env() -> float:
    raw = os.environ.get(TIMEOUT_ENV)
    if raw is None:
        return DEFAULT_TIMEOUT_S
    try:
        v = float(raw)
    except ValueError:
        raise InputError(f"{TIMEOUT_ENV} must be a number of seconds, got {raw!r}") from None
    if not v > 0:
        raise InputError(f"{TIMEOUT_ENV} must be positive, got {raw!r}")
    return v


@dataclass
class ParallelContext:
    """Where this process sits in the job. ``world_size == 1`` (the default) is a plain single-process run, where
    every collective is the identity and no process group exists."""

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    timeout_s: float = DEFAULT_TIMEOUT_S
    group: Any = None

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def distributed(self) -> bool:
        return self.world_size > 1

    def share(self, items: Sequence[T]) -> list[T]:
        """This rank's deterministic share of ``items`` (strided; see :func:`dlmeval.store.shard.shard`). Every
        rank must pass the same list: call it on the pending items computed after :meth:`ParallelRun.sync`."""
        return shard(items, self.rank, self.world_size)

    def device(self, device: str | None) -> str | None:
        """The device this rank uses for ``--device`` / ``--evaluator-device``: ``auto`` / ``cuda`` become
        ``cuda:LOCAL_RANK`` in a distributed run on a CUDA machine (one model per rank); ``offset:K`` is
        ``cuda:(LOCAL_RANK + K) mod n`` (4 ranks on 8 GPUs with ``--evaluator-device offset:4``: the evaluators of
        rank r on GPU r + 4); an explicit ``cuda:N`` or ``cpu`` is kept, the same on every rank."""
        offset = None
        if isinstance(device, str) and device.startswith("offset:"):
            try:
                offset = int(device.partition(":")[2])
            except ValueError:
                raise InputError(f"device {device!r}: offset:K takes an integer K, e.g. offset:4") from None
        elif not self.distributed or device not in (None, "auto", "cuda"):
            return device
        import torch

        if not torch.cuda.is_available():
            if offset is not None:
                raise InputError(
                    f"device {device!r} places models on CUDA devices; no CUDA device is available"
                )
            return device
        n = max(torch.cuda.device_count(), 1)
        return f"cuda:{(self.local_rank + (offset or 0)) % n}"

    # ------------------------------------------------------------------ collectives (JSON payloads)
    def _check(self, what: str, fn, *args):
        try:
            return fn(*args)
        except RuntimeError as e:  # gloo: a peer died or the collective timed out
            raise ParallelError(
                f"rank {self.rank}/{self.world_size}: {what} failed ({str(e).splitlines()[0][:300]}); another "
                f"rank probably died or disagrees on the work; rerun the same command to resume"
            ) from None

    def all_gather(self, obj: Any) -> list[Any]:
        """``obj`` of every rank, in rank order (JSON-safe values only)."""
        if not self.distributed:
            return [obj]
        import torch
        import torch.distributed as dist

        data = torch.frombuffer(bytearray(jsonsafe.dumps(obj).encode("utf-8")), dtype=torch.uint8)
        size = torch.tensor([data.numel()], dtype=torch.int64)
        sizes = [torch.zeros(1, dtype=torch.int64) for _ in range(self.world_size)]
        self._check("all_gather (sizes)", dist.all_gather, sizes, size, self.group)
        width = int(max(int(s.item()) for s in sizes))
        padded = torch.zeros(width, dtype=torch.uint8)
        padded[: data.numel()] = data
        bufs = [torch.zeros(width, dtype=torch.uint8) for _ in range(self.world_size)]
        self._check("all_gather", dist.all_gather, bufs, padded, self.group)
        return [
            jsonsafe.loads(bytes(b[: int(s.item())].numpy()).decode("utf-8"))
            for b, s in zip(bufs, sizes, strict=True)
        ]

    def broadcast(self, obj: Any, src: int = 0) -> Any:
        """``obj`` of rank ``src`` on every rank."""
        if not self.distributed:
            return obj
        import torch
        import torch.distributed as dist

        raw = jsonsafe.dumps(obj).encode("utf-8") if self.rank == src else b""
        size = torch.tensor([len(raw)], dtype=torch.int64)
        self._check("broadcast (size)", dist.broadcast, size, src, self.group)
        buf = torch.zeros(int(size.item()), dtype=torch.uint8)
        if self.rank == src:
            buf[:] = torch.frombuffer(bytearray(raw), dtype=torch.uint8)
        self._check("broadcast", dist.broadcast, buf, src, self.group)
        return jsonsafe.loads(bytes(buf.numpy()).decode("utf-8"))

    def barrier(self) -> None:
        if self.distributed:
            import torch.distributed as dist

            self._check("barrier", dist.barrier, self.group)

    def agree(self, what: str, value: Any) -> None:
        """Raise :class:`ParallelError` on every rank unless all ranks hold the same ``value``."""
        values = self.all_gather(value)
        for r, v in enumerate(values):
            if v != values[0]:
                a, b = values[0], v
                if isinstance(a, dict) and isinstance(b, dict):  # name the fields that differ
                    keys = [k for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)]
                    a, b = {k: a.get(k) for k in keys}, {k: b.get(k) for k in keys}
                raise ParallelError(
                    f"ranks disagree on {what}: rank 0 has {_short(a)} but rank {r} has {_short(b)} "
                    "(different code, config, data or models on different nodes?); every rank must run the same "
                    "command with the same dlmeval and inputs"
                )

    # ------------------------------------------------------------------ progress across ranks
    def progress_add(self, key: str, n: int) -> int:
        """Add ``n`` to a job-wide counter and return its new value (through the rendezvous key-value store, so
        it costs no collective: ranks never wait for each other to report progress)."""
        if not self.distributed:
            return n
        store = _kv_store()
        if store is None:
            return n
        return int(store.add(f"dlmeval/progress/{key}", int(n)))


def code_digest() -> str:
    """The source digest of the installed dlmeval package (ranks must run the same code): the one every run
    signature records (:func:`dlmeval.store.code.source_digest`)."""
    from dlmeval.store.code import source_digest

    return source_digest()[:16]


def _short(v: Any, limit: int = 300) -> str:
    s = jsonsafe.dumps(v, canonical=True)
    return s if len(s) <= limit else s[:limit] + "..."


def _kv_store():
    try:
        from torch.distributed import distributed_c10d

        return distributed_c10d._get_default_store()
    except Exception:  # noqa: BLE001 - progress is best effort: an absent store only loses the shared bar
        return None


_CURRENT: ParallelContext | None = None
_OWNS_GROUP = (
    False  # whether init_from_env created the default process group (shutdown destroys only that one)
)


def current() -> ParallelContext:
    """The context of this process (a single-process context unless :func:`init_from_env` joined a group)."""
    return _CURRENT if _CURRENT is not None else ParallelContext()


def init_from_env(env: dict[str, str] | None = None) -> ParallelContext:
    """Join the process group described by the launcher's environment (no-op for a single process)."""
    global _CURRENT
    env = dict(os.environ if env is None else env)
    rank, world = rank_and_world_size(env)
    if world == 1:
        _CURRENT = ParallelContext()
        return _CURRENT
    import torch.distributed as dist

    missing = [k for k in ("MASTER_ADDR", "MASTER_PORT") if not env.get(k)]
    if missing:
        raise InputError(
            f"WORLD_SIZE={world} but {' and '.join(missing)} not set; launch with torchrun or accelerate launch "
            "(or set the torchrun environment variables under srun)"
        )
    try:
        local = int(env.get("LOCAL_RANK", str(rank)))
    except ValueError:
        raise InputError(f"LOCAL_RANK must be an integer, got {env.get('LOCAL_RANK')!r}") from None
    timeout = _timeout_from_env()
    global _OWNS_GROUP
    group = None
    if not dist.is_initialized():
        dist.init_process_group("gloo", timeout=_dt.timedelta(seconds=timeout))
        _OWNS_GROUP = True
    elif dist.get_backend() != "gloo":
        # a group the caller made (NCCL, e.g. accelerate's): dlmeval's collectives move CPU tensors, so they get a
        # gloo group of their own beside it
        group = dist.new_group(backend="gloo", timeout=_dt.timedelta(seconds=timeout))
    ctx = ParallelContext(rank=rank, world_size=world, local_rank=local, timeout_s=timeout, group=group)
    import torch

    if torch.cuda.is_available():
        torch.cuda.set_device(local % max(torch.cuda.device_count(), 1))
    _CURRENT = ctx
    ctx.agree("the dlmeval code and command", {"code": code_digest(), "argv": sys.argv[1:]})
    from dlmeval.parallel.inputs import agree_inputs

    agree_inputs(ctx, sys.argv[1:])  # and the content of every input file and data directory it names
    log.info("rank %d of %d (local rank %d) joined the group", rank, world, local)
    return ctx


def shutdown(completed: bool = False) -> None:
    """Leave the process group (after the last collective). ``completed``: this rank finished its command, so the
    others will too; it waits for them before tearing the group down (a rank that left while another still sent
    to it aborted in gloo: "terminate called without an active exception", seen once in a two-rank lm-eval run).
    After a failure nothing is awaited: the other ranks may never arrive."""
    global _CURRENT, _OWNS_GROUP
    ctx, _CURRENT = _CURRENT, None
    owned, _OWNS_GROUP = _OWNS_GROUP, False
    if ctx is not None and ctx.distributed and owned:
        import torch.distributed as dist

        if dist.is_initialized():
            if completed:
                dist.barrier()
            dist.destroy_process_group()
