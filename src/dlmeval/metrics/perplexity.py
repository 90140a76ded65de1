"""Perplexity of generations under an external autoregressive evaluator (Care's "PPL via Llama-3-8B")."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from dlmeval.errors import InputError


@dataclass(frozen=True)
class PerplexityResult:
    """Per-item negative log-likelihoods (nats, summed over continuation tokens) and token counts, plus two PPLs.

    * ``ppl`` (micro, the headline): ``exp(sum(nll) / sum(n_tokens))``, every token weighted equally.
    * ``mean_item_ppl``: the mean over items of ``exp(nll_i / n_tokens_i)`` (items with no token are skipped);
      longer-tailed than ``ppl`` because a few bad items dominate it.
    """

    nll: np.ndarray
    n_tokens: np.ndarray
    ppl: float
    mean_item_ppl: float
    evaluator: str

    @property
    def item_ppl(self) -> np.ndarray:
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(self.n_tokens > 0, np.exp(self.nll / np.maximum(self.n_tokens, 1)), np.nan)


def perplexity(
    ar, prefixes: Sequence[str], generations: Sequence[str], batch_size: int = 16
) -> PerplexityResult:
    """PPL of each generation given its prefix, scored by the causal LM ``ar`` (a :class:`~dlmeval.models.causal.CausalLM`).

    Each ``prefix + generation`` string is re-tokenized with the evaluator's own tokenizer and only the
    generation's tokens are scored (``ar.continuation_logprobs``: the prefix's tokens are the conditioning context;
    an empty prefix is given the BOS token). ``generations[i]`` must be the text exactly as it follows
    ``prefixes[i]`` (keep its leading space). Inputs longer than the evaluator's window lose prefix tokens first.
    Results do not depend on ``batch_size`` beyond floating-point noise.
    """
    if isinstance(prefixes, str) or isinstance(generations, str):
        raise InputError("prefixes and generations must be lists of strings")
    prefixes, generations = list(prefixes), list(generations)
    if len(prefixes) != len(generations):
        raise InputError(
            f"{len(prefixes)} prefixes but {len(generations)} generations; pass one prefix per item"
        )
    if not generations:
        raise InputError("perplexity needs at least one generation")
    if batch_size < 1:
        raise InputError(f"batch_size must be positive, got {batch_size}")
    lps = ar.continuation_logprobs(prefixes, generations, batch_size=batch_size)
    nll = np.array([-float(np.sum(lp)) for lp in lps], dtype=np.float64)
    n_tok = np.array([len(lp) for lp in lps], dtype=np.int64)
    total = int(n_tok.sum())
    ppl = math.exp(float(nll.sum()) / total) if total > 0 else float("nan")
    keep = n_tok > 0
    mean_item = float(np.mean(np.exp(nll[keep] / n_tok[keep]))) if keep.any() else float("nan")
    return PerplexityResult(nll, n_tok, ppl, mean_item, getattr(ar, "name", type(ar).__name__))
