"""Work splitting for data-parallel runs and resumption.

Every rank opens the same run (same command, same config) in the same store; :func:`dlmeval.parallel.work_loop`
(the one loop every protocol uses) keeps the pending chunks and gives each rank its ``shard`` of them. Results are
keyed by item id, and every random draw is seeded by ``derive_seed(seed, item_id)``, so the union over ranks equals
a single-process run and a killed rank resumes by rerunning its command.
"""

from __future__ import annotations

import operator
import os
from collections.abc import Iterable, Mapping, Sequence
from typing import TypeVar

from dlmeval.errors import InputError

T = TypeVar("T")


def shard(items: Sequence[T] | Iterable[T], rank: int, world_size: int) -> list[T]:
    """The items of ``rank`` out of ``world_size``: every ``world_size``-th item starting at ``rank`` (strided, so
    length-sorted work stays balanced). Deterministic; the shards of all ranks partition the input."""
    try:
        rank, world_size = operator.index(rank), operator.index(world_size)
    except TypeError:
        raise InputError(f"rank and world size must be integers, got {rank!r} and {world_size!r}") from None
    if world_size < 1:
        raise InputError(f"world size must be at least 1, got {world_size}")
    if not 0 <= rank < world_size:
        raise InputError(f"rank must be in 0..{world_size - 1} for a world size of {world_size}, got {rank}")
    return list(items)[rank::world_size]


def rank_and_world_size(env: Mapping[str, str] | None = None) -> tuple[int, int]:
    """``(RANK, WORLD_SIZE)`` as set by ``torchrun`` / ``accelerate launch``; ``(0, 1)`` when not set."""
    env = os.environ if env is None else env
    try:
        rank = int(env.get("RANK", "0"))
        world = int(env.get("WORLD_SIZE", "1"))
    except ValueError:
        raise InputError(
            f"RANK / WORLD_SIZE must be integers, got {env.get('RANK')!r} / {env.get('WORLD_SIZE')!r}"
        ) from None
    shard((), rank, world)  # validates
    return rank, world
