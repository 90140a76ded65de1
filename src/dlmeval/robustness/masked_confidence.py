"""DLM answer confidence with the scored position masked: the literal reading of the robustness paper's Eq. 4,
``p(ŷᵢ | ŷ\\ᵢ)``, beside :func:`~dlmeval.robustness.calibration.dlm_token_probs`'s one pass with nothing masked
(a masked diffusion LM is never trained to predict a visible token: there its softmax is near one-hot).

``groups=None``: every answer position is masked in turn, the rest of the answer visible (one row per answer
token). ``groups=K``: the K-mask estimate: the answer positions are split into ``K`` random groups (seeded by the
run seed and the item), each group masked in one row, so each position is scored once with about ``1/K`` of the
answer hidden beside it (``K`` rows per answer; ``K >= length`` is the per-token reading). The log-probabilities
at each position are read from the row where it is masked; the mask token itself is not a candidate (it is
removed and the rest renormalised, as the sampler does).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from dlmeval.errors import InputError
from dlmeval.robustness.calibration import TokenProbs, scored_sequences
from dlmeval.seeding import numpy_rng

READINGS = ("unmasked", "masked", "kmask")


def mask_groups(n: int, groups: int | None, *, seed: int, item_id: str) -> list[np.ndarray]:
    """The position groups (indices ``0..n-1``) masked together: singletons (``groups=None`` or ``>= n``), else
    ``groups`` near-equal random groups from a generator seeded by ``(seed, item_id)``."""
    if n == 0:
        return []
    if groups is None or groups >= n:
        return [np.array([i]) for i in range(n)]
    if groups < 1:
        raise InputError(f"the K-mask estimate needs at least one group, got {groups}")
    perm = numpy_rng(seed, "kmask", item_id).permutation(n)
    return [np.sort(g) for g in np.array_split(perm, groups)]


@torch.no_grad()
def masked_token_probs(
    model,
    prompt_ids: Sequence[Sequence[int]],
    generations: Sequence[Sequence[int]],
    *,
    item_ids: Sequence[str],
    seed: int = 0,
    groups: int | None = None,
    commit: Sequence[np.ndarray | None] | None = None,
    batch_size: int = 16,
) -> list[TokenProbs]:
    """Per-token ``max`` and ``chosen`` log-probabilities of DLM answers, each position masked (module docstring);
    the same answer spans, ``n_tokens`` and ``commit`` as :func:`dlm_token_probs`."""
    from dlmeval.scoring.core import MaskedRow, iter_scores

    if len(item_ids) != len(generations):
        raise InputError(f"{len(item_ids)} item ids for {len(generations)} generations")
    seqs, spans, n_answer = scored_sequences(model, prompt_ids, generations)
    rows: list[tuple[int, np.ndarray]] = []  # (answer index, group: masked answer positions from 0)
    for i, (a, b) in enumerate(spans):
        for g in mask_groups(b - a, groups, seed=seed, item_id=str(item_ids[i])):
            rows.append((i, g))
    mx = [np.full(b - a, np.nan) for a, b in spans]
    ch = [np.full(b - a, np.nan) for a, b in spans]
    masked = [MaskedRow(seqs[i], spans[i][0] + g) for i, g in rows]
    for scored in iter_scores(model, masked, batch_size=batch_size, max_logprob=True, exclude_mask=True):
        for r, chosen, best in zip(scored.rows, scored.logprob, scored.max_logprob):
            i, g = rows[r]
            mx[i][g], ch[i][g] = best, chosen  # the group is sorted: the core's ascending order
    out = []
    for i in range(len(seqs)):
        cm = None if commit is None or commit[i] is None else np.asarray(commit[i], dtype=np.float64)
        out.append(
            TokenProbs(
                max=mx[i],
                chosen=ch[i],
                commit=cm,
                n_tokens=n_answer[i],
                note=None if n_answer[i] else "empty answer: scored by its end token",
            )  # fmt: skip
        )
    return out


__all__ = ["READINGS", "mask_groups", "masked_token_probs"]
