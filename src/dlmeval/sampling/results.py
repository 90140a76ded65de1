"""What a sampling call returns: the generations (:class:`SampleResult`) and their per-step history
(:class:`SamplingHistory`, the churn statistics of the Care paper's C.3)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np


@dataclass
class SamplingHistory:
    """Per nominal step ``t`` (all ``T`` of them, skipped ones included) and row ``b``.

    * ``forwarded[t, b]``: the row took part in a forward pass at step ``t``; ``passes[t, b]`` how many (a
      decode pass, a scoring pass, and at a block's last step a drain pass under the paper's accounting)
    * ``unmasked`` / ``remasked[t, b]``: tokens decided / put back under the mask
    * ``replaced[t, b]``: decided tokens that differ from the token that position held before it was re-masked
    * ``stable[t, b]``: stable token-step cells: generated positions decided before the step and holding the
      same token after it (counted at forwarded steps only)
    * ``changed[t, b, i]``: position ``i`` of the generation changed at step ``t`` (mask -> token or token -> mask)
    * ``decided_step[b, i]``: the step at which the final token at ``i`` was decided (-1: never)
    """

    forwarded: np.ndarray
    passes: np.ndarray
    unmasked: np.ndarray
    remasked: np.ndarray
    replaced: np.ndarray
    stable: np.ndarray
    changed: np.ndarray
    decided_step: np.ndarray

    def churn(self) -> dict[str, np.ndarray]:
        """Per-row churn statistics (the Care paper's C.3): total re-masks and replacements, stable token-step
        cells, and the mean fraction of the generation replaced per forwarded step."""
        steps = self.forwarded.sum(0)
        length = self.changed.shape[2]
        replaced = self.replaced.sum(0)
        return {
            "remasks": self.remasked.sum(0),
            "replacements": replaced,
            "stable_cells": self.stable.sum(0),
            "replacement_rate": replaced / np.maximum(steps * length, 1),
        }

    @staticmethod
    def merge(parts: list[tuple[list[int], SamplingHistory]], n: int) -> SamplingHistory:
        first = parts[0][1]
        out = {}
        for name in ("forwarded", "passes", "unmasked", "remasked", "replaced", "stable", "changed"):
            a = getattr(first, name)
            buf = np.zeros((a.shape[0], n, *a.shape[2:]), dtype=a.dtype)
            for idx, h in parts:
                buf[:, idx] = getattr(h, name)
            out[name] = buf
        ds = np.zeros((n, first.decided_step.shape[1]), dtype=first.decided_step.dtype)
        for idx, h in parts:
            ds[idx] = h.decided_step
        return SamplingHistory(**out, decided_step=ds)


@dataclass
class SampleResult:
    """Generations of one :meth:`RemaskingSampler.sample` call, rows in input order.

    ``tokens [B, L]`` is the raw generation region (``pad_token_id`` where a row stopped before generating);
    ``token_ids`` / ``texts`` end before the first EOS (texts decoded without special tokens). ``nfe[b]`` counts
    the forward passes row ``b`` took part in (read from ``model.nfe``); ``nfe_calls`` the batched model calls;
    ``steps_taken[b]`` the nominal steps iterated while the row was running (skipped ones included).
    """

    item_ids: list[str]
    prompt_ids: list[list[int]]
    tokens: np.ndarray
    token_ids: list[list[int]]
    texts: list[str]
    nfe: np.ndarray
    steps_taken: np.ndarray
    stopped_at_eos: np.ndarray
    nfe_calls: int
    history: SamplingHistory
    config: dict[str, Any]
    nfe_predicted: int
    timing: dict[str, float] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.texts)

    def records(self) -> list[dict[str, Any]]:
        """One JSON-ready dict per row (for a run store)."""
        churn = self.history.churn()
        return [
            {
                "item_id": self.item_ids[b],
                "text": self.texts[b],
                "token_ids": self.token_ids[b],
                "nfe": int(self.nfe[b]),
                "steps_taken": int(self.steps_taken[b]),
                "stopped_at_eos": bool(self.stopped_at_eos[b]),
                "remasks": int(churn["remasks"][b]),
                "replacements": int(churn["replacements"][b]),
                "stable_cells": int(churn["stable_cells"][b]),
                "replacement_rate": float(churn["replacement_rate"][b]),
            }
            for b in range(len(self))
        ]

    @staticmethod
    def merge(parts: list[tuple[list[int], SampleResult]], n: int) -> SampleResult:
        def rows(name):
            out: list[Any] = [None] * n
            for idx, r in parts:
                for k, i in enumerate(idx):
                    out[i] = getattr(r, name)[k]
            return out

        def arr(name):
            a = getattr(parts[0][1], name)
            buf = np.zeros((n, *a.shape[1:]), dtype=a.dtype)
            for idx, r in parts:
                buf[idx] = getattr(r, name)
            return buf

        first = parts[0][1]
        return SampleResult(
            item_ids=rows("item_ids"),
            prompt_ids=rows("prompt_ids"),
            tokens=arr("tokens"),
            token_ids=rows("token_ids"),
            texts=rows("texts"),
            nfe=arr("nfe"),
            steps_taken=arr("steps_taken"),
            stopped_at_eos=arr("stopped_at_eos"),
            nfe_calls=sum(r.nfe_calls for _, r in parts),
            history=SamplingHistory.merge([(idx, r.history) for idx, r in parts], n),
            config=first.config,
            nfe_predicted=first.nfe_predicted,
            timing={k: sum(r.timing.get(k, 0.0) for _, r in parts) for k in first.timing},
        )
