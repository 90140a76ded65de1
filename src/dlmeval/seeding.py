"""Seeds derived from (run seed, item id, ...): every random draw in dlmeval comes from such a generator, so results
do not change with batch size, item order, sharding or resumption."""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import torch  # imported where a generator is made: the numpy half serves light paths (meta-eval --plan)


def derive_seed(*parts: object) -> int:
    """A 63-bit seed from any sequence of printable parts (stable across processes and Python versions)."""
    h = hashlib.sha256("\x1f".join(repr(p) for p in parts).encode("utf-8")).digest()
    return int.from_bytes(h[:8], "little") & ((1 << 63) - 1)


def torch_generator(seed: int, device: str | torch.device = "cpu") -> torch.Generator:
    import torch

    g = torch.Generator(device=device)
    g.manual_seed(int(seed))
    return g


def numpy_rng(*parts: object) -> np.random.Generator:
    return np.random.default_rng(derive_seed(*parts))
