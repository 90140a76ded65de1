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


def run_config(
    samples: Samples, prompts: Sequence[str], *, num_samples: int = 1, batch_size: int | None = None
) -> dict[str, Any]:
    """The configuration a ``sample`` run is stored under: the sampler's settings, the prompts it was given (two
    runs with other prompts are two runs, never one run whose item "0" means two things) and its batching (which
    prompts share a forward pass: a padded row's logits move in the last bits with its batch)."""
    import hashlib
    import json

    n = len(samples.records)
    digest = hashlib.sha256(json.dumps(list(prompts), ensure_ascii=False).encode("utf-8")).hexdigest()[:16]
    return {
        **samples.config,
        "batch_size": min(batch_size or n, n),
        "prompts_sha256": digest,
        "n_prompts": len(prompts),
        "num_samples": num_samples,
    }


def store_samples(
    store, records: Sequence[dict], config: dict[str, Any], model, seed: int, command_line=None
):
    """Open (or reopen) the ``sample`` run of ``config``, write every record under its item id and finish it."""
    run = store.open_run("sample", config, [model], seed, command_line=command_line)
    run.put_many([(rec["item_id"], rec) for rec in records])
    run.finish()
    return run


__all__ = ["Samples", "run_config", "sample_prompts", "store_samples"]
