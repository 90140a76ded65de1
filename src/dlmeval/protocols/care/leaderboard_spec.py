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
#: the keys a row's ``alternative`` may set (the other reading of a row the paper leaves open)
READING_KEYS = {"baseline", "strategy", "temperature", "seeds", "alg_temp", "reading"}
ROW_KEYS = {
    "label", "model", "tier", "scale", "temperature", "strategy", "softmask", "kind", "top_p",
    "baseline", "seeds", "alg_temp", "reading", "alternative", "published",
}  # fmt: skip
BOARD_KEYS = {
    "steps",
    "temperature",
    "baseline",
    "strategy",
    "seeds",
    "remask_fraction",
    "downstream",
    "reading",
}
READINGS = ("paper", "alternative")
#: where the leaderboard's published values come from
PAPER_TABLE = "Table 21"
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
    baseline: str | None = None  # the row's own baseline (Dream-7B-Base: Dream's ``origin``)
    seeds: tuple[int, ...] | None = None  # the row's own seeds (Table 15's cells: one seed)
    alg_temp: float | None = None  # Dream's position temperature for this row
    reading: str = ""  # which cells of the paper the row reproduces (printed by the plan and the table)
    alternative: dict | None = None  # the other reading (READING_KEYS), run with [leaderboard] reading
    published: dict | None = None  # the paper's values of the row's cells (column -> value)

    def signature(self) -> dict[str, Any]:
        """The row as it decides numbers: the fields of a plain row only (new keys enter where set, so an
        existing leaderboard keeps its run id); ``reading`` / ``published`` decide nothing."""
        d = dataclasses.asdict(self)
        for k in ("reading", "published", "alternative"):
            d.pop(k)
        for k in ("baseline", "seeds", "alg_temp"):
            if d[k] is None:
                d.pop(k)
        return d


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
    reading: str = "paper"  # "alternative": every row with an ``alternative`` runs that reading instead

    @property
    def evaluator(self) -> str:
        return self.raw.get("models", {}).get("evaluator", "default-ar")

    def row_strategy(self, row: Row) -> str:
        return row.strategy or self.strategy

    def row_baseline(self, row: Row) -> str:
        return row.baseline or self.baseline

    def row_temperature(self, row: Row) -> float:
        return self.temperature if row.temperature is None else row.temperature

    def row_seeds(self, row: Row) -> tuple[int, ...]:
        return self.seeds if row.seeds is None else row.seeds

    def care_spec(self, row: Row) -> CareSpec:
        """The Care spec of one diffusion row (validated as any Care spec)."""
        strat, t, base = self.row_strategy(row), self.row_temperature(row), self.row_baseline(row)
        raw = {k: v for k, v in self.raw.items() if k not in ("kind",)}
        raw["name"] = f"{self.name}/{row.label}"
        raw["models"] = {**raw.get("models", {}), "diffusion": [row.model]}
        if row.alg_temp is not None:
            raw["models"][row.model] = {"alg_temp": row.alg_temp}
        raw["sweep"] = {
            "strategies": [base, strat],
            "steps": [self.steps],
            "temperatures": [t],
            "seeds": list(self.row_seeds(row)),
            "remask_fraction": self.remask_fraction,
        }
        raw["headline"] = {**raw.get("headline", {}), "baseline": base, "strategy": strat}
        raw["headline"].update(steps=self.steps, temperature=t)
        if self.downstream:
            raw["downstream"] = {"strategies": [base], "steps": [self.steps], **self.downstream}
        return parse_spec(raw, path=self.path, name=raw["name"])

    def published(self):
        """The paper's value of every cell the leaderboard fills (:mod:`dlmeval.protocols.published`)."""
        from dlmeval.protocols.published import row_entries

        out = []
        for r in self.rows:
            out += row_entries(r.label, r.published, PAPER_TABLE, "leaderboard_rows")
        return tuple(out)

    def care_base(self) -> CareSpec:
        """A Care spec with the shared settings (generation, metrics, evaluator) for the AR row and the plan."""
        return self.care_spec(next(r for r in self.rows if r.kind == "diffusion"))

    def config(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d.pop("path")
        d.pop("name")
        d.pop("reading")  # the rows as read hold the reading in force
        d["rows"] = [r.signature() for r in self.rows]
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
    from dlmeval.sampling import STRATEGIES

    strategy = t.get("strategy")
    if strategy is not None:
        strategy = as_str(strategy, f"{at}.strategy", tuple(STRATEGIES))
    baseline = t.get("baseline")
    if baseline is not None:
        baseline = as_str(baseline, f"{at}.baseline", tuple(STRATEGIES))
    seeds = t.get("seeds")
    if seeds is not None:
        seeds = as_list(seeds, f"{at}.seeds", lambda v, a: as_int(v, a, minimum=0))
    alg_temp = None if t.get("alg_temp") is None else as_float(t["alg_temp"], f"{at}.alg_temp", lo=0.0)
    alt = t.get("alternative")
    if alt is not None:
        alt = dict(as_table(alt, f"{at}.alternative", READING_KEYS))
    pub = t.get("published")
    if pub is not None:
        pub = dict(as_table(pub, f"{at}.published", None))
        for k, v in pub.items():
            as_float(v, f"{at}.published.{k}")
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
        baseline=baseline,
        seeds=seeds,
        alg_temp=alg_temp,
        reading=as_str(t["reading"], f"{at}.reading") if "reading" in t else "",
        alternative=alt,
        published=pub,
    )


