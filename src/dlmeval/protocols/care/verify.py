"""Verifying a Care run: rebuild its work from the recorded signature and recompute a sample of it (#39).

:func:`spec_from_config` rebuilds the :class:`CareSpec` of one model's run from the configuration its signature
holds (and refuses when the rebuilt spec would not sign the same configuration); :func:`verify_care_run` checks
the inputs against their recorded digests and the loaded model against its recorded weights hash, rebuilds the
run's work units exactly as :func:`dlmeval.protocols.care.run.run_model` cuts them (the item chunks of every sweep
and downstream cell, and each cell's summary: PPL, MAUVE, ... from its items, with the run's evaluators, loaded
only when a summary is drawn) and hands them to :func:`dlmeval.parallel.verify.verify_units`; timing fields
(``seconds``) are not compared. It also recomputes every table of the run from the stored records and compares
it with the stored table (the leaderboard reads the tables).
"""

from __future__ import annotations

from typing import Any

from dlmeval.errors import InputError
from dlmeval.parallel.work import Chunk
from dlmeval.protocols.care.spec import CareSpec, parse_spec
from dlmeval.store import jsonsafe
from dlmeval.store.verification import CROSS_HARDWARE, EXACT


def spec_from_config(config: dict[str, Any]) -> tuple[CareSpec, str]:
    """The spec and model spec of a ``care`` run from its signature's configuration."""
    cfg = jsonsafe.loads(jsonsafe.dumps(config))
    data = cfg.pop("data", {})
    cfg.pop("records", None)
    if "model" not in cfg:
        raise InputError(
            "the run's configuration names no model: verify a `care` run (one model), not a sweep"
        )
    model = cfg.pop("model")
    override = cfg.pop("override", None)
    models = {"diffusion": [model], "evaluator": cfg.pop("evaluator")}
    if override:
        models[model] = override
    raw = {"name": "verify", "seed": cfg.pop("seed"), "preset": cfg.pop("preset"), "models": models, **cfg}
    spec = parse_spec(raw)
    again = jsonsafe.loads(jsonsafe.dumps({**spec.config(model), "data": data}))
    if jsonsafe.dumps(again, canonical=True) != jsonsafe.dumps(config, canonical=True):
        raise InputError(
            "the run's configuration cannot be rebuilt into the spec that signed it (written by another dlmeval "
            "version?); verify it with the dlmeval that made it"
        )
    return spec, model


def verify_care_run(
    store,
    run,
    *,
    sample: int = 4,
    seed: int = 0,
    device: str | None = "auto",
    dtype: str | None = None,
    data_dir=None,
    allow_download: bool = False,
    trust_remote_code: bool = False,
    progress: bool = False,
    model=None,
) -> dict[str, Any]:
    """Recompute ``sample`` work units of the ``care`` run ``run`` (item chunks and cell summaries) and compare,
    and recompute its tables from its records (see the module docstring).
    ``model``: the already loaded model (else loaded from the run's model spec, in ``dtype``, by default the
    recorded one: another dtype is verified within the cross-hardware tolerance)."""
    from dlmeval.models import load_diffusion
    from dlmeval.parallel import fixed_chunks
    from dlmeval.parallel.verify import hardware, verify_units
    from dlmeval.protocols.care.downstream import downstream_units
    from dlmeval.protocols.care.plan import CareOptions, resolve
    from dlmeval.protocols.care.prompts import model_label
    from dlmeval.protocols.care.run import RUN_KIND, sweep_units

    sig = run.signature
    if sig.kind != RUN_KIND:
        raise InputError(
            f"run {run.run_id} is a {sig.kind!r} run; verification recomputes a {RUN_KIND!r} run (one per model: "
            "`dlmeval runs list --kind care`)"
        )
    spec, model_spec = spec_from_config(sig.config)
    plan = resolve(spec, CareOptions(data_dir, allow_download))
    data = plan.data_identity()
    recorded_data = sig.config.get("data", {})
    for name in sorted(set(data) | set(recorded_data)):
        if data.get(name) != recorded_data.get(name):
            raise InputError(
                f"input {name} differs from the digest run {run.run_id} recorded (or is missing here); verify "
                "with the run's data (--data-dir)"
            )
    recorded = sig.models[0] if sig.models else {}
    if model is None:
        model = load_diffusion(
            model_spec,
            device=device,
            dtype=dtype if dtype not in (None, "auto") else dtype_of(recorded),
            trust_remote_code=trust_remote_code,
            allow_download=allow_download,
        )
    ident = model.identity().as_dict()
    # the weights hash covers the tensors' dtype: in another dtype only the checkpoint's source can be compared
    same_dtype = ident.get("dtype") == recorded.get("dtype")
    if not same_dtype and ident.get("source") != recorded.get("source"):
        raise InputError(
            f"model {model_spec} loads from {ident.get('source')}, not the {recorded.get('source')} run "
            f"{run.run_id} recorded; verify with the same checkpoint"
        )
    if same_dtype and ident.get("weights_sha256") != recorded.get("weights_sha256"):
        raise InputError(
            f"model {model_spec} has weights {str(ident.get('weights_sha256'))[:12]}, not the "
            f"{str(recorded.get('weights_sha256'))[:12]} run {run.run_id} recorded; verify with the same weights"
        )
    label = model_label(model_spec)
    metrics = _LazyEvaluators(
        plan,
        sig.models[1:],
        device=device,
        dtype=dtype_of(recorded),
        trust_remote_code=trust_remote_code,
        allow_download=allow_download,
    )
    units = sweep_units(plan, label, model, plan.prompts(model), metrics, model_spec=model_spec)
    if plan.tasks:
        units += downstream_units(plan, label, model, model_spec=model_spec)
    first: dict[str, Any] = {}
    for u in units:
        first.setdefault(u.key, u)
    # the work units, as the run loop cuts them: every item chunk of every unit, and every unit's summary
    chunks = [
        c
        for u in first.values()
        for c in fixed_chunks(u.items, u.item_keys, max(1, u.chunk_size), meta=("items", u), info=u.name)
    ]
    chunks += [Chunk((u.key,), meta=("summary", u), info=u.name) for u in first.values()]

    def recompute(c: Chunk) -> list[dict]:
        what, u = c.meta
        if what == "items":
            return u.generate(list(c.items), lambda w: None)
        return [u.finish([run.get(k) for k in u.item_keys], lambda w: None)]

    import torch

    from dlmeval.store.signature import current_numerics

    hw = hardware(ident.get("device", "cpu"), ident.get("dtype", "?"))
    # the run's thread count, which its run id carries (it moves last bits): recomputed with the same one
    was = torch.get_num_threads()
    rec_num = sig.numerics or {}
    if rec_num.get("threads"):
        torch.set_num_threads(int(rec_num["threads"]))
    now = current_numerics([ident])
    exact = (
        str(ident.get("device", "")).split(":")[0] == str(recorded.get("device", "")).split(":")[0]
        and ident.get("dtype") == recorded.get("dtype")
        and torch.__version__ == sig.versions.get("torch")
        # the instruction set and deterministic kernels move last bits too (docs/scaling.md)
        and all(rec_num.get(k) in (None, now.get(k)) for k in ("cpu_capability", "deterministic"))
    )
    tol = EXACT if exact else CROSS_HARDWARE
    try:
        return verify_units(
            store,
            run,
            chunks,
            recompute,
            sample=sample,
            seed=seed,
            hw=hw,
            exact=exact,
            identities=[ident],
            progress=progress,
            ignore=TIMING,
            tables=lambda: check_tables(run, spec, units, **tol),
        )
    finally:
        torch.set_num_threads(was)


