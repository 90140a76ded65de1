"""THE masked-scoring core: log-probabilities of a text's own tokens with some of them masked, in canonical batches.

Every caller that scores a diffusion LM on masked copies of token sequences goes through :func:`iter_scores` (or
:func:`score_rows`): DiffScore's estimator (:mod:`dlmeval.scoring.estimator`), LLaDA's likelihood estimator and the
exact ELBO (:mod:`dlmeval.scoring.llada_ll`), the lm-eval greedy check
(:mod:`dlmeval.integrations.lm_eval_ll`), IPM's detection pass (:mod:`dlmeval.robustness.ipm`) and the answer
confidences (:mod:`dlmeval.robustness.calibration`, :mod:`dlmeval.robustness.masked_confidence`) and
D-GCG's candidate losses (:mod:`dlmeval.robustness.dgcg`). A caller says
*what* to score, a list of :class:`MaskedRow` (the original ids, the positions replaced by the family's mask token,
the positions read); the core decides, once for all of them:

* **batches**: :func:`dlmeval.models.length_sorted_batches` over the rows' lengths (``batch_size`` /
  ``max_tokens``; longest first, equal lengths in the given order), so the rows a row shares a forward pass with,
  and their order, depend only on the rows and the two bounds. Batch composition moves the last float bits of a
  row's log-probabilities (:func:`~dlmeval.models.length_sorted_batches`), so a caller that needs the batches it
  had before asks for those bounds (LLaDA's estimator: one batch of its ``batch_size`` equal-length rows);
* **padding**: the family's padding side (:meth:`DiffusionLM.pad`); positions are indices into the unpadded row and
  are moved by the row's offset (:meth:`DiffusionLM.offset`), so left and right padding give the same scores;
* **the mask token**: ``model.mask_token_id``, written at the masked positions here for every row scored through
  the core (LLaDA's greedy check and D-GCG's differentiable loss mask their own one-row inputs);
* **dtype and the vocabulary**: float32 logits, ``log_softmax`` in float32, values handed back as float64; the
  normalisation runs over the rows ``vocab`` names (:data:`VOCABS`): ``tokenizer`` (the core's default,
  :data:`SCORING_VOCAB`: the padded vocabulary rows past the tokenizer left out, :meth:`DiffusionLM._vocab_masked`),
  ``all`` (every row of the head) or ``family`` (the rule the family's own likelihood code uses,
  ``Family.likelihood_vocab``: ``all`` for LLaDA, Dream, A2D and BERT-Chat, whose harnesses take ``F.cross_entropy``
  over the raw logits; the default, :data:`FAMILY_VOCAB`, of every caller that reproduces such a harness);
* **what is read**: the original token's log-probability at each scored position (always), and on request the
  largest log-probability (``max_logprob``), the top-``k`` ids (``top_k``), the mask token left out of the
  candidates (``exclude_mask``: as the sampler does) or unsupervised classifier-free guidance (``cfg``: LLaDA's
  ``un + (cfg + 1) (cond - un)``, the unconditional copy with the row's ``unconditional`` positions masked too).

A row's values come back in ascending position order (the order of ``where.nonzero()``), one float64 array per row.
:func:`masked_batch` builds one padded batch of masked rows; the decoders that re-predict masked positions step by
step (IPM's infill) start from it, and :func:`guided_logits_at` is the guided pass LLaDA's greedy check shares.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from dlmeval.errors import InputError
from dlmeval.models.base import length_sorted_batches

#: the vocabulary rules a caller may ask for (module doc)
VOCABS = ("tokenizer", "all", "family")
#: the default rule of every computation that reproduces a family's own likelihood code (LLaDA's
#: ``get_log_likelihood.py`` / ``eval_llada.py``, dllm's MDLM harness: :mod:`dlmeval.scoring.llada_ll`, lm-eval's
#: ``likelihood=llada`` / ``dllm`` and ``ll_estimator=llada``): the family's own rule, ``Family.likelihood_vocab``
#: (evidence: each family's declaration in ``dlmeval.models``; issue #34 item 13); ``vocab="tokenizer"`` one
#: keyword / model argument away
FAMILY_VOCAB = "family"
#: the default of dlmeval's own scores (DiffScore, IPM, the answer confidences, D-GCG): the tokenizer's rows. The
#: DiffScore paper (section 2, "Notation") defines ``p_theta(x^i | x_t)`` over the finite vocabulary ``V`` of tokens;
#: the padded head rows past the tokenizer are no tokens of ``V``
SCORING_VOCAB = "tokenizer"


def vocab_rows(model, vocab: str) -> str:
    """The rows (``tokenizer`` or ``all``) that ``vocab`` (:data:`VOCABS`) means for ``model``."""
    if vocab not in VOCABS:
        raise InputError(
            f"vocab={vocab!r}; choose one of {', '.join(VOCABS)} (family: the family's own rule)"
        )
    return str(getattr(model, "likelihood_vocab", "tokenizer")) if vocab == "family" else vocab


def _rows_kw(rows: str) -> dict[str, str]:
    # the keyword only when it departs from the default: read-through model proxies take the plain call
    return {} if rows == "tokenizer" else {"vocab_rows": rows}


@dataclass(frozen=True)
class MaskedRow:
    """One masked copy of a token sequence: ``ids`` (the original tokens, unpadded), ``masked`` (indices into ``ids``
    replaced by the mask token), ``scored`` (indices read; None: the masked ones) and, for guided scoring only,
    ``unconditional`` (indices also masked in the unconditional copy: everything outside the answer)."""

    ids: Sequence[int]
    masked: Sequence[int] | np.ndarray = ()
    scored: Sequence[int] | np.ndarray | None = None
    unconditional: Sequence[int] | np.ndarray | None = None

    def read(self) -> Sequence[int] | np.ndarray:
        return self.masked if self.scored is None else self.scored


@dataclass
class MaskedBatch:
    """One padded batch of masked rows on the model's device: ``ids`` (masked), ``attention_mask``, ``targets``
    (the original ids, padded alike), ``where`` (bool: the scored positions), ``masked`` (bool: the masked ones)
    and each row's ``offsets`` (its first real column)."""

    ids: torch.Tensor
    attention_mask: torch.Tensor
    targets: torch.Tensor
    where: torch.Tensor
    masked: torch.Tensor
    offsets: list[int]