def _reading(row: Row, at: str) -> Row:
    """``row`` under its alternative reading (the keys it sets replace the row's; unset ones return to the
    leaderboard's)."""
    alt = row.alternative
    if not alt:
        return row
    t = {k: v for k, v in dataclasses.asdict(row).items() if k not in ("alternative",)}
    for k in ("baseline", "strategy", "temperature", "seeds", "alg_temp"):
        t[k] = alt.get(k)
    t["reading"] = alt.get("reading", "the alternative reading")
    t["published"] = None  # the published cells belong to the paper's reading
    return _row({k: v for k, v in t.items() if v is not None}, f"{at}.alternative")


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
    reading = as_str(board.get("reading", "paper"), "leaderboard.reading", READINGS)
    if reading == "alternative":
        rows = tuple(_reading(r, f"rows[{i}]") for i, r in enumerate(rows))
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
        reading=reading,
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
    fam, _, standin = family_for_spec(row.model)
    remasks = STRATEGIES[strategy].remasks if strategy in STRATEGIES else True
    schedule = "linear" if remasks else fam.native_schedule
    block = g.block_length
    if fam.attention == "block-causal":  # the family's own block size (its stand-in's for a stand-in)
        block = fam.block_length(standin) or g.block_length or g.gen_tokens
    return predict_nfe(
        g.gen_tokens,
        spec.steps,
        strategy=strategy,
        block_length=block,
        remask_fraction=spec.remask_fraction,
        accounting=g.accounting,
        schedule=schedule,
    )


def humaneval_cell(spec: LeaderboardSpec, row: Row) -> str | None:
    """The HE column's cell of a diffusion row, in the paper's words (Table 11's ``none*`` at a matched NFE is
    ``none*``; a nominal-steps cell is ``none@steps``), with temperature, seeds and generation length."""
    care = spec.care_spec(row)
    d = care.downstream
    if not d.humaneval.n:
        return None
    base = spec.row_baseline(row)
    t = min(d.temperatures)
    seeds = ",".join(map(str, d.seeds))
    lengths = "/".join(map(str, d.humaneval.lengths))
    if d.nfe:
        where = f"{base}* at NFE {max(d.nfe)} (compute-matched)"
    else:
        where = f"{base}@{max(d.steps)} steps"
    n_seeds = len(d.seeds)
    return (
        f"{where}, t={t:g}, {n_seeds} seed{'s' if n_seeds != 1 else ''} ({seeds}), n={d.humaneval.n}, "
        f"gen {lengths} tokens"
    )


def plan_rows(spec: LeaderboardSpec) -> list[dict[str, Any]]:
    out = []
    for r in spec.rows:
        strat, base = spec.row_strategy(r), spec.row_baseline(r)
        pub = dict(r.published or {})
        if r.kind == "ar":
            out.append(
                {
                    "tier": r.tier,
                    "model": r.label,
                    "spec": r.model,
                    "sampler": f"nucleus p={r.top_p:g}",
                    "temperature": 1.0,
                    "seeds": list(spec.seeds),
                    "nfe_baseline": row_nfe(spec, r, "ar"),
                    "nfe_strategy": None,
                    "humaneval": None,
                    "reading": r.reading,
                    "published": pub,
                }
            )
            continue
        sampler = f"{base} / {strat} @ {spec.steps} steps" + (" + soft-mask" if r.softmask else "")
        if r.alg_temp is not None:
            sampler += f", alg_temp {r.alg_temp:g}"
        out.append(
            {
                "tier": r.tier,
                "model": r.label,
                "spec": r.model,
                "sampler": sampler,
                "temperature": spec.row_temperature(r),
                "seeds": list(spec.row_seeds(r)),
                "nfe_baseline": row_nfe(spec, r, base),
                "nfe_strategy": row_nfe(spec, r, strat),
                "humaneval": humaneval_cell(spec, r),
                "reading": r.reading,
                "alternative": None if r.alternative is None else dict(r.alternative),
                "published": pub,
            }
        )
    return out
