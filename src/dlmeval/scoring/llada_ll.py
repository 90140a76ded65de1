"""LLaDA's own log-likelihood estimator (``get_log_likelihood.py`` of GSAI-ML/LLaDA), written from its published
semantics, and the exact value it estimates.

The estimand is LLaDA's ELBO of an answer ``x`` (``L`` tokens) given a prompt, in its mask-*count* form (LLaDA
App. B, Eq. 12, equal in expectation to the rate form):

    ELBO(x) = - E_{m ~ U{1..L}} [ (L / m) E_{S ~ U(m-subsets)} sum_{i in S} -log p(x_i | prompt, x with S masked) ]

and :func:`llada_log_likelihood` estimates it as LLaDA does: ``mc_num // batch_size`` mini-batches; in each, one
``k ~ U{1..L}`` and *stratified* mask counts ``m_j = round(linspace(k, k + (b - 1) L / b, b))`` wrapped into
``1..L`` (``((m - 1) mod L) + 1``; ``torch.round`` of float32, half to even, as the original), each row masking
``m_j`` answer positions drawn by a random permutation; a row's loss is its masked cross-entropy divided by
``m_j / L``, a mini-batch's the mean of its rows, the estimate minus the mean over mini-batches. Unbiased for the
ELBO when the count spacing ``L / batch_size`` avoids halves (e.g. ``batch_size`` dividing ``L``, or ``L = 7`` with
16 rows); with a spacing of exactly 0.5 (``L = 8``, 16 rows: LLaDA's default batch on an 8-token answer)
``torch.round``'s half-to-even rounding makes even counts twice as likely as odd ones, and the estimator then
averages to :func:`exact_elbo` under :func:`count_weights` instead. :func:`exact_elbo` enumerates every mask
subset (2^L - 1 passes: a short answer only), the reference both lm-eval estimators are measured against
(docs/care.md, lm-evaluation-harness).

Random draws come from a generator seeded by the caller (the plugin: run seed and request id), never the global RNG.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

import torch


def stratified_counts(k: int, length: int, rows: int) -> list[int]:
    """LLaDA's mask counts of one mini-batch: ``round(linspace(k, k + (rows - 1) * length / rows, rows))`` in
    float32 (half to even), wrapped into ``1..length``."""
    x = torch.round(
        torch.linspace(float(k), k + (rows - 1) * (length / rows), steps=rows, dtype=torch.float32)
    ).long()
    x = ((x - 1) % length) + 1
    return [int(v) for v in x]


def _masked_nll(model, seqs: list[list[int]], masks: list[list[int]]) -> list[float]:
    """Per row: the summed ``-log p`` of the tokens at ``masks[r]`` (indices into ``seqs[r]``) with them masked."""
    noisy = []
    for s, pos in zip(seqs, masks):
        row = list(s)
        for p in pos:
            row[p] = model.mask_token_id
        noisy.append(row)
    ids, attn = model.pad(noisy)
    targets, _ = model.pad([list(s) for s in seqs])
    off = model.offset(attn)
    where = torch.zeros_like(ids, dtype=torch.bool)
    for r, pos in enumerate(masks):
        for p in pos:
            where[r, int(off[r]) + p] = True
    sc = model.score_positions(ids, attn, where, targets)
    out = [0.0] * len(seqs)
    for b, lp in zip(sc.batch_index.tolist(), sc.logprob.tolist()):
        out[b] -= lp
    return out


def llada_log_likelihood(
    model,
    ids: Sequence[int],
    span: tuple[int, int],
    *,
    mc_num: int = 128,
    batch_size: int = 16,
    generator: torch.Generator,
) -> float:
    """LLaDA's Monte Carlo estimate of the answer ``ids[span[0]:span[1]]``'s ELBO given the rest of ``ids`` (the
    module doc). ``mc_num // batch_size`` mini-batches of ``batch_size`` rows, one forward pass each."""
    a, b = span
    length = b - a
    if length < 1:
        raise ValueError("the answer span is empty")
    if batch_size < 1 or mc_num < batch_size:
        raise ValueError(f"mc_num ({mc_num}) must be at least batch_size ({batch_size}) >= 1")
    seq = [int(t) for t in ids]
    losses = []
    for _ in range(mc_num // batch_size):
        k = int(torch.randint(1, length + 1, (), generator=generator))
        counts = stratified_counts(k, length, batch_size)
        masks = []
        for m in counts:
            perm = torch.randperm(length, generator=generator)[:m]
            masks.append(sorted(a + int(p) for p in perm))
        nll = _masked_nll(model, [seq] * batch_size, masks)
        losses.append(sum(n / (m / length) for n, m in zip(nll, counts)) / batch_size)
    return -sum(losses) / len(losses)


def count_weights(length: int, rows: int) -> dict[int, float]:
    """The distribution of a row's mask count under LLaDA's stratified counts (``k ~ U{1..L}``, :func:`stratified_counts`).
    Uniform on ``1..L`` when the spacing ``L / rows`` is a whole number or never lands on a half; otherwise
    ``torch.round``'s half-to-even rounding favours even counts (``L = 8``, 16 rows: spacing 0.5)."""
    q: dict[int, float] = {}
    for k in range(1, length + 1):
        for m in stratified_counts(k, length, rows):
            q[m] = q.get(m, 0.0) + 1.0 / (length * rows)
    return q


def exact_elbo(
    model,
    ids: Sequence[int],
    span: tuple[int, int],
    *,
    weights: dict[int, float] | None = None,
    batch_size: int = 64,
) -> float:
    """``-sum_m w(m) (L / m) E_{|S| = m} sum_{i in S} -log p(x_i | x_{-S})`` by enumerating every non-empty mask
    subset of the answer (``2^L - 1`` rows; refused past 16 answer tokens). ``weights=None``: uniform ``w(m) = 1/L``,
    the ELBO; ``weights=count_weights(L, batch_size)``: what LLaDA's estimator with that mini-batch size averages to."""
    a, b = span
    length = b - a
    if not 1 <= length <= 16:
        raise ValueError(f"exact_elbo enumerates 2^L subsets; L = {length} is outside 1..16")
    seq = [int(t) for t in ids]
    subsets = [list(c) for m in range(1, length + 1) for c in itertools.combinations(range(a, b), m)]
    nll: list[float] = []
    for i in range(0, len(subsets), batch_size):
        chunk = subsets[i : i + batch_size]
        nll += _masked_nll(model, [seq] * len(chunk), chunk)
    by_m: dict[int, list[float]] = {}
    for s, n in zip(subsets, nll):
        by_m.setdefault(len(s), []).append(n)
    assert all(len(by_m[m]) == math.comb(length, m) for m in by_m)
    w = weights if weights is not None else {m: 1.0 / length for m in by_m}
    return -sum(w.get(m, 0.0) * (length / m) * (sum(v) / len(v)) for m, v in by_m.items())
