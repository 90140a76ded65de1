"""The ``score`` protocol: DiffScore of many texts into a run store, resumable and data parallel, in canonical chunks.

:class:`~dlmeval.scoring.DiffScorer` is pure (texts in, frame out), and the last bits of a row's log-probabilities
can depend on the rows it shares a forward pass with (padding width, the BLAS blocking of a batch). So the run
fixes what shares a forward pass by a rule that reads only the run's items and its settings:

1. the unique items are ordered by (characters of candidate + source, store key): similar lengths side by side,
   ties broken by content, never by input position;
2. cut into consecutive chunks of ``chunk_items`` items;
3. each chunk is one :meth:`DiffScorer.compute` call (its rows packed into length-sorted batches under
   ``batch_size`` / ``max_tokens``).

:func:`dlmeval.parallel.work_loop` recomputes a pending chunk whole, so a resumed run, a run on any number of ranks
and an uninterrupted one forward the same batches and store the same bits (on one kind of hardware and dtype).
``batch_size``, ``max_tokens`` and ``chunk_items`` change batches, so they are part of the run's configuration
(:func:`run_config`): two batch sizes are two runs, whose scores differ only by float rounding.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pandas as pd

from dlmeval.errors import InputError

RUN_KIND = "diffscore"
#: items per canonical chunk: the unit of resumption and of sharing among ranks
CHUNK_ITEMS = 64


def run_config(scorer, config: str, *, chunk_items: int = CHUNK_ITEMS) -> dict[str, Any]:
    """The run configuration: the estimator's (:meth:`DiffScorer.run_config`) and the batching rule."""
    return {
        **scorer.run_config(config),
        "batching": {
            "batch_size": scorer.batch_size,
            "max_tokens": scorer.max_tokens,
            "chunk_items": int(chunk_items),
        },
    }


def open_run(store, scorer, config: str, *, chunk_items: int = CHUNK_ITEMS, command_line: str | None = None):
    """Open (or reopen, to resume) the store run that :func:`score_run` writes into."""
    return store.open_run(
        RUN_KIND,
        run_config(scorer, config, chunk_items=chunk_items),
        [scorer.model.identity()],
        scorer.seed,
        command_line=command_line,
    )


def _check_run(run, scorer, cfg: str, chunk_items: int) -> None:
    """A run must have been opened for this scorer, model, seed and configuration (else results mix)."""
    from dlmeval.store.signature import Signature

    sig = getattr(run, "signature", None)
    if sig is None or not hasattr(sig, "run_id"):
        return
    want = Signature.create(
        RUN_KIND, run_config(scorer, cfg, chunk_items=chunk_items), [scorer.model.identity()], scorer.seed
    )
    if sig.run_id != want.run_id:
        raise InputError(
            f"run {sig.run_id} was opened for another configuration, model, seed or batching "
            f"({sig.config}); open it with dlmeval.protocols.score.open_run(store, scorer, {cfg!r})"
        )


def canonical_chunks(prep, chunk_items: int = CHUNK_ITEMS) -> list[list[int]]:
    """The unique items of ``prep`` (indices) in canonical chunks (see the module docstring)."""
    if chunk_items < 1:
        raise InputError(f"chunk_items must be at least 1, got {chunk_items}")
    order = sorted(
        range(len(prep.items)),
        key=lambda j: (len(prep.items[j][1]) + len(prep.items[j][2] or ""), prep.items[j][3]),
    )
    return [order[i : i + chunk_items] for i in range(0, len(order), chunk_items)]


def score_run(
    scorer,
    run,
    candidates: Sequence[str] | str,
    sources: Sequence[str | None] | str | None = None,
    *,
    config: str = "cond",
    item_ids: Sequence[Any] | None = None,
    token_scores: bool = False,
    chunk_items: int = CHUNK_ITEMS,
) -> pd.DataFrame:
    """:meth:`DiffScorer.score` into ``run`` (from :func:`open_run`): items already stored are read back, the
    pending canonical chunks are computed (this rank's share of them in a data-parallel job) and written one
    transaction per chunk. Returns the frame of :meth:`DiffScorer.score`."""
    from dlmeval.parallel import Chunk, work_loop

    prep = scorer.prepare(candidates, sources, config=config, item_ids=item_ids)
    _check_run(run, scorer, prep.cfg, chunk_items)
    keys = [it[3] for it in prep.items]
    stored = run.done_keys()
    if token_scores:  # a result stored without token scores is recomputed with them
        stored = {
            k for k in stored if k in set(keys) and any(f.startswith("token_logprob") for f in run.get(k))
        }
    work = [Chunk(tuple(keys[j] for j in part), part) for part in canonical_chunks(prep, chunk_items)]

    def compute(c: Chunk) -> list[dict[str, Any]]:
        res = scorer.compute(prep, c.items, token_scores=token_scores, progress=False)  # the job bar counts
        return [res[j] for j in c.items]

    new = [k for k in keys if k not in stored]
    work_loop(run, work, compute, label="DiffScore", progress=scorer.progress, done=stored)
    results = {j: run.get(k) for j, k in enumerate(keys)}
    fresh = set(new)
    scorer.report(prep.cfg, [results[j] for j, k in enumerate(keys) if k in fresh], run.warn)
    # the frame carries the run's stored signature (with its batching block), not the scorer's own: one
    # signature per run, whatever prints it (issue 32)
    stored = getattr(run, "signature", None)
    return scorer.frame(prep, results, signature=stored if hasattr(stored, "short") else None)


__all__ = ["CHUNK_ITEMS", "RUN_KIND", "canonical_chunks", "open_run", "run_config", "score_run"]
