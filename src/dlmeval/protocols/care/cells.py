"""The cells of a Care sweep: one generation configuration of a model each (strategy, steps or NFE budget,
temperature, remask fraction, seed, source), the plan of a spec, the cell a provably identical one reuses, and the
sampler configuration of a cell."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from dlmeval.protocols.care.spec import CareSpec
from dlmeval.seeding import derive_seed


@dataclass(frozen=True)
class Cell:
    """One generation configuration of a model: the unit of the sweep."""

    source: str
    strategy: str
    steps: int | None  # nominal steps, or None for a compute-matched cell
    nfe: int | None  # actual-NFE budget (compute-matched), or None
    temperature: float
    fraction: float
    seed: int

    @property
    def key(self) -> str:
        budget = f"s{self.steps}" if self.steps is not None else f"nfe{self.nfe}"
        return (
            f"{self.source}|{self.strategy}|{budget}|t{self.temperature:g}|f{self.fraction:g}|seed{self.seed}"
        )

    def fields(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "strategy": self.strategy,
            "steps": self.steps,
            "nfe_budget": self.nfe,
            "temperature": self.temperature,
            "fraction": self.fraction,
            "seed": self.seed,
        }


def plan_cells(spec: CareSpec) -> list[Cell]:
    """Every generation cell of the spec, de-duplicated, in a fixed order (sweep, compute-matched, dose)."""
    s, c, d = spec.sweep, spec.compute_matched, spec.dose_response
    out: dict[str, Cell] = {}

    def add(cell: Cell) -> None:
        out.setdefault(cell.key, cell)

    for src in spec.generation.sources:
        for seed in s.seeds:
            for strat in s.strategies:
                for steps in s.steps:
                    for t in s.temperatures:
                        add(Cell(src, strat, steps, None, t, s.remask_fraction, seed))
        for seed in c.seeds:
            for strat in c.strategies:
                for budget in c.nfe:
                    for t in c.temperatures:
                        add(Cell(src, strat, None, budget, t, s.remask_fraction, seed))
        for seed in d.seeds:
            for frac in d.fractions:
                add(Cell(src, d.strategy, d.steps, None, d.temperature, frac, seed))
    return list(out.values())


def canonical_cell(
    spec: CareSpec, cell: Cell, *, time_conditioned: bool = False, native_schedule: str = "linear"
) -> Cell:
    """The cell whose generations are provably identical to ``cell``'s, named by nominal steps: a compute-matched
    cell becomes the nominal-steps cell its budget resolves to, and a strategy that never re-masks keeps only
    the steps that decode something (:func:`dlmeval.sampling.equivalent_steps`: ``none`` at 128 and 256 steps
    with 128 tokens is one cell). The cell itself when nothing applies."""
    from dlmeval.sampling import STRATEGIES, equivalent_steps, steps_for_nfe

    g = spec.generation
    schedule = "linear" if STRATEGIES[cell.strategy].remasks else native_schedule
    steps = cell.steps
    if steps is None:
        steps, _ = steps_for_nfe(
            cell.nfe,
            g.gen_tokens,
            strategy=cell.strategy,
            block_length=g.block_length,
            remask_fraction=cell.fraction,
            accounting=g.accounting,
            time_conditioned=time_conditioned,
            schedule=schedule,
        )
    steps = equivalent_steps(
        g.gen_tokens,
        steps,
        strategy=cell.strategy,
        block_length=g.block_length,
        time_conditioned=time_conditioned,
        schedule=schedule,
    )
    if steps == cell.steps:
        return cell
    return dataclasses.replace(cell, steps=steps, nfe=None)


def effective_cell(spec: CareSpec, cell: Cell, model: str | None = None) -> Cell:
    """The cell as ``model`` runs it: its override's strategy for the cell's strategy and its temperature
    (``[models."<spec>"]``, :mod:`dlmeval.protocols.model_overrides`); the cell itself without an override. The
    cell keeps its name in the tables (the spec's shape); the model's run signature holds the override."""
    if model is None:
        return cell
    ov = spec.override(model)
    changes: dict[str, Any] = {}
    if ov.strategy(cell.strategy) != cell.strategy:
        changes["strategy"] = ov.strategy(cell.strategy)
    if ov.temperature is not None and ov.temperature != cell.temperature:
        changes["temperature"] = ov.temperature
    return dataclasses.replace(cell, **changes) if changes else cell


def model_schedule(spec: CareSpec, model: str | None, native: str) -> str:
    """The schedule ``model``'s cells that never re-mask run: its override's, else the family's ``native``."""
    ov = spec.override(model) if model is not None else None
    return ov.schedule if ov is not None and ov.schedule is not None else native


def sampler_config(spec: CareSpec, cell: Cell, length: int | None = None, model: str | None = None):
    """The :class:`~dlmeval.sampling.SamplerConfig` of ``cell`` as ``model`` runs it (its override applied)."""
    from dlmeval.sampling import STRATEGIES, SamplerConfig

    g = spec.generation
    eff = effective_cell(spec, cell, model)
    kw = spec.override(model).sampler_kwargs() if model is not None else {}
    if STRATEGIES[eff.strategy].remasks:
        kw.pop("schedule", None)
    return SamplerConfig(
        length=length or g.gen_tokens,
        steps=eff.steps,
        nfe=eff.nfe,
        block_length=g.block_length if length is None else None,
        strategy=eff.strategy,
        remask_fraction=eff.fraction,
        temperature=eff.temperature,
        suppress_eos=g.suppress_eos,
        eos_rank_last=g.eos_rank_last,
        stop_at_eos=True,
        seed=derive_seed(spec.seed, "care", cell.seed),
        accounting=g.accounting,
        **kw,
    )


def downstream_cells(spec: CareSpec) -> list[Cell]:
    d = spec.downstream
    out: dict[str, Cell] = {}
    for seed in d.seeds:
        for strat in d.strategies:
            for t in d.temperatures:
                for steps in d.steps:
                    c = Cell("task", strat, steps, None, t, spec.sweep.remask_fraction, seed)
                    out.setdefault(c.key, c)
                for budget in d.nfe:
                    c = Cell("task", strat, None, budget, t, spec.sweep.remask_fraction, seed)
                    out.setdefault(c.key, c)
    return list(out.values())


__all__ = [
    "Cell",
    "canonical_cell",
    "downstream_cells",
    "effective_cell",
    "model_schedule",
    "plan_cells",
    "sampler_config",
]
