"""Verifying a Care run: rebuild its work from the recorded signature and recompute a sample of it (#39).

:func:`spec_from_config` rebuilds the :class:`CareSpec` of one model's run from the configuration its signature
holds (and refuses when the rebuilt spec would not sign the same configuration); :func:`verify_care_run` checks
the inputs against their recorded digests and the loaded model against its recorded weights hash, rebuilds the
run's work units exactly as :func:`dlmeval.protocols.care.run.run_model` cuts them (the item chunks of every sweep
and downstream cell) and hands them to :func:`dlmeval.parallel.verify.verify_units`.
"""

from __future__ import annotations

from typing import Any

from dlmeval.errors import InputError
from dlmeval.protocols.care.spec import CareSpec, parse_spec
from dlmeval.store import jsonsafe


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
    data_dir=None,
    allow_download: bool = False,
    trust_remote_code: bool = False,
    progress: bool = False,
    model=None,
) -> dict[str, Any]:
    """Recompute ``sample`` item chunks of the ``care`` run ``run`` and compare (see the module docstring).
    ``model``: the already loaded model (else loaded from the run's model spec, in its recorded dtype)."""
    from dlmeval.models import load_diffusion
    from dlmeval.parallel import fixed_chunks
    from dlmeval.parallel.verify import hardware, verify_units
    from dlmeval.protocols.care.downstream import downstream_units
    from dlmeval.protocols.care.prompts import cell_prompts, data_identity, model_label
    from dlmeval.protocols.care.run import RUN_KIND, sweep_units

    sig = run.signature
    if sig.kind != RUN_KIND:
        raise InputError(
            f"run {run.run_id} is a {sig.kind!r} run; verification recomputes a {RUN_KIND!r} run (one per model: "
            "`dlmeval runs list --kind care`)"
        )
    spec, model_spec = spec_from_config(sig.config)
    data = data_identity(spec, data_dir, allow_download=allow_download)
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
            dtype=recorded.get("dtype") or "auto",
            trust_remote_code=trust_remote_code,
            allow_download=allow_download,
        )
    ident = model.identity().as_dict()
    if ident.get("weights_sha256") != recorded.get("weights_sha256"):
        raise InputError(
            f"model {model_spec} has weights {str(ident.get('weights_sha256'))[:12]}, not the "
            f"{str(recorded.get('weights_sha256'))[:12]} run {run.run_id} recorded; verify with the same weights"
        )
    label = model_label(model_spec)
    units = sweep_units(spec, label, model, cell_prompts(spec, model, data_dir), None, model_spec=model_spec)
    if spec.downstream.enabled:
        units += downstream_units(spec, label, model, data_dir, model_spec=model_spec)
    first: dict[str, Any] = {}
    for u in units:
        first.setdefault(u.key, u)
    chunks = [
        c
        for u in first.values()
        for c in fixed_chunks(u.items, u.item_keys, max(1, u.chunk_size), meta=u, info=u.name)
    ]
    import torch

    hw = hardware(ident.get("device", "cpu"), ident.get("dtype", "?"))
    exact = (
        str(ident.get("device", "")).split(":")[0] == str(recorded.get("device", "")).split(":")[0]
        and ident.get("dtype") == recorded.get("dtype")
        and torch.__version__ == sig.versions.get("torch")
    )
    return verify_units(
        store,
        run,
        chunks,
        lambda c: c.meta.generate(list(c.items), lambda w: None),
        sample=sample,
        seed=seed,
        hw=hw,
        exact=exact,
        identities=[ident],
        progress=progress,
    )


__all__ = ["spec_from_config", "verify_care_run"]
