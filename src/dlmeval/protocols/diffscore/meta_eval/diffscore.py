"""The ``diffscore`` family: DiffScore with the diffusion model in the configurations the paper maps the
benchmark's human dimensions to (``Benchmark.config_for``; every configuration with ``all_configs``).

``bidir`` is computed as cond + reverse, which also gives those two; pairwise MT sets condition on the reference
(the frame's ``cond_source``). The per-chunk computation is :func:`score_diffscore_chunk`, shared with
DiffScore-FT (:mod:`.ft`), which scores its adapter models the same way.
"""

from __future__ import annotations

import functools
import logging
import math
from typing import TYPE_CHECKING, Any

from dlmeval.protocols.diffscore.meta_eval.families import MetricFamily, register_family

if TYPE_CHECKING:
    import pandas as pd

DIFFSCORE_CONFIGS = ("cond", "reverse", "bidir", "marginal")


def diffscore_calls(name: str, all_configs: bool = False) -> list[tuple[str, tuple[str, ...]]]:
    """The DiffScorer calls a benchmark needs: ``[(config, metrics it yields)]`` (bidir yields cond and reverse)."""
    from dlmeval.protocols.diffscore.meta_eval.benchmarks import get_benchmark

    b = get_benchmark(name)
    need = set(DIFFSCORE_CONFIGS) if all_configs else {b.config_for(d) for d in b.dimensions}
    calls: list[tuple[str, tuple[str, ...]]] = []
    if "bidir" in need:
        calls.append(("bidir", ("cond", "reverse", "bidir")))
        need -= {"bidir", "cond", "reverse"}
    for cfg in ("cond", "reverse", "marginal"):
        if cfg in need:
            calls.append((cfg, (cfg,)))
    return calls


def _diffscore_payloads(row: pd.Series, cfg: str, prefix: str) -> dict[str, dict[str, Any]]:
    def clean(x):
        return None if x is None or (isinstance(x, float) and math.isnan(x)) else x

    base = {"reason": clean(row.get("reason")), "warning": clean(row.get("warning"))}
    if cfg == "bidir":
        out = {}
        for d in ("cond", "reverse"):
            out[f"{prefix}:{d}"] = {
                "score": float(row[f"score_{d}"]),
                "se": float(row[f"se_{d}"]),
                "n_tokens": int(row[f"n_tokens_{d}"]),
                **base,
            }
        out[f"{prefix}:bidir"] = {
            "score": float(row["score"]),
            "se": float(row["se"]),
            "profile": list(row["profile"]),
            **base,
        }
        return out
    return {
        f"{prefix}:{cfg}": {
            "score": float(row["score"]),
            "se": float(row["se"]),
            "profile": list(row["profile"]),
            "n_tokens": int(row["n_tokens"]),
            **base,
        }
    }


def score_diffscore_chunk(
    scorer, frame: pd.DataFrame, chunk, *, prefix: str, all_configs: bool, warn
) -> dict:
    """``{uid: {"{prefix}:{config}": result}}`` of one chunk with a DiffScorer; ``warn(message)`` records that
    texts were cut to the model window."""
    out: dict[str, dict[str, Any]] = {u.uid: {} for u in chunk}
    rows = [frame.iloc[u.rows[0]] for u in chunk]
    name = frame["benchmark"].iat[0]
    est_log = logging.getLogger("dlmeval.scoring.estimator")
    for cfg, _ in diffscore_calls(name, all_configs):
        level = est_log.level
        est_log.setLevel(
            logging.ERROR
        )  # truncation notes go to the run (below), not to the console per chunk
        try:
            df = scorer.score(
                [r["candidate"] for r in rows],
                None if cfg == "marginal" else [r["cond_source"] for r in rows],
                config=cfg,
                item_ids=[u.uid for u in chunk],
            )
        finally:
            est_log.setLevel(level)
        for u, (_, row) in zip(chunk, df.iterrows()):
            out[u.uid].update(_diffscore_payloads(row, cfg, prefix))
        if df["warning"].notna().any():
            warn(
                f"{name} {cfg}: texts cut to the model window of {scorer.model.max_length} tokens "
                "(each item's 'warning' field says which); the count is the number of chunks with cuts"
            )
    return out


def _cfg_label(metric: str) -> str:
    d = metric.split(":", 1)[1]
    return "(paper mapping)" if d == "mapped" else d


def dlm_batching(opts) -> dict[str, Any]:
    """What decides which DiffScore rows share a forward pass (the units per chunk, the scorer's batch bounds):
    it can move a score's last bits, so it is part of the run configuration."""
    return {
        "chunk_size": opts.chunk_size,
        "batch_size": opts.dlm_batch_size,
        "max_tokens": opts.dlm_max_tokens,
    }


@register_family
class DiffScoreFamily(MetricFamily):
    name = "diffscore"
    rank = 40
    kind = "meta-eval-diffscore"
    checkpoints = (("dlm", "diffusion model (--model)", ()),)
    prefix = "diffscore"  # metric ids are "{prefix}:{config}"
    title = "DiffScore"
    order = (*(f"diffscore:{c}" for c in DIFFSCORE_CONFIGS), "diffscore:mapped")
    mapped = "diffscore:mapped"

    def load(self) -> None:
        self.suite.dlm()

    def configuration(self) -> dict[str, Any]:
        from dlmeval.protocols.diffscore.meta_eval.benchmarks import TASK_PROMPTS, get_benchmark

        prompts = dict(TASK_PROMPTS)  # a benchmark of another task adds its prompt (the 12 add none)
        for b in map(get_benchmark, self.suite.benchmarks):
            prompts.setdefault(b.task, b.task_prompt())
        return {
            "estimator": self.opts.estimator_record(),
            "prompt_policy": self.opts.prompt,
            "task_prompts": prompts,
            "chat": self.suite.has_chat(self.suite.dlm()),
            "batching": dlm_batching(self.opts),
        }

    def models(self) -> list[Any]:
        return [self.suite.dlm()]

    def metrics(self, bench) -> list[str]:
        calls = diffscore_calls(bench.name, self.opts.all_configs)
        return [f"{self.prefix}:{m}" for _, ms in calls for m in ms]

    def compute(self, frame, chunk):
        # through the suite's method: the one seam tests patch to interrupt the DiffScore work
        return self.suite.compute_diffscore(frame, chunk, frame["task"].iat[0])

    @functools.cached_property
    def model_label(self) -> str:
        return self.suite.dlm().identity().name

    def label(self, metric: str) -> str:
        return f"{self.title} {_cfg_label(metric)} [{self.model_label}]"

    def mapped_source(self, bench, dimension: str) -> str | None:
        return f"{self.prefix}:{bench.config_for(dimension)}"

    def comparisons(self, rows) -> list[tuple[str, str]]:
        """DiffScore (paper mapping) against every other row."""
        if self.mapped not in rows:
            return []
        return [(self.mapped, m) for m in rows if m != self.mapped]