@dataclass
class BatchScores:
    """The scores of one batch: ``rows`` (indices into the rows given, in batch order) and per row, in ascending
    position order, ``logprob`` (float64 log p of the original token), ``max_logprob`` / ``top_ids`` when asked."""

    rows: list[int]
    logprob: list[np.ndarray]
    max_logprob: list[np.ndarray] | None = None
    top_ids: list[np.ndarray] | None = None


def _mark(t: torch.Tensor, r: int, off: int, pos) -> None:
    idx = [off + int(p) for p in pos]
    if idx:
        t[r, idx] = True


def masked_batch(model, rows: Sequence[MaskedRow]) -> MaskedBatch:
    """Pad ``rows`` into one batch with the mask token at each row's masked positions (module doc)."""
    mask_id = int(model.mask_token_id)
    seqs = []
    for row in rows:
        s = [int(t) for t in row.ids]
        for p in row.masked:
            s[int(p)] = mask_id
        seqs.append(s)
    ids, attn = model.pad(seqs)
    targets, _ = model.pad([[int(t) for t in row.ids] for row in rows])
    offsets = model.offset(attn).tolist()
    where = torch.zeros_like(ids, dtype=torch.bool)
    masked = torch.zeros_like(ids, dtype=torch.bool)
    for r, row in enumerate(rows):
        _mark(where, r, offsets[r], row.read())
        _mark(masked, r, offsets[r], row.masked)
    return MaskedBatch(ids, attn, targets, where, masked, offsets)


def guided_logits_at(
    model,
    ids: torch.Tensor,
    attn: torch.Tensor,
    where: torch.Tensor,
    uncond: torch.Tensor,
    cfg: float,
    *,
    vocab: str = SCORING_VOCAB,
) -> torch.Tensor:
    """Float32 logits ``[N, V]`` at ``where``; with ``cfg > 0`` guided: the rows again with ``uncond`` positions
    masked, ``un + (cfg + 1) (cond - un)`` (one forward pass of both halves, as LLaDA's ``get_logits``)."""
    kw = _rows_kw(vocab_rows(model, vocab))
    if cfg <= 0:
        return model.logits_at(ids, attn, where, **kw)
    un = ids.clone()
    un[uncond] = int(model.mask_token_id)
    z = model.logits_at(torch.cat([ids, un]), torch.cat([attn, attn]), torch.cat([where, where]), **kw)
    cond, uncond_z = z.chunk(2)
    return uncond_z + (cfg + 1) * (cond - uncond_z)


