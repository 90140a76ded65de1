"""The per-position fields of one sampler step (candidates, confidence, entropy, ...) in one pass over the logits.

The sampler reads the logits ``[N, V]`` of the ``N`` positions that matter (masked ones, plus decided ones for
re-masking strategies) and needs a few numbers per position, each a reduction over the vocabulary. Computed one
after the other over the whole ``[N, V]`` tensor, every reduction streams it from memory again, and on a CPU that
costs about as much as the model's vocabulary projection itself. Here they are computed row chunk by row chunk
(``ROW_CHUNK`` rows of 30k float32 logits stay in a core's L2 cache), with torch's fused ``softmax`` kernel doing
the exponentials: probabilities come from it and the log-normaliser is recovered at the row's maximum
(``lse = max - log p(argmax)``, exact up to float32 rounding since ``p(argmax) >= 1 / V``), entropy as
``lse - sum(p * z)``. Written by hand because no library fuses these reductions; the results equal the plain
formulas (``tests/sampling/test_sampling.py`` checks them against ``log_softmax``).
"""

from __future__ import annotations

import torch

from dlmeval.sampling.noise import gumbel_pick

#: the fields a strategy may declare in ``Strategy.needs`` (see :class:`~dlmeval.sampling.strategies.StepView`)
FIELDS = (
    "confidence",
    "entropy",
    "argmax",
    "margin",
    "tempered_confidence",
    "tempered_entropy",
    "tempered_margin",
)
#: rows per chunk: 16 x 30k float32 logits (2 MB) plus their probabilities fit a core's L2 and L3 comfortably
ROW_CHUNK = 16


def top_p_filter(logits: torch.Tensor, top_p: float) -> torch.Tensor:
    """Nucleus filtering of ``logits [N, V]`` (a new tensor): per row, the smallest set of most likely tokens
    whose probability reaches ``top_p`` keeps its logits, the rest get ``finfo.min``. The token that crosses
    ``top_p`` is kept, and so is the most likely one always (Dream's ``top_p_logits``, Holtzman et al.)."""
    if top_p >= 1.0:
        return logits.clone()
    sorted_logits, order = torch.sort(logits, dim=-1, descending=True)
    cum = torch.softmax(sorted_logits, dim=-1).cumsum(dim=-1)
    drop = cum > top_p
    drop[:, 1:] = drop[:, :-1].clone()
    drop[:, 0] = False
    mask = torch.zeros_like(drop).scatter_(1, order, drop)
    return logits.masked_fill(mask, torch.finfo(logits.dtype).min)


def top_k_filter(logits: torch.Tensor, top_k: int) -> torch.Tensor:
    """Keep the ``top_k`` largest logits of each row (ties with the k-th kept), the rest ``finfo.min`` (Dream's
    ``top_k_logits``: ``logits < topk(logits, k)[..., -1]`` removed)."""
    k = min(int(top_k), logits.shape[-1])
    kth = torch.topk(logits, k, dim=-1).values[..., -1:]
    return logits.masked_fill(logits < kth, torch.finfo(logits.dtype).min)


