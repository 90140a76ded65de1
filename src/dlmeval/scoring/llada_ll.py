"""LLaDA's own log-likelihood estimator (``get_log_likelihood.py`` of GSAI-ML/LLaDA), written from its published
semantics, and the exact value it estimates.

The estimand is LLaDA's ELBO of an answer ``x`` (``L`` tokens) given a prompt, in its mask-*count* form (LLaDA
App. B, Eq. 12, equal in expectation to the rate form):

    ELBO(x) = - E_{m ~ U{1..L}} [ (L / m) E_{S ~ U(m-subsets)} sum_{i in S} -log p(x_i | prompt, x with S masked) ]

and :func:`llada_log_likelihood` estimates it as LLaDA does: ``mc_num // batch_size`` mini-batches; in each, one
``k ~ U{1..L}`` and *stratified* mask counts ``m_j = round(linspace(k, k + (b - 1) L / b, b))`` wrapped into
``1..L`` (``((m - 1) mod L) + 1``; ``torch.round`` of float32, half to even, as the original), each row masking
the ``m_j`` answer positions ``j`` whose entry ``perm[j]`` of a fresh random permutation is below ``m_j`` (the
original's ``is_mask[i][torch.randperm(L)]``, so one generator seed gives the original's draws); a row's loss is its masked cross-entropy divided by
``m_j / L``, a mini-batch's the mean of its rows, the estimate minus the mean over mini-batches. Unbiased for the
ELBO when the count spacing ``L / batch_size`` avoids halves (e.g. ``batch_size`` dividing ``L``, or ``L = 7`` with
16 rows); with a spacing of exactly 0.5 (``L = 8``, 16 rows: LLaDA's default batch on an 8-token answer)
``torch.round``'s half-to-even rounding makes even counts twice as likely as odd ones, and the estimator then
averages to :func:`exact_elbo` under :func:`count_weights` instead. :func:`exact_elbo` enumerates every mask
subset (2^L - 1 passes: a short answer only), the reference both lm-eval estimators are measured against
(docs/care.md, lm-evaluation-harness).

Random draws come from a generator seeded by the caller (the plugin: run seed and request id), never the global RNG.

LLaDA's lm-eval harness (``eval_llada.py``) adds two things, here as options: the token layout of
:func:`llada_encode_pair` (the context and continuation concatenated, trailing spaces moved to the continuation,
the continuation's ids those of the whole string past the context's: lm-eval's own ``_encode_pair``) and
unsupervised classifier-free guidance ``cfg`` (``cfg > 0``: each row is also run with every token outside the answer
masked, and the logits are ``un + (cfg + 1) (cond - un)``; LLaDA reports ARC-C, HellaSwag, PIQA and GPQA with
``cfg = 0.5``). :func:`llada_greedy` is its ``is_check_greedy`` test.

``vocab`` (:data:`dlmeval.scoring.core.VOCABS`): the output rows the log-softmax runs over. The default is
``family`` (:data:`dlmeval.scoring.core.FAMILY_VOCAB`), the rule of the family's own likelihood code
(``Family.likelihood_vocab``): LLaDA's ``get_log_likelihood.py`` and dllm's MDLM harness take ``F.cross_entropy``
over every row of the head (LLaDA-8B has 126,464 rows for 126,349 token ids), so LLaDA, Dream, A2D and BERT-Chat
normalise over all of them; a family with no likelihood code of its own keeps the tokenizer's rows.
``vocab="tokenizer"`` leaves the padded rows out (dlmeval's rule for its own scores). On the tiny-llada stand-in,
whose 43 padded rows are untrained, the two differ by 0.05-0.07 nats (tests/fixtures/llada_harness_tiny.json was
recorded with those rows masked by a shim, so its parity test asks for ``vocab="tokenizer"``).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

import torch

from dlmeval.errors import InputError
from dlmeval.scoring.core import FAMILY_VOCAB, MaskedRow, guided_logits_at, iter_scores


def stratified_counts(k: int, length: int, rows: int) -> list[int]:
    """LLaDA's mask counts of one mini-batch: ``round(linspace(k, k + (rows - 1) * length / rows, rows))`` in
    float32 (half to even), wrapped into ``1..length``."""
    x = torch.round(
        torch.linspace(float(k), k + (rows - 1) * (length / rows), steps=rows, dtype=torch.float32)
    ).long()
    x = ((x - 1) % length) + 1
    return [int(v) for v in x]


def llada_encode_pair(model, context: str, continuation: str) -> tuple[list[int], list[int]]:
    """LLaDA's (and lm-eval's) token split: trailing spaces of ``context`` move to ``continuation``; the context's ids
    are the tokenizer's on the context (special tokens included: LLaDA's BOS), the continuation's those of
    ``context + continuation`` past them."""
    n = len(context) - len(context.rstrip())
    if n:
        context, continuation = context[:-n], context[-n:] + continuation
    whole = model.encode(context + continuation)
    ctx = model.encode(context)
    return ctx, whole[len(ctx) :]


def harness_pair(model, context: str, continuation: str, where: str) -> tuple[list[int], tuple[int, int]]:
    """``(ids, span)`` of a request as LLaDA's harness lays it out (:func:`llada_encode_pair`): the whole sequence
    and the continuation's ``[start, end)`` in it. A continuation with no tokens of its own, or a sequence past the
    model's length, is an :class:`InputError` naming ``where`` (the request or item)."""
    p, x = llada_encode_pair(model, context, continuation)
    if not x:
        raise InputError(f"{where}: the continuation {continuation!r} has no tokens of its own")
    ids = p + x
    if len(ids) > model.max_length:
        raise InputError(
            f"{where}: context + continuation are {len(ids)} tokens, past the model's {model.max_length}"
        )
    return ids, (len(p), len(ids))


