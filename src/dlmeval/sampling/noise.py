"""Random draws of the sampler: per-row generators, float64 Gumbel-max token sampling, top-k selection.

Every row has its own ``torch.Generator`` seeded by ``derive_seed(seed, "sample", item_id)`` and draws only when
it takes part in a step, so a row's sample never depends on the other rows of its batch.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

#: vocabulary chunk of the two-level Gumbel-max (see :func:`gumbel_argmax`)
GUMBEL_CHUNK = 256


def row_uniforms(
    gens: Sequence[torch.Generator],
    counts: Sequence[int],
    width: int,
    *,
    dtype: torch.dtype = torch.float64,
    device: torch.device | str = "cpu",
) -> torch.Tensor:
    """``[sum(counts), width]`` uniforms in [0, 1): ``counts[r]`` rows drawn from ``gens[r]``, concatenated in order.

    The one per-row loop of the sampler: a generator draws for its own row only (torch has no batched
    generators), so this cannot be a single call.
    """
    parts = [
        torch.rand((int(n), width), generator=g, dtype=dtype, device=device)
        for g, n in zip(gens, counts)
        if int(n) > 0
    ]
    if not parts:
        return torch.zeros((0, width), dtype=dtype, device=device)
    return torch.cat(parts) if len(parts) > 1 else parts[0]


def gumbel(u: torch.Tensor) -> torch.Tensor:
    """Standard Gumbel noise ``-log(-log u)`` (in the dtype of ``u``; float64 here)."""
    return -torch.log(-torch.log(u))


def gumbel_noise_width(vocab: int, chunk: int = GUMBEL_CHUNK) -> int:
    """Uniforms needed per position by :func:`gumbel_argmax`."""
    c = min(chunk, vocab)
    return math.ceil(vocab / c) + c


def gumbel_argmax(
    logits: torch.Tensor, temperature: float, u: torch.Tensor | None, *, chunk: int = GUMBEL_CHUNK
) -> torch.Tensor:
    """One token per row of ``logits [N, V]`` from ``softmax(logits / temperature)``; ``temperature == 0`` is argmax.

    This is LLaDA's ``argmax(exp(l) / (-log u) ** T)`` (= ``argmax(l / T + g)`` with float64 Gumbel noise ``g``),
    drawn in two levels (:func:`gumbel_pick`). ``u`` holds ``gumbel_noise_width(V, chunk)`` float64 uniforms per
    row.
    """
    if temperature <= 0:
        return logits.argmax(dim=-1)
    a = logits / temperature
    return gumbel_pick(a, torch.softmax(a, dim=-1), u, chunk=chunk)


def gumbel_pick(a: torch.Tensor, p: torch.Tensor, u: torch.Tensor | None, *, chunk: int = GUMBEL_CHUNK):
    """``argmax(a + g)`` per row for tempered logits ``a [N, V]`` with ``p = softmax(a)`` already computed.

    Two levels, so that only ``V / chunk + chunk`` float64 Gumbels per row are needed instead of ``V`` (float64
    logs over the whole vocabulary cost more than the model's forward pass on CPU). Written by hand because no
    library offers it; exact by the Gumbel-max property: over a chunk ``S``, ``max_{i in S} (a_i + g_i)`` is
    Gumbel with location ``logsumexp_S(a)`` and independent of the argmax, so picking the chunk by
    ``argmax_S(logsumexp_S(a) + G_S)`` and then the token inside it by ``argmax(a_i + g_i)`` gives
    ``P(i) = softmax(a)_i``. ``logsumexp_S(a)`` is ``log(sum_S p) + logsumexp(a)`` and the second term is the
    same for every chunk of a row, so the chunk pick uses ``log(sum_S p)`` from the fused softmax (much faster
    on CPU than a chunked ``logsumexp``); a chunk whose probabilities all underflow float32 (total below about
    1e-38) is never picked.
    """
    n, v = a.shape
    c = min(chunk, v)
    k_full, rest = divmod(v, c)
    n_chunks = k_full + (1 if rest else 0)
    if u is None or u.shape != (n, n_chunks + c):
        raise ValueError(
            f"need uniforms of shape {(n, n_chunks + c)}, got {None if u is None else tuple(u.shape)}"
        )
    parts = [p[:, : k_full * c].unflatten(1, (k_full, c)).sum(-1)]
    if rest:
        parts.append(p[:, k_full * c :].sum(-1, keepdim=True))
    mass = torch.cat(parts, dim=1) if len(parts) > 1 else parts[0]  # [N, n_chunks]
    g = gumbel(u)
    pick = (mass.double().log() + g[:, :n_chunks]).argmax(dim=1)  # [N]
    idx = pick.unsqueeze(1) * c + torch.arange(c, device=a.device)  # [N, c]
    valid = idx < v
    inner = a.gather(1, idx.clamp(max=v - 1)).double() + g[:, n_chunks:]
    inner = inner.masked_fill(~valid, -math.inf)
    return idx.gather(1, inner.argmax(dim=1, keepdim=True)).squeeze(1)


def top_k_mask(scores: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    """Bool ``[R, W]``: per row the ``k[r]`` highest scores above ``-inf`` (NaN counts as ``-inf``; ties: lower
    position first)."""
    s = torch.nan_to_num(scores.double(), nan=-math.inf, posinf=math.inf, neginf=-math.inf)
    order = torch.sort(s, dim=1, descending=True, stable=True).indices
    rank = torch.empty_like(order)
    rank.scatter_(1, order, torch.arange(s.shape[1], device=s.device).expand_as(order).contiguous())
    return (rank < k.unsqueeze(1)) & (s > -math.inf)