def step_fields(
    logits: torch.Tensor,
    *,
    n_masked: int,
    current: torch.Tensor,
    banned: torch.Tensor,
    temperature: float,
    uniforms: torch.Tensor | None,
    needs: frozenset[str] | set[str],
    top_p: float = 1.0,
    top_k: int | None = None,
    chunk: int = ROW_CHUNK,
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """Candidates and the ``needs`` fields for the rows of ``logits [N, V]`` (float32; banned ids are overwritten
    with ``finfo.min`` in place, so they get probability 0 and the rest is renormalised).

    * The first ``n_masked`` rows are masked positions: there a candidate is sampled from the *shaped*
      distribution ``softmax(top_p_filter(logits / temperature))`` by the two-level Gumbel-max (argmax at
      temperature 0) with ``uniforms`` (``[n_masked, gumbel_noise_width(V)]`` float64, one row per logits row).
      The other rows are decided positions: their candidate is ``current [N]``, the token the position holds.
      (Masked rows first, so that every chunk is one kind and nothing is copied out by a boolean index.)
    * ``confidence``: probability of the candidate; ``entropy`` (nats); ``argmax``; ``tempered_*`` the same under
      the shaped distribution (Dream's ``sample_tokens``: temperature, then top-p, then top-k; equal to the plain
      ones at temperature 0 without top-p / top-k); ``margin``: top-1 minus top-2 probability (Dream's
      ``topk_margin``).

    Returns ``(candidates [N], {field: [N]})``.
    """
    unknown = set(needs) - set(FIELDS)
    if unknown:
        raise ValueError(f"unknown step fields {sorted(unknown)}; known: {', '.join(FIELDS)}")
    n = logits.shape[0]
    if not 0 <= n_masked <= n:
        raise ValueError(f"n_masked={n_masked} outside [0, {n}]")
    if not 0 < top_p <= 1:
        raise ValueError(f"top_p={top_p} outside (0, 1]")
    if top_k is not None and (isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 1):
        raise ValueError(f"top_k={top_k!r} must be None or an integer >= 1")
    tempered = temperature > 0
    shaped = tempered or top_p < 1 or top_k is not None
    if tempered and n_masked and (uniforms is None or uniforms.shape[0] != n_masked):
        raise ValueError(f"need {n_masked} rows of uniforms for sampling at temperature {temperature}")
    of_tempered = {k.removeprefix("tempered_") for k in needs if k.startswith("tempered_")}
    plain_needs = {k for k in needs if not k.startswith("tempered_")} | (set() if shaped else of_tempered)
    temp_needs = of_tempered if shaped else set()
    dev = logits.device
    out = {k: torch.empty(n, dtype=torch.long if k == "argmax" else torch.float32, device=dev) for k in needs}
    cand = current.clone()
    lo = torch.finfo(logits.dtype).min
    starts = [*range(0, n_masked, chunk), *range(n_masked, n, chunk)]
    for s in starts:
        e = min(s + chunk, n_masked if s < n_masked else n)
        z = logits[s:e]
        z.index_fill_(1, banned, lo)
        a = p = None
        if temp_needs or (tempered and s < n_masked):
            a = (z * (1.0 / temperature)) if tempered else z.clone()
            a.index_fill_(1, banned, lo)  # finfo.min / T would overflow to -inf
            if top_p < 1:
                a = top_p_filter(a, top_p)
            if top_k is not None:
                a = top_k_filter(a, top_k)
            p = torch.softmax(a, dim=-1)
        if s < n_masked:
            if tempered:
                assert uniforms is not None
                cand[s:e] = gumbel_pick(a, p, uniforms[s:e])
            else:
                cand[s:e] = z.argmax(dim=-1)  # top-p and top-k always keep the argmax
        tgt = cand[s:e].unsqueeze(1)
        if plain_needs:
            for k, v in _dist_fields(z, torch.softmax(z, dim=-1), tgt, plain_needs).items():
                if k in needs:
                    out[k][s:e] = v
                if not shaped and "tempered_" + k in needs:
                    out["tempered_" + k][s:e] = v
        if temp_needs:
            for k, v in _dist_fields(a, p, tgt, temp_needs).items():
                out["tempered_" + k][s:e] = v
    return cand, out


def _dist_fields(
    z: torch.Tensor, p: torch.Tensor, tgt: torch.Tensor, needs: set[str] | frozenset[str]
) -> dict[str, torch.Tensor]:
    """The untempered field names of ``needs`` for ``p = softmax(z)`` (rows of a chunk): probability of ``tgt``,
    entropy, argmax; each computed only when asked for."""
    out = {}
    if "confidence" in needs:
        out["confidence"] = p.gather(1, tgt).squeeze(1)
    if "entropy" in needs:
        # p(argmax) = max p, so the log-normaliser needs two cheap max reductions and no index search
        lse = z.amax(dim=-1) - p.amax(dim=-1).log()
        # banned ids: p = 0 exactly and z finite, so they add 0 to the sum
        out["entropy"] = (lse - torch.linalg.vecdot(p, z)).clamp(min=0.0)
    if "argmax" in needs:
        out["argmax"] = z.argmax(dim=-1)
    if "margin" in needs:
        two = torch.topk(p, 2, dim=-1).values
        out["margin"] = two[:, 0] - two[:, 1]
    return out