def _masked_nll(
    model,
    seqs: list[list[int]],
    masks: list[list[int]],
    *,
    cfg: float = 0.0,
    span=None,
    vocab: str = FAMILY_VOCAB,
) -> list[float]:
    """Per row: the summed ``-log p`` of the tokens at ``masks[r]`` (indices into ``seqs[r]``) with them masked, the
    rows one forward pass (:mod:`dlmeval.scoring.core`); ``cfg > 0``: guided by the rows with every position
    outside ``span`` masked."""
    outside = None
    if cfg > 0:
        outside = [p for s in seqs[:1] for p in range(len(s)) if not span[0] <= p < span[1]]
    rows = [MaskedRow(s, m, unconditional=outside) for s, m in zip(seqs, masks)]
    out = [0.0] * len(seqs)
    for scored in iter_scores(model, rows, batch_size=len(rows), cfg=cfg, vocab=vocab):
        for r, lp in zip(scored.rows, scored.logprob):
            for v in lp.tolist():
                out[r] -= v
    return out


def llada_log_likelihood(
    model,
    ids: Sequence[int],
    span: tuple[int, int],
    *,
    mc_num: int = 128,
    batch_size: int = 16,
    cfg: float = 0.0,
    generator: torch.Generator,
    vocab: str = FAMILY_VOCAB,
) -> float:
    """LLaDA's Monte Carlo estimate of the answer ``ids[span[0]:span[1]]``'s ELBO given the rest of ``ids`` (the
    module doc). ``mc_num // batch_size`` mini-batches of ``batch_size`` rows, one forward pass each (``cfg > 0``:
    guided, each pass twice the rows)."""
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
            perm = torch.randperm(length, generator=generator)
            masks.append([a + j for j in range(length) if int(perm[j]) < m])
        nll = _masked_nll(model, [seq] * batch_size, masks, cfg=cfg, span=span, vocab=vocab)
        losses.append(sum(n / (m / length) for n, m in zip(nll, counts)) / batch_size)
    return -sum(losses) / len(losses)


@torch.no_grad()
def llada_greedy(
    model, ids: Sequence[int], span: tuple[int, int], *, cfg: float = 0.0, vocab: str = FAMILY_VOCAB
) -> bool:
    """LLaDA's ``suffix_greedy_prediction``: the answer fully masked, unmasked one token per forward pass (the
    most confident argmax among the masked positions), and whether the result is the answer."""
    a, b = span
    target = [int(t) for t in ids[a:b]]
    row = torch.tensor([int(t) for t in ids], device=model.device).unsqueeze(0)
    row[0, a:b] = model.mask_token_id
    attn = torch.ones_like(row)
    prompt = torch.ones_like(row, dtype=torch.bool)
    prompt[0, a:b] = False
    for _ in range(b - a):
        where = row == model.mask_token_id
        where[0, :a] = False
        where[0, b:] = False
        z = guided_logits_at(model, row, attn, where, prompt, cfg, vocab=vocab)
        x0 = z.argmax(-1)
        conf = torch.softmax(z, dim=-1).gather(-1, x0.unsqueeze(-1)).squeeze(-1)
        best = int(torch.argmax(conf))
        pos = where.nonzero(as_tuple=True)[1][best]
        row[0, pos] = x0[best]
    return row[0, a:b].tolist() == target


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
    vocab: str = FAMILY_VOCAB,
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
        nll += _masked_nll(model, [seq] * len(chunk), chunk, vocab=vocab)
    by_m: dict[int, list[float]] = {}
    for s, n in zip(subsets, nll):
        by_m.setdefault(len(s), []).append(n)
    assert all(len(by_m[m]) == math.comb(length, m) for m in by_m)
    w = weights if weights is not None else {m: 1.0 / length for m in by_m}
    return -sum(w.get(m, 0.0) * (length / m) * (sum(v) / len(v)) for m, v in by_m.items())
