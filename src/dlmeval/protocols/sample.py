"""The ``sample`` protocol: generations of many prompts, in the sampler's own batches, shared among the ranks.

:func:`sample_prompts` cuts the prompts into the batches one process forwards
(:meth:`dlmeval.sampling.RemaskingSampler.batches`: they depend only on the prompts and ``batch_size``), and runs
them through :func:`dlmeval.parallel.work_loop` without a store: in a data-parallel job every rank samples its share
of the batches and every rank receives every sample. Every row is seeded by its item id, and every batch is the one
a single process forms, so the samples equal a one-process run bit for bit.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any


@dataclass
class Samples:
    """The records of every prompt in input order (:meth:`SampleResult.records` of each row), the sampler's
    resolved configuration and its predicted NFE."""

    records: list[dict[str, Any]]
    config: dict[str, Any]
    nfe_predicted: int | None


def sample_prompts(
    sampler, prompts: Sequence[Any], item_ids: Sequence[str], *, batch_size: int | None = None
) -> Samples:
    """Sample one continuation per prompt (``item_ids[i]`` names and seeds row ``i``)."""
    from dlmeval.parallel import Chunk, work_loop

    ids = [str(i) for i in item_ids]
    batches = sampler.batches([len(sampler.encode_prompt(p)) for p in prompts], batch_size)
    work = [Chunk(tuple(ids[i] for i in b), b) for b in batches]

    def compute(c: Chunk) -> list[dict[str, Any]]:
        res = sampler.sample([prompts[i] for i in c.items], item_ids=list(c.keys))
        return [
            {"record": r, "config": res.config, "nfe_predicted": res.nfe_predicted} for r in res.records()
        ]

    got = work_loop(None, work, compute).records
    first = got[work[0].keys[0]]  # the first batch's settings, as SampleResult.merge keeps them
    return Samples([got[k]["record"] for k in ids], first["config"], first["nfe_predicted"])


__all__ = ["Samples", "sample_prompts"]
