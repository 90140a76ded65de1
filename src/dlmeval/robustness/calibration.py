"""Sequence confidences for calibration: the robustness paper's DLM and AR definitions and its ablation (App. I).

A confidence is an aggregation of per-token probabilities of an answer. Per-token *bases*:

============  ==========================================================================================
basis         per-token value
============  ==========================================================================================
``max``       DLM (the paper's definition, Eq. 4 and Sec. 3.3): the largest probability at each answer
              position, from ONE bidirectional forward pass over the prompt and the final committed answer
              (nothing masked). AR: the largest next-token probability at each generated position.
``chosen``    the probability of the token that is in the answer, from the same pass (AR: the paper's
              definition, the probability of each chosen token under causal masking).
``commit``    DLM: the probability the sampler gave the final token at the step it committed it (recorded
              with :class:`CommitRecorder`). AR: identical to ``chosen`` (a causal model commits each token
              from exactly the distribution a rescoring pass gives it).
============  ==========================================================================================

Aggregations: ``geo`` (geometric mean = ``exp(mean log p)``, the paper's), ``mean`` (arithmetic mean) and
``min``. The paper's DLM confidence is ``max/geo``; its AR confidence is ``chosen/geo``.

Which tokens are the answer. DLM: the committed generation up to its first EOS (what
:class:`~dlmeval.sampling.SampleResult` calls ``token_ids``); the pass sees the prompt, the answer and that EOS
(nothing after it). AR: the generated text re-tokenized after the prompt (the lm-evaluation-harness split: the
prompt's tokens are the prefix of the tokens of prompt + output). An empty answer is scored by its end token (the
EOS the DLM committed first / the AR model's first EOS id after the prompt), so every answer has a confidence; a
model without EOS ids gives NaN for an empty answer.

For likelihood scoring of multiple choice there is no generated answer: :func:`choice_confidence` is the softmax
of the per-choice scores at the chosen option (dlmeval's addition; the paper calibrates generations only).

Everything here runs the model in inference mode, in length-sorted batches: a row's confidences are those of the
row alone up to rounding (``tests/models/test_models.py``, to 1e-5), not bit for bit, since the batch's padded width moves
the last bits (:func:`~dlmeval.models.base.length_sorted_batches`); the robustness runs carry their batch size in
their signature for that reason.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from dlmeval.errors import InputError
from dlmeval.models.base import position_pairs

BASES = ("max", "chosen", "commit")
AGGREGATIONS = ("geo", "mean", "min")
#: the paper's definitions: DLM max/geo (Eq. 4), AR chosen/geo
PRIMARY = {"dlm": ("max", "geo"), "ar": ("chosen", "geo")}


def confidence_key(basis: str, aggregation: str) -> str:
    """``"max/geo"``: how confidences are named in records and tables."""
    if basis not in BASES:
        raise InputError(f"unknown confidence basis {basis!r}; choose one of {', '.join(BASES)}")
    if aggregation not in AGGREGATIONS:
        raise InputError(f"unknown aggregation {aggregation!r}; choose one of {', '.join(AGGREGATIONS)}")
    return f"{basis}/{aggregation}"


def aggregate(logprobs: Sequence[float] | np.ndarray, aggregation: str = "geo") -> float:
    """Aggregate per-token log-probabilities into one confidence in [0, 1].

    ``geo``: ``exp(mean log p)``; ``mean``: ``mean(p)``; ``min``: ``min(p)``. NaN for no tokens or any NaN token.
    """
    if aggregation not in AGGREGATIONS:
        raise InputError(f"unknown aggregation {aggregation!r}; choose one of {', '.join(AGGREGATIONS)}")
    lp = np.asarray(logprobs, dtype=np.float64).reshape(-1)
    if lp.size == 0 or np.isnan(lp).any():
        return float("nan")
    if (lp > 1e-6).any():
        raise InputError("log-probabilities must be <= 0")
    lp = np.minimum(lp, 0.0)
    if aggregation == "geo":
        return float(math.exp(lp.mean()))
    if aggregation == "mean":
        return float(np.exp(lp).mean())
    return float(math.exp(lp.min()))


@dataclass
class TokenProbs:
    """Per-token log-probabilities of one answer under each basis (``commit`` may be absent)."""

    max: np.ndarray
    chosen: np.ndarray
    commit: np.ndarray | None = None
    n_tokens: int = 0  # answer tokens (0 for an empty answer, which is scored by its end token)
    note: str | None = None

    def confidence(self, basis: str = "max", aggregation: str = "geo") -> float:
        confidence_key(basis, aggregation)
        lp = getattr(self, basis)
        if lp is None:
            return float("nan")
        return aggregate(lp, aggregation)

    def confidences(self) -> dict[str, float]:
        """Every basis x aggregation as ``{"max/geo": c, ...}`` (NaN where the basis was not recorded)."""
        return {confidence_key(b, a): self.confidence(b, a) for b in BASES for a in AGGREGATIONS}

    def as_dict(self) -> dict[str, Any]:
        return {
            "n_tokens": self.n_tokens,
            "max_logprob": [float(x) for x in self.max],
            "chosen_logprob": [float(x) for x in self.chosen],
            "commit_logprob": None if self.commit is None else [float(x) for x in self.commit],
            "note": self.note,
        }


# ------------------------------------------------------------------------------------------------ DLM
def _first_end(ids: Sequence[int], eos: set[int]) -> int:
    return next((k for k, t in enumerate(ids) if int(t) in eos), len(ids))


def scored_sequences(
    model, prompt_ids: Sequence[Sequence[int]], generations: Sequence[Sequence[int]]
) -> tuple[list[list[int]], list[tuple[int, int]], list[int]]:
    """``(sequences, spans, n_answer)``: each prompt + answer (+ its terminating EOS), the scored positions
    ``[start, stop)`` (the answer; an empty answer's end token) and the answer length (:func:`dlm_token_probs`)."""
    if len(prompt_ids) != len(generations):
        raise InputError(f"{len(prompt_ids)} prompts but {len(generations)} generations")
    eos = {int(t) for t in model.eos_token_ids}
    seqs: list[list[int]] = []
    spans: list[tuple[int, int]] = []  # scored positions [start, stop) in the unpadded sequence
    n_answer: list[int] = []
    for p, g in zip(prompt_ids, generations):
        p, g = [int(t) for t in p], [int(t) for t in g]
        cut = _first_end(g, eos)
        answer = g[:cut]
        tail = g[cut : cut + 1]  # the terminating EOS, when committed
        seqs.append(p + answer + tail)
        n_answer.append(len(answer))
        if answer:
            spans.append((len(p), len(p) + len(answer)))
        elif tail:
            spans.append((len(p), len(p) + 1))  # empty answer: its end token
        else:
            spans.append((len(p), len(p)))
        if len(seqs[-1]) > model.max_length:
            raise InputError(
                f"prompt plus answer ({len(seqs[-1])} tokens) exceed the model's window of {model.max_length}"
            )
    return seqs, spans, n_answer


@torch.no_grad()
def dlm_token_probs(
    model,
    prompt_ids: Sequence[Sequence[int]],
    generations: Sequence[Sequence[int]],
    *,
    commit: Sequence[np.ndarray | None] | None = None,
    batch_size: int = 16,
) -> list[TokenProbs]:
    """Per-token ``max`` and ``chosen`` log-probabilities of DLM answers from one bidirectional pass each.

    ``prompt_ids[b]``: the prompt as the sampler saw it; ``generations[b]``: the committed generation region (the
    answer is its part before the first EOS; a raw region with tokens after the EOS is cut there). ``commit[b]``
    (optional): the commit-time log-probabilities of the answer tokens (:meth:`CommitRecorder.commit_logprobs`).
    """
    from dlmeval.scoring.core import MaskedRow, iter_scores

    if commit is not None and len(commit) != len(generations):
        raise InputError(f"{len(commit)} commit-time arrays for {len(generations)} generations")
    seqs, spans, n_answer = scored_sequences(model, prompt_ids, generations)
    out: list[TokenProbs | None] = [None] * len(seqs)
    rows = [MaskedRow(s, (), scored=range(a, b)) for s, (a, b) in zip(seqs, spans)]
    for scored in iter_scores(model, rows, batch_size=batch_size, max_logprob=True):
        for i, chosen, mx in zip(scored.rows, scored.logprob, scored.max_logprob):
            out[i] = TokenProbs(
                max=mx,
                chosen=chosen,
                commit=None
                if commit is None or commit[i] is None
                else np.asarray(commit[i], dtype=np.float64),
                n_tokens=n_answer[i],
                note=None if n_answer[i] else "empty answer: scored by its end token",
            )
    for i, tp in enumerate(out):
        assert tp is not None
        if tp.commit is not None and tp.n_tokens and tp.commit.size != tp.n_tokens:
            raise InputError(
                f"row {i}: {tp.commit.size} commit-time values for an answer of {tp.n_tokens} tokens"
            )
    return out  # type: ignore[return-value]


class CommitRecorder:
    """A :class:`~dlmeval.models.base.DiffusionLM` stand-in that remembers, for every forward pass a
    :class:`~dlmeval.sampling.RemaskingSampler` makes, the top-``k`` log-probabilities at each masked position.

    The distribution is the sampler's: the banned ids (the mask token, plus the EOS ids when the sampler runs
    with ``suppress_eos``) are removed and the rest renormalised, as the sampler's own ``confidence``. Use one
    recorder per ``sampler.sample`` call without ``batch_size`` (one batch), then :meth:`commit_logprobs`.

    How a pass maps to a step: the sampler makes exactly one forward pass per step in which any row takes part,
    with those rows in ascending order (``SampleResult.history.forwarded[t]``), so the k-th recorded pass is the
    k-th such step. A token committed at step ``t`` (``history.decided_step``) was drawn from that pass. With
    temperature 0 the committed token is the top-1 token of that distribution; with sampling it is looked up in the
    top ``k`` (NaN, counted in :attr:`misses`, when it is not among them).
    """

    def __init__(self, model, *, suppress_eos: bool = False, top_k: int = 32):
        if top_k < 1:
            raise InputError(f"top_k must be >= 1, got {top_k}")
        self._model = model
        self._top_k = int(top_k)
        banned = {int(model.mask_token_id)}
        if suppress_eos:
            banned |= {int(t) for t in model.eos_token_ids}
        self._banned = sorted(banned)
        self.calls: list[dict[tuple[int, int], tuple[np.ndarray, np.ndarray]]] = []
        self.misses = 0

    def __getattr__(self, name: str) -> Any:  # everything else is the wrapped model's
        return getattr(self._model, name)

    @torch.no_grad()
    def logits(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None) -> torch.Tensor:
        out = self._model.logits(input_ids, attention_mask)
        masked = input_ids == self._model.mask_token_id
        if attention_mask is not None:
            masked &= attention_mask.bool()
        rows, cols = masked.nonzero(as_tuple=True)
        self._record(rows, cols, out[rows, cols])
        return out

    @torch.no_grad()
    def logits_at(
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None, positions
    ) -> torch.Tensor:
        """The sampler's path (logits at the positions it reads); records the masked ones among them."""
        out = self._model.logits_at(input_ids, attention_mask, positions)
        rows, cols = position_pairs(positions)
        sel = input_ids[rows, cols] == self._model.mask_token_id
        self._record(rows[sel], cols[sel], out[sel])
        return out

    def _record(self, rows: torch.Tensor, cols: torch.Tensor, logits: torch.Tensor) -> None:
        z = logits.float().clone()
        z[:, self._banned] = -math.inf
        lp = torch.log_softmax(z, dim=-1)
        k = min(self._top_k, lp.shape[-1])
        vals, ids = lp.topk(k, dim=-1)
        vals, ids = vals.double().cpu().numpy(), ids.cpu().numpy()
        rec = {}
        for n, (r, c) in enumerate(zip(rows.tolist(), cols.tolist())):
            rec[(r, c)] = (ids[n], vals[n])
        self.calls.append(rec)

    def commit_logprobs(self, result) -> list[np.ndarray | None]:
        """Commit-time log-probabilities of each row's answer tokens (``result.token_ids``) from the recorded
        passes; None for every row when the passes do not match the sampler's history (a warning says so)."""
        hist = result.history
        fwd = np.asarray(hist.forwarded, dtype=bool)  # [T, B]
        steps_run = np.flatnonzero(fwd.any(axis=1))
        if len(steps_run) != len(self.calls):
            warnings.warn(
                f"commit-time confidences unavailable: {len(self.calls)} recorded forward passes but the sampler "
                f"history has {len(steps_run)} (use one recorder per unbatched sample call)",
                RuntimeWarning,
                stacklevel=2,
            )
            return [None] * len(result.token_ids)
        call_of_step = {int(t): k for k, t in enumerate(steps_run)}
        # generated position 0 of each row, in the padded batch the sampler built
        seqs = [list(p) + [0] * result.tokens.shape[1] for p in result.prompt_ids]
        _, attn = self._model.pad(seqs)
        starts = (self._model.offset(attn).cpu() + torch.tensor([len(p) for p in result.prompt_ids])).tolist()
        out: list[np.ndarray | None] = []
        for b, answer in enumerate(result.token_ids):
            vals = np.full(len(answer), np.nan)
            for i, tok in enumerate(answer):
                t = int(hist.decided_step[b, i])
                k = call_of_step.get(t)
                if k is None:
                    self.misses += 1
                    continue
                local = int(np.searchsorted(np.flatnonzero(fwd[t]), b))
                hit = self.calls[k].get((local, starts[b] + i))
                if hit is None:
                    self.misses += 1
                    continue
                where = np.flatnonzero(hit[0] == int(tok))
                if where.size:
                    vals[i] = hit[1][where[0]]
                else:
                    self.misses += 1
            out.append(vals)
        return out


# ------------------------------------------------------------------------------------------------ AR
@torch.no_grad()
def ar_token_probs(
    model,
    prompts: Sequence[str],
    outputs: Sequence[str],
    *,
    batch_size: int = 8,
    generated: Sequence[Any] | None = None,
) -> list[TokenProbs]:
    """Per-token ``chosen`` (= ``commit``) and ``max`` log-probabilities of AR generations under causal masking.

    ``prompts[b]`` is the exact prompt text that was generated from (after the chat template), ``outputs[b]`` the
    generated text. An empty output is scored by the model's first EOS id after the prompt.

    ``generated`` (the :class:`~dlmeval.models.causal.Generation` objects of ``CausalLM.generate_scored``, one per
    row) saves the rescoring pass: where the answer's tokens (the text re-encoded after the prompt) are the first
    tokens the generation produced from the whole prompt, their log-probabilities are the ones the generation
    computed, which are the same numbers up to float rounding. Other rows (and empty answers) are rescored.
    """

    if len(prompts) != len(outputs):
        raise InputError(f"{len(prompts)} prompts but {len(outputs)} outputs")
    if generated is not None and len(generated) != len(prompts):
        raise InputError(f"{len(generated)} generations for {len(prompts)} prompts")
    eos = list(model.eos_token_ids)
    seqs, starts, n_answer = [], [], []
    out: list[TokenProbs | None] = [None] * len(prompts)
    for i, (p, o) in enumerate(zip(prompts, outputs)):
        ctx, cont = model.split_tokens(p, o)
        n_answer.append(len(cont))
        g = generated[i] if generated is not None else None
        if g is not None and len(ctx) == g.prompt_tokens and ctx:
            n = len(cont)
            if n and list(cont) == list(g.token_ids[:n]):
                out[i] = TokenProbs(
                    max=np.asarray(g.max[:n], dtype=np.float64),
                    chosen=np.asarray(g.chosen[:n], dtype=np.float64),
                    commit=np.asarray(g.chosen[:n], dtype=np.float64),
                    n_tokens=n,
                )
        if not cont and eos:
            cont = [int(eos[0])]
        if not ctx and model.bos_token_id is not None:
            ctx = [int(model.bos_token_id)]
        ids = (ctx + cont)[-model.max_length :]
        seqs.append(ids)
        starts.append(max(1, len(ids) - len(cont)))
    todo = [i for i in range(len(seqs)) if out[i] is None]
    scored = model.tail_logprobs([seqs[i] for i in todo], [starts[i] for i in todo], batch_size=batch_size)
    for i, (c, mx) in zip(todo, scored):
        out[i] = TokenProbs(
            max=mx,
            chosen=c,
            commit=c.copy(),
            n_tokens=n_answer[i],
            note=None if n_answer[i] else "empty answer: scored by its end token",
        )
    return out  # type: ignore[return-value]


# ------------------------------------------------------------------------------------------------ choices
def choice_confidence(scores: Sequence[float]) -> float:
    """``max softmax(scores)`` over the options (scores are log-likelihoods; NaN counts as -inf)."""
    s = np.asarray([(-math.inf if x is None or math.isnan(float(x)) else float(x)) for x in scores])
    if s.size == 0:
        raise InputError("no choice scores")
    if not np.isfinite(s).any():
        return float("nan")
    from scipy.special import softmax

    return float(softmax(s).max())


@dataclass
class CalibrationRow:
    """ECE, selective AUROC and the reliability bins of one set of (confidence, correct) pairs."""

    n: int
    accuracy: float
    mean_confidence: float
    ece: float
    auroc: float
    n_nan: int = 0  # items without a confidence (left out)
    bins: Any = field(default=None, repr=False)

    def as_dict(self) -> dict[str, Any]:
        return {
            "n": self.n,
            "accuracy": self.accuracy,
            "mean_confidence": self.mean_confidence,
            "ece": self.ece,
            "auroc": self.auroc,
            "n_nan": self.n_nan,
        }


def calibration(confidences: Sequence[float], correct: Sequence[bool], *, n_bins: int = 15) -> CalibrationRow:
    """ECE (``n_bins`` equal-width bins), selective-prediction AUROC (scikit-learn) and reliability bins.

    Items whose confidence is NaN are left out (counted in ``n_nan``); AUROC is NaN when all remaining answers
    are right or all wrong.
    """
    from dlmeval.metrics import reliability_bins, selective_auroc

    c = np.asarray(confidences, dtype=np.float64)
    y = np.asarray(correct, dtype=bool)
    if c.shape != y.shape:
        raise InputError(f"{c.size} confidences for {y.size} answers")
    keep = ~np.isnan(c)
    c, y = np.clip(c[keep], 0.0, 1.0), y[keep]
    n_nan = int((~keep).sum())
    if c.size == 0:
        nan = float("nan")
        return CalibrationRow(0, nan, nan, nan, nan, n_nan)
    bins = reliability_bins(c, y, n_bins)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # one class: NaN by design
        auroc = selective_auroc(c, y)
    return CalibrationRow(int(c.size), float(y.mean()), float(c.mean()), bins.ece, auroc, n_nan, bins)


__all__ = [
    "AGGREGATIONS",
    "BASES",
    "PRIMARY",
    "CalibrationRow",
    "CommitRecorder",
    "TokenProbs",
    "aggregate",
    "ar_token_probs",
    "calibration",
    "choice_confidence",
    "confidence_key",
    "dlm_token_probs",
]
