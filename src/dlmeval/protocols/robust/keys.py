"""What keys a record: the run config of one model (everything that changes its per-item records) and the record
keys inside that run (what may grow without recomputing: items, conditions, perturbation seeds).

A model's ``robust`` run is keyed by :func:`model_config`: protocol version, role, scope, per task the modes, the
generation budget, the task's options (TriviaQA's matching) and the **data identity** (the file the spec names,
or the shipped one, and the SHA-256 of every item's content in file order: pointing a task at another file, or
editing the file, opens a new run), the decoding settings and which of them the sampler honours, the estimator
settings and the batch size (which rows share a forward pass). Record keys are
``<task>/<mode>/<condition>/s<seed>/<item id>``; the probes' keys carry their own settings (``GCGConfig.key`` with
every attack setting, ``IPMConfig.key`` and the flagger).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any

#: the version of the robustness run configuration (2: data identity and the applied decoding settings in it);
#: this module reads a :class:`~dlmeval.protocols.robust.spec.RobustSpec` by its fields and never imports
#: spec.py, whose ``RobustSpec.config`` / ``model_config`` call it (one way, #35)
PROTOCOL_VERSION = 2


def record_key(task: str, mode: str, condition: str, seed: int | None, item_id: str) -> str:
    return f"{task}/{mode}/{condition}/s{'-' if seed is None else seed}/{item_id}"


def items_digest(items: Sequence[Any]) -> str:
    """SHA-256 of the items' content in order (dataclass fields as canonical JSON): the data's identity."""
    h = hashlib.sha256()
    for it in items:
        d = dataclasses.asdict(it) if dataclasses.is_dataclass(it) else dict(it)
        h.update(json.dumps(d, sort_keys=True, ensure_ascii=False, default=str).encode("utf-8"))
        h.update(b"\n")
    return h.hexdigest()


def data_identity(path: str | None, all_items: Sequence[Any]) -> dict[str, Any]:
    """``{"path", "n_items", "sha256"}`` of a task's whole data file (every item, not only the first ``n``, so
    that a larger ``n`` keeps the run)."""
    return {"path": path or "(shipped)", "n_items": len(all_items), "sha256": items_digest(all_items)}


def applied_sampler_fields() -> dict[str, bool]:
    """Which spec decoding settings this dlmeval's :class:`~dlmeval.sampling.SamplerConfig` can express: a
    setting the sampler lacks is recorded as not applied, so records made without it are never reused once it
    exists."""
    from dlmeval.sampling import SamplerConfig

    names = {f.name for f in dataclasses.fields(SamplerConfig)}
    return {"top_p": "top_p" in names, "eos_rank_last": "eos_rank_last" in names}


#: the SamplerConfig fields a robustness spec sets (the rest keep the sampler's defaults)
SET_BY_SPEC = {
    "length", "steps", "nfe", "block_length", "strategy", "remask_fraction", "temperature", "position_temperature",
    "suppress_eos", "eos_rank_last", "top_p", "stop_at_eos", "seed", "top_k", "schedule",
}  # fmt: skip
#: sampler settings that enter a signature only when set (added after runs were stored without them)
ONLY_WHEN_SET = ("top_k", "schedule")


def sampler_defaults() -> dict[str, Any]:
    """The sampler's own defaults of every setting the spec does not give (e.g. its NFE accounting): a change of
    a default there changes the records, so it opens a new run."""
    from dlmeval.sampling import SamplerConfig

    return {
        f.name: f.default
        for f in dataclasses.fields(SamplerConfig)
        if f.name not in SET_BY_SPEC and f.default is not dataclasses.MISSING
    }


def model_config(spec: Any, entry, data: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """What decides one model's per-item records (its ``robust`` run's signature): not ``n``, the conditions or
    the perturbation seeds, which are in the record keys. ``data``: task name -> :func:`data_identity`."""
    sampler_steps = entry.sampler.steps if entry.role == "dlm" else None
    tasks = {}
    for t in spec.tasks:
        d = {
            "modes": list(t.modes),
            "budget": list(t.budget(sampler_steps)) if entry.role == "dlm" else t.ar_tokens,
            "options": t.task().settings(),
        }
        if data is not None and t.name in data:
            d["data"] = dict(data[t.name])
        tasks[t.name] = d
    for name, ident in (data or {}).items():  # tasks only a probe reads
        if name not in tasks:
            tasks[name] = {"data": dict(ident), "options": spec.task_or_default(name).task().settings()}
    out: dict[str, Any] = {
        "protocol": PROTOCOL_VERSION,
        "role": entry.role,
        "scope": spec.scope,
        "tasks": tasks,
        # rows per forward pass: the canonical chunks are slices of this size, and a padded row's scores and
        # confidences move in the last bits with its batch (robust-tiny, 5 vs 1: 18 of 78 records, <= 4.8e-7:
        # benchmarks/bench_batch_bits.py)
        "batch_size": entry.sampler.batch_size if entry.role == "dlm" else spec.ar.batch_size,
    }
    if entry.role == "dlm":
        s = dataclasses.asdict(entry.sampler)
        for k in ("batch_size", "steps"):  # steps: in the budget; batch_size: above
            s.pop(k)
        s["eos"] = entry.sampler.eos_mode
        s.pop("suppress_eos")
        for k in ONLY_WHEN_SET:
            if s.get(k) is None:
                s.pop(k, None)
        out["sampler"] = s
        out["applied"] = applied_sampler_fields()
        out["sampler_defaults"] = sampler_defaults()
        lk = dataclasses.asdict(spec.likelihood)
        lk.pop("ar_aggregate")
        out["likelihood"] = lk
        out["commit_top_k"] = spec.calibration.commit_top_k
        if spec.calibration.confidence != "unmasked":  # the default keeps the signatures it had
            out["confidence"] = {
                "reading": spec.calibration.confidence,
                "masks": spec.calibration.confidence_masks,
            }
    else:
        out["generation"] = {"temperature": spec.ar.temperature, "top_p": spec.ar.top_p}
        out["likelihood"] = {"aggregate": spec.likelihood.ar_aggregate}
    return out


def spec_config(spec: Any) -> dict[str, Any]:
    """Everything that decides a number of the spec's tables (the ``robust-spec`` run's signature)."""
    d = dataclasses.asdict(spec)
    for k in ("path", "name", "published"):
        d.pop(k)
    for k in ONLY_WHEN_SET:  # the batch sizes stay: they decide the records' last bits (model_config)
        if d["dlm"].get(k) is None:
            d["dlm"].pop(k, None)
    # readings at their defaults leave the signature as it was before they were spec fields
    if d["clean_seeds"] == "once":
        d.pop("clean_seeds")
    if d["calibration"]["confidence"] == "unmasked":
        d["calibration"].pop("confidence")
        d["calibration"].pop("confidence_masks")
    for t in d["tasks"]:
        for k in ("source", "split", "config"):
            if t[k] is None:
                t.pop(k)
    d["protocol"] = PROTOCOL_VERSION
    return d