def _split(values: np.ndarray, bi: np.ndarray, n_rows: int) -> list[np.ndarray]:
    """Row-major flat values (``bi``: each value's row, non-decreasing) as one array per row."""
    ends = np.searchsorted(bi, np.arange(n_rows), side="right")
    starts = np.concatenate([[0], ends[:-1]]).astype(np.int64)
    return [values[a:b] for a, b in zip(starts, ends)]


def _score_batch(model, rows, batch: MaskedBatch, *, max_logprob, top_k, exclude_mask, cfg, vocab):
    n = len(rows)
    kw = _rows_kw(vocab)
    if cfg > 0 or exclude_mask:
        if cfg > 0:
            uncond = torch.zeros_like(batch.where)
            for r, row in enumerate(rows):
                _mark(uncond, r, batch.offsets[r], () if row.unconditional is None else row.unconditional)
            z = guided_logits_at(
                model, batch.ids, batch.attention_mask, batch.where, uncond, cfg, vocab=vocab
            )
        else:
            z = model.logits_at(batch.ids, batch.attention_mask, batch.where, **kw).float()
            z[:, int(model.mask_token_id)] = float("-inf")  # the mask token is no answer
        lp = torch.log_softmax(z, dim=-1)
        bi, pi = batch.where.nonzero(as_tuple=True)
        chosen = lp.gather(1, batch.targets[bi, pi][:, None]).squeeze(1)
        best = lp.max(dim=-1).values if max_logprob else None
        tops = lp.topk(top_k, dim=-1).indices if top_k else None
    else:
        sc = model.score_positions(
            batch.ids,
            batch.attention_mask,
            batch.where,
            batch.targets,
            max_logprob=max_logprob,
            top_k=top_k,
            **kw,
        )
        bi, chosen, best, tops = sc.batch_index, sc.logprob, sc.max_logprob, sc.top_ids
    bi = bi.cpu().numpy()
    return (
        _split(chosen.double().cpu().numpy(), bi, n),
        None if best is None else _split(best.double().cpu().numpy(), bi, n),
        None if tops is None else _split(tops.cpu().numpy(), bi, n),
    )


def iter_scores(
    model,
    rows: Sequence[MaskedRow],
    *,
    batch_size: int | None = None,
    max_tokens: int | None = None,
    max_logprob: bool = False,
    top_k: int = 0,
    exclude_mask: bool = False,
    cfg: float = 0.0,
    vocab: str = SCORING_VOCAB,
) -> Iterator[BatchScores]:
    """Score ``rows`` batch by batch (module doc), one forward pass per batch (two halves of one pass with
    ``cfg > 0``); yields a :class:`BatchScores` as each batch finishes, so a caller can write finished items or
    advance a progress bar between batches."""
    if cfg < 0:
        raise InputError(f"cfg={cfg}; classifier-free guidance takes a scale >= 0 (0: none)")
    if cfg > 0 and exclude_mask:
        raise InputError("exclude_mask and cfg cannot be combined")
    rows_rule = vocab_rows(model, vocab)
    lengths = [len(row.ids) for row in rows]
    with torch.no_grad():
        for idx in length_sorted_batches(lengths, batch_size=batch_size, max_tokens=max_tokens):
            chunk = [rows[i] for i in idx]
            batch = masked_batch(model, chunk)
            lp, mx, top = _score_batch(
                model,
                chunk,
                batch,
                max_logprob=max_logprob,
                top_k=top_k,
                exclude_mask=exclude_mask,
                cfg=cfg,
                vocab=rows_rule,
            )
            yield BatchScores(list(idx), lp, mx, top)


def score_rows(model, rows: Sequence[MaskedRow], **kw) -> list[BatchScores]:
    """All of :func:`iter_scores` at once (the same keywords), in batch order."""
    return list(iter_scores(model, rows, **kw))


__all__ = [
    "FAMILY_VOCAB",
    "SCORING_VOCAB",
    "VOCABS",
    "BatchScores",
    "MaskedBatch",
    "MaskedRow",
    "guided_logits_at",
    "iter_scores",
    "masked_batch",
    "score_rows",
    "vocab_rows",
]