#: record fields that measure time, not results: never compared
TIMING = ("seconds",)


def dtype_of(identity: dict[str, Any]) -> str:
    return str(identity.get("dtype") or "auto")


class _LazyEvaluators:
    """The run's evaluators (PPL model, MAUVE featurizer), loaded only when a recomputed summary needs them, and
    checked against the identities the run recorded."""

    def __init__(self, plan, recorded, **kw):
        self._plan, self._recorded, self._kw, self._ev = plan, list(recorded), kw, None

    def __getattr__(self, name: str):
        if name.startswith("_"):
            raise AttributeError(name)
        if self._ev is None:
            from dlmeval.protocols.care.metrics import Evaluators

            kw = dict(self._kw)
            if self._recorded:
                kw["dtype"] = dtype_of(self._recorded[0])
            ev = Evaluators(self._plan, **kw)
            got = [i.as_dict().get("weights_sha256") for i in ev.identities()]
            want = [m.get("weights_sha256") for m in self._recorded]
            if got != want:
                raise InputError(
                    f"evaluator {self._plan.spec.evaluator} has other weights than the run recorded; verify with the "
                    "same evaluator"
                )
            self._ev = ev
        return getattr(self._ev, name)


def check_tables(run, spec: CareSpec, units, *, rtol: float, atol: float) -> dict[str, Any]:
    """Recompute the run's tables from its stored records (as the run computed them) and compare each with the
    stored table: ``{"checked": [names], "differ": [names]}``."""
    import pandas as pd

    from dlmeval.protocols.care.run import model_tables

    rows: dict[str, list[dict]] = {}
    for u in units:  # as run_units collects them: every unit, a cell run once under two names included
        rec = run.get(u.key)
        if rec is None:
            return {"checked": [], "differ": [], "note": f"unit {u.key} has no summary yet"}
        rows.setdefault(u.table, []).append(u.row(rec))
    fresh = model_tables(spec, rows.get("cells", []), rows.get("down", []))
    stored = set(run.tables())
    out: dict[str, Any] = {"checked": [], "differ": []}
    for name, df in fresh.items():
        if name not in stored:
            continue
        have = run.get_table(name)
        drop = [c for c in df.columns if any(t in c for t in TIMING)]
        if (
            "data_source" in df.columns and "data_source" not in have.columns
        ):  # stored before #34 named the data
            drop.append("data_source")
        out["checked"].append(name)
        try:
            pd.testing.assert_frame_equal(
                have.drop(columns=[c for c in drop if c in have.columns]),
                df.drop(columns=drop),
                check_exact=rtol == 0 and atol == 0,
                rtol=max(rtol, 1e-300),
                atol=atol,
                check_dtype=False,
            )
        except AssertionError:
            out["differ"].append(name)
    return out


__all__ = ["spec_from_config", "verify_care_run"]
