"""Per-model sampler settings in a spec: ``[models."<spec>"]`` tables of a Care spec (the paper's Dream rows run
with Dream's own algorithm and settings while the sweep keeps its shape).

::

    [models]
    diffusion = ["llada:/models/LLaDA-8B-Instruct", "dream:/models/Dream-v0-Instruct-7B"]

    [models."dream:/models/Dream-v0-Instruct-7B"]
    strategies = { none = "entropy" }   # this model's `none` cells run Dream's entropy order (a native name or
                                        # a dlmeval strategy; a re-masking strategy is replaced by a re-masking one)
    alg_temp = 0.0                      # Dream's position temperature (SamplerConfig.position_temperature)
    top_p = 0.95                        # nucleus of the unmask distribution
    top_k = 50                          # keep the 50 most likely tokens (after top_p, as Dream)
    temperature = 0.2                   # replaces every cell's unmask temperature for this model
    schedule = "dream"                  # the unmasking schedule of its non-re-masking cells (default: the family's)

Every key is optional. The table's key must be one of ``diffusion``; values are checked at spec load against the
sampler (:class:`~dlmeval.sampling.SamplerConfig`) and the model's family (native sampler names resolve through
``Family.native_samplers``). A model's override is part of its run's signature (and absent from the signature of a
model without one, so existing runs keep theirs).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from dlmeval.errors import InputError
from dlmeval.protocols.spec_io import (
    as_str,
    as_table,
    float_check,
    int_check,
    read_dataclass,
    spec_field,
    str_check,
)


def _strategy_map(v: Any, at: str) -> tuple[tuple[str, str], ...]:
    t = as_table(v, at, None)
    return tuple(sorted((as_str(k, f"{at}.{k}"), as_str(x, f"{at}.{k}")) for k, x in t.items()))


def _schedules() -> tuple[str, ...]:
    from dlmeval.sampling import SCHEDULES

    return tuple(SCHEDULES)


@dataclass(frozen=True)
class ModelOverride:
    """One model's sampler settings (None: the spec's / the family's)."""

    strategies: tuple[tuple[str, str], ...] = spec_field((), _strategy_map)
    alg_temp: float | None = spec_field(None, float_check(0.0))
    top_k: int | None = spec_field(None, int_check(1))
    top_p: float | None = spec_field(None, float_check(1e-6, 1.0))
    temperature: float | None = spec_field(None, float_check(0.0))
    schedule: str | None = spec_field(None, str_check(_schedules))

    def strategy(self, name: str) -> str:
        """The strategy this model runs for the spec's strategy ``name``."""
        return dict(self.strategies).get(name, name)

    def sampler_kwargs(self) -> dict[str, Any]:
        """What the override sets on a :class:`~dlmeval.sampling.SamplerConfig` besides strategy and temperature."""
        kw: dict[str, Any] = {}
        if self.alg_temp is not None:
            kw["position_temperature"] = self.alg_temp
        if self.top_k is not None:
            kw["top_k"] = self.top_k
        if self.top_p is not None:
            kw["top_p"] = self.top_p
        if self.schedule is not None:
            kw["schedule"] = self.schedule
        return kw

    def as_config(self) -> dict[str, Any]:
        """The signature part: only what is set."""
        d = dataclasses.asdict(self)
        d["strategies"] = dict(self.strategies)
        return {k: v for k, v in d.items() if v not in (None, {})}


NO_OVERRIDE = ModelOverride()


def _resolve_strategy(model: str, value: str, at: str) -> str:
    """A dlmeval strategy name, or a native sampler name of the model's family mapped onto one."""
    from dlmeval.models.family import family_for_spec
    from dlmeval.sampling import STRATEGIES

    if value in STRATEGIES:
        return value
    try:
        fam = family_for_spec(model)[0]
    except InputError:
        fam = None
    if fam is not None and value in fam.native_samplers:
        return fam.native_samplers[value]
    native = f" or a native sampler of {fam.name} ({', '.join(fam.native_samplers)})" if fam else ""
    raise InputError(f"spec: {at} = {value!r} is not a strategy ({', '.join(STRATEGIES)}){native}")


def read_overrides(
    models_table: Mapping[str, Any], models: tuple[str, ...], swept: set[str]
) -> tuple[tuple[str, ModelOverride], ...]:
    """The ``[models."<spec>"]`` sub-tables of ``models_table`` (every key that is a table), validated:
    the model must be listed in ``models``; a replaced strategy must be one the spec samples (``swept``) and its
    replacement must re-mask exactly when it does."""
    from dlmeval.sampling import STRATEGIES

    out = []
    for key, raw in models_table.items():
        if not isinstance(raw, Mapping):
            continue
        at = f'models."{key}"'
        if key not in models:
            raise InputError(
                f"spec: [{at}] names a model that is not in models.diffusion ({', '.join(models)}); the table key "
                "must be the model spec exactly as listed"
            )
        ov = read_dataclass(ModelOverride, raw, at)
        resolved = []
        for old, new in ov.strategies:
            if old not in swept:
                raise InputError(
                    f"spec: {at}.strategies replaces {old!r}, which the spec does not sample ({', '.join(sorted(swept))})"
                )
            new_r = _resolve_strategy(key, new, f"{at}.strategies.{old}")
            if STRATEGIES[new_r].remasks != STRATEGIES[old].remasks:
                what = "re-masks" if STRATEGIES[old].remasks else "never re-masks"
                raise InputError(
                    f"spec: {at}.strategies: {old!r} {what}, {new!r} does not; replace a strategy by one of its "
                    "kind (the NFE accounting and the tables compare like with like)"
                )
            resolved.append((old, new_r))
        out.append((key, dataclasses.replace(ov, strategies=tuple(resolved))))
    return tuple(sorted(out))
