"""The Care leaderboard spec and plan (the run and the table: :mod:`dlmeval.protocols.care.leaderboard`).

The Care leaderboard (the paper's Table 12 / Table 21): one row per model, MAUVE and PPL of ``none`` and
``high_entropy`` at 256 nominal steps and t = 0.25, their gap, HumanEval pass@1, each row with its tier, plus an
autoregressive reference row (GPT-2-XL, nucleus p = 0.95).

A leaderboard spec (``kind = "care-leaderboard"``; shipped: ``care-leaderboard``, ``care-leaderboard-tiny``)::

    name = "care-leaderboard"
    kind = "care-leaderboard"
    seed = 0
    preset = "paper"
    [models]
    evaluator = "causal:meta-llama/Meta-Llama-3-8B"   # PPL
    [generation]                                       # as a Care spec's (one source: the table's)
    [metrics]                                          # as a Care spec's
    [leaderboard]
    steps = 256                                        # nominal steps of both strategies
    temperature = 0.25                                 # unmask temperature (a row may override it)
    baseline = "none"
    strategy = "high_entropy"                          # a row may override it (Dream-7B-Base: "entropy")
    seeds = [1, 2, 3]
    downstream = { humaneval = { n = 164, gen_tokens = 512 } }   # a Care [downstream] table
    [[rows]]
    label = "LLaDA-8B-Base"                            # the table's model name
    model = "llada:GSAI-ML/LLaDA-8B-Base"              # a model spec (hub ids as written: --allow-download)
    tier = 1                                           # 1, 2 or "reference"
    scale = "8B"
    temperature = 0.1                                  # optional per-row settings (LLaDA-MoE: t = 0.1)
    strategy = "entropy"
    softmask = { k = 3, omega_s = 1.0 }                # soft-mask feedback (SM-Dream)
    kind = "ar"                                        # the AR reference row ...
    top_p = 0.95                                       # ... sampled with nucleus p

Each diffusion row is an ordinary Care run (:func:`dlmeval.protocols.care.run_care` over a Care spec built from
the row: sweep = {baseline, strategy} x steps x temperature x seeds, headline = that pair), so its records,
signature and resume behaviour are Care's; the AR row samples continuations of the same prompts with the causal
model (temperature 1, nucleus ``top_p``) and is scored by the same cell metrics. One ``care-leaderboard`` run
holds the table (:func:`leaderboard_rows`), which ``dlmeval leaderboard`` prints in the paper's shape.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from dlmeval.errors import InputError
from dlmeval.protocols.care.spec import CareSpec, parse_spec
from dlmeval.protocols.spec_io import as_float, as_int, as_list, as_str, as_table, read_spec

RUN_KIND = "care-leaderboard"
SHIPPED = ("care-leaderboard", "care-leaderboard-tiny")
TIERS = (1, 2, "reference")
ROW_KEYS = {"label", "model", "tier", "scale", "temperature", "strategy", "softmask", "kind", "top_p"}
BOARD_KEYS = {"steps", "temperature", "baseline", "strategy", "seeds", "remask_fraction", "downstream"}
#: forward passes of the AR row per generated token (one pass per token over a KV cache)
AR_NFE_PER_TOKEN = 1


@dataclass(frozen=True)
class Row:
    label: str
    model: str
    tier: int | str
    scale: str = ""
    kind: str = "diffusion"
    temperature: float | None = None
    strategy: str | None = None
    top_p: float = 1.0
    softmask: dict | None = None


@dataclass(frozen=True)
class LeaderboardSpec:
    name: str
    raw: dict  # the Care part (seed, preset, models.evaluator, generation, metrics)
    steps: int
    temperature: float
    baseline: str
    strategy: str
    seeds: tuple[int, ...]
    remask_fraction: float
    downstream: dict
    rows: tuple[Row, ...]
    path: str | None = None

    @property
    def evaluator(self) -> str:
        return self.raw.get("models", {}).get("evaluator", "default-ar")

    def row_strategy(self, row: Row) -> str:
        return row.strategy or self.strategy

    def row_temperature(self, row: Row) -> float:
        return self.temperature if row.temperature is None else row.temperature

    def care_spec(self, row: Row) -> CareSpec:
        """The Care spec of one diffusion row (validated as any Care spec)."""
        strat, t = self.row_strategy(row), self.row_temperature(row)
        raw = {k: v for k, v in self.raw.items() if k not in ("kind",)}
        raw["name"] = f"{self.name}/{row.label}"
        raw["models"] = {**raw.get("models", {}), "diffusion": [row.model]}
        raw["sweep"] = {
            "strategies": [self.baseline, strat],
            "steps": [self.steps],
            "temperatures": [t],
            "seeds": list(self.seeds),
            "remask_fraction": self.remask_fraction,
        }
        raw["headline"] = {**raw.get("headline", {}), "baseline": self.baseline, "strategy": strat}
        raw["headline"].update(steps=self.steps, temperature=t)
        if self.downstream:
            raw["downstream"] = {"strategies": [self.baseline], "steps": [self.steps], **self.downstream}
        return parse_spec(raw, path=self.path, name=raw["name"])

    def care_base(self) -> CareSpec:
        """A Care spec with the shared settings (generation, metrics, evaluator) for the AR row and the plan."""
        return self.care_spec(next(r for r in self.rows if r.kind == "diffusion"))

    def config(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d.pop("path")
        d.pop("name")
        return d  # the batch size stays: it decides which rows share a forward pass (CareSpec.config)


def is_leaderboard_spec(ref) -> bool:
    """Whether ``ref`` (a path or a shipped name) is a leaderboard spec (``kind = "care-leaderboard"``)."""
    try:
        raw, _ = read_spec(ref, SHIPPED)
    except InputError:
        return False
    return raw.get("kind") == RUN_KIND


def _row(v: Any, at: str) -> Row:
    t = as_table(v, at, ROW_KEYS)
    for key in ("label", "model", "tier"):
        if key not in t:
            raise InputError(f"spec: {at}.{key} is required")
    tier = t["tier"]
    if tier not in TIERS or isinstance(tier, bool):
        raise InputError(f'spec: {at}.tier = {tier!r}; use 1, 2 or "reference"')
    kind = as_str(t.get("kind", "diffusion"), f"{at}.kind", ("diffusion", "ar"))
    sm = t.get("softmask")
    if sm is not None:
        from dlmeval.sampling.softmask import SoftMask

        SoftMask(**as_table(sm, f"{at}.softmask", {"k", "rule", "omega_s", "omega_a", "omega_b"}))
        sm = dict(sm)
    strategy = t.get("strategy")
    if strategy is not None:
        from dlmeval.sampling import STRATEGIES

        strategy = as_str(strategy, f"{at}.strategy", tuple(STRATEGIES))
    return Row(
        label=as_str(t["label"], f"{at}.label"),
        model=as_str(t["model"], f"{at}.model"),
        tier=tier,
        scale=str(t.get("scale", "")),
        kind=kind,
        temperature=None
        if "temperature" not in t
        else as_float(t["temperature"], f"{at}.temperature", lo=0.0),
        strategy=strategy,
        top_p=as_float(t.get("top_p", 1.0), f"{at}.top_p", lo=1e-6, hi=1.0),
        softmask=sm,
    )


def parse_leaderboard(raw: dict, *, path: str | None = None, name: str | None = None) -> LeaderboardSpec:
    top = as_table(
        raw, "", {"name", "kind", "seed", "preset", "models", "generation", "metrics", "leaderboard", "rows"}
    )
    if top.get("kind") != RUN_KIND:
        raise InputError(f"spec: kind must be {RUN_KIND!r} for a leaderboard spec")
    board = as_table(top.get("leaderboard", {}), "leaderboard", BOARD_KEYS)
    rows_raw = top.get("rows")
    if not isinstance(rows_raw, list) or not rows_raw:
        raise InputError("spec: a leaderboard needs [[rows]] (label, model, tier)")
    rows = tuple(_row(r, f"rows[{i}]") for i, r in enumerate(rows_raw))
    labels = [r.label for r in rows]
    if len(set(labels)) != len(labels):
        raise InputError("spec: rows[].label must be unique")
    if not any(r.kind == "diffusion" for r in rows):
        raise InputError("spec: a leaderboard needs at least one diffusion row")
    care = {k: v for k, v in top.items() if k in ("seed", "preset", "models", "generation", "metrics")}
    if "diffusion" in care.get("models", {}):
        raise InputError("spec: models.diffusion is not used by a leaderboard; the models are its [[rows]]")
    spec = LeaderboardSpec(
        name=as_str(top.get("name", name or "care-leaderboard"), "name"),
        raw=care,
        steps=as_int(board.get("steps", 256), "leaderboard.steps", minimum=1),
        temperature=as_float(board.get("temperature", 0.25), "leaderboard.temperature", lo=0.0),
        baseline=as_str(board.get("baseline", "none"), "leaderboard.baseline"),
        strategy=as_str(board.get("strategy", "high_entropy"), "leaderboard.strategy"),
        seeds=as_list(board.get("seeds", [1]), "leaderboard.seeds", lambda v, a: as_int(v, a, minimum=0)),
        remask_fraction=as_float(
            board.get("remask_fraction", 0.15), "leaderboard.remask_fraction", lo=0.0, hi=1.0
        ),
        downstream=dict(as_table(board.get("downstream", {}), "leaderboard.downstream", None)),
        rows=rows,
        path=path,
    )
    for r in rows:  # every diffusion row's Care spec must be valid before anything runs
        if r.kind == "diffusion":
            spec.care_spec(r)
    return spec


def load_leaderboard(ref) -> LeaderboardSpec:
    raw, p = read_spec(ref, SHIPPED)
    return parse_leaderboard(dict(raw), path=str(p), name=p.stem)


# ------------------------------------------------------------------------------------------------ plan
def row_nfe(spec: LeaderboardSpec, row: Row, strategy: str) -> int:
    """Forward passes per sample of ``row`` under ``strategy``, from the family's real schedule (its native
    schedule for strategies that never re-mask, its block size for block diffusion; the AR row: one pass per
    generated token)."""
    from dlmeval.models.family import family_for_spec
    from dlmeval.sampling import STRATEGIES, predict_nfe

    g = spec.care_base().generation
    if row.kind == "ar":
        return g.gen_tokens * AR_NFE_PER_TOKEN
    fam, _, _ = family_for_spec(row.model)
    remasks = STRATEGIES[strategy].remasks if strategy in STRATEGIES else True
    schedule = "linear" if remasks else fam.native_schedule
    block = g.block_length
    if fam.attention == "block-causal":
        block = int(fam.generation.get("block_length", g.block_length or g.gen_tokens))
        if fam.standin and row.model == fam.standin:
            from dlmeval.models.standin_families import TINY_BD3LM_BLOCK

            block = TINY_BD3LM_BLOCK
    return predict_nfe(
        g.gen_tokens,
        spec.steps,
        strategy=strategy,
        block_length=block,
        remask_fraction=spec.remask_fraction,
        accounting=g.accounting,
        schedule=schedule,
    )


def plan_rows(spec: LeaderboardSpec) -> list[dict[str, Any]]:
    out = []
    for r in spec.rows:
        strat = spec.row_strategy(r)
        if r.kind == "ar":
            out.append(
                {
                    "tier": r.tier,
                    "model": r.label,
                    "spec": r.model,
                    "sampler": f"nucleus p={r.top_p:g}",
                    "temperature": 1.0,
                    "nfe_baseline": row_nfe(spec, r, "ar"),
                    "nfe_strategy": None,
                }
            )
            continue
        out.append(
            {
                "tier": r.tier,
                "model": r.label,
                "spec": r.model,
                "sampler": f"{spec.baseline} / {strat} @ {spec.steps} steps"
                + (" + soft-mask" if r.softmask else ""),
                "temperature": spec.row_temperature(r),
                "nfe_baseline": row_nfe(spec, r, spec.baseline),
                "nfe_strategy": row_nfe(spec, r, strat),
            }
        )
    return out
