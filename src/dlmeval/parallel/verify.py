"""Re-running a seeded sample of a run's work units and comparing the new records with the stored ones (#39).

A protocol hands over the run's work as the :class:`~dlmeval.parallel.work.Chunk` values its work loop computes
(same composition, same batches, every draw seeded by (run seed, item id)) and a ``recompute(chunk)`` that returns
the chunk's records without writing them; :func:`verify_units` draws ``sample`` of the complete chunks with a
generator seeded by (``seed``, run id), recomputes them through the work loop into a ``verify`` run
(:mod:`dlmeval.store.verification`) and finishes it ``verified`` or ``failed``. The tolerance is exact when the
recomputation runs on the recorded device type, dtype and torch version (identical bits expected), otherwise
:data:`~dlmeval.store.verification.CROSS_HARDWARE`; the result states which.
"""

from __future__ import annotations

import datetime as _dt
import os
import platform
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from dlmeval.errors import InputError
from dlmeval.parallel.work import Chunk, work_loop
from dlmeval.seeding import derive_seed
from dlmeval.store.verification import CROSS_HARDWARE, EXACT, VERIFY_KIND, compare_records

#: differing fields kept per unit record (the rest are counted)
MAX_DIFFS = 20


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for line in fh:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def hardware(device: str, dtype: str) -> dict[str, Any]:
    """What the recomputation ran on: device and dtype of the model, CPU / GPU names, torch, cores."""
    import torch

    d = str(device)
    out = {
        "name": "hardware",
        "device": d,
        "dtype": str(dtype),
        "cpu": _cpu_name(),
        "machine": platform.machine(),
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "cpus": os.cpu_count(),
    }
    if d.startswith("cuda") and torch.cuda.is_available():
        out["gpu"] = torch.cuda.get_device_name(torch.device(d))
    return out


def _without(rec: Any, fields: Sequence[str]) -> Any:
    if not isinstance(rec, Mapping) or not fields:
        return rec
    return {k: v for k, v in rec.items() if k not in fields}


def sample_units(chunks: Sequence[Chunk], n: int, seed: int, run_id: str) -> list[Chunk]:
    """``n`` of ``chunks`` (all when fewer), drawn by a generator seeded by (seed, run id), in chunk order."""
    import numpy as np

    if n < 1:
        raise InputError(f"--sample must be at least 1, got {n}")
    rng = np.random.default_rng(derive_seed("verify", int(seed), run_id))
    picked = rng.choice(len(chunks), size=min(n, len(chunks)), replace=False)
    return [chunks[i] for i in sorted(int(i) for i in picked)]


def verify_units(
    store,
    run,
    chunks: Sequence[Chunk],
    recompute: Callable[[Chunk], Sequence[Mapping[str, Any]]],
    *,
    sample: int = 4,
    seed: int = 0,
    hw: Mapping[str, Any],
    exact: bool,
    identities: Sequence[Any] = (),
    progress: bool = False,
    ignore: Sequence[str] = (),
    tables: Callable[[], Mapping[str, Any]] | None = None,
) -> dict[str, Any]:
    """Recompute ``sample`` of the run's complete ``chunks`` and compare; returns the verification's summary
    (also stored as the ``summary`` record of its ``verify`` run, whose status it sets). ``ignore``: top-level
    record fields never compared (timings); ``tables()``: a check of the run's tables, ``{"checked": [names],
    "differ": [names]}`` (a differing table fails the verification)."""
    done = run.done_keys()
    complete = [c for c in chunks if c.keys and all(k in done for k in c.keys)]
    if not complete:
        raise InputError(f"run {run.run_id} has no complete work unit to verify (is it finished?)")
    picked = sample_units(complete, sample, seed, run.run_id)
    tol = dict(EXACT if exact else CROSS_HARDWARE)
    config = {
        "verifies": run.run_id,
        "sample": len(picked),
        "seed": int(seed),
        "tolerance": tol,
        "units": [c.keys[0] for c in picked],
    }
    vrun = store.open_run(VERIFY_KIND, config, [*identities, dict(hw)], seed=int(seed))

    def check(vc: Chunk) -> list[dict[str, Any]]:
        c = vc.meta
        new = list(recompute(c))
        if len(new) != len(c.keys):
            raise RuntimeError(f"recomputed {len(new)} records for {len(c.keys)} keys")
        res = [
            (k, compare_records(_without(run.get(k), ignore), _without(r, ignore), **tol))
            for k, r in zip(c.keys, new)
        ]
        diffs = [{"key": k, **d} for k, r in res for d in r["diffs"]]
        return [
            {
                "keys": list(c.keys),
                "identical": all(r["identical"] for _, r in res),
                "ok": all(r["ok"] for _, r in res),
                "max_abs_diff": max(r["max_abs_diff"] for _, r in res),
                "n_diffs": len(diffs),
                "diffs": diffs[:MAX_DIFFS],
            }
        ]

    work = [Chunk((f"unit/{c.keys[0]}",), meta=c, info=c.info) for c in picked]
    work_loop(vrun, work, check, label="verify", progress=progress)
    summary = vrun.get("summary")
    if summary is None:
        recs = [vrun.get(w.keys[0]) for w in work]
        failed = [w.meta.keys[0] for w, r in zip(work, recs) if not r["ok"]]
        checked = dict(tables()) if tables is not None else {"checked": [], "differ": []}
        summary = {
            "status": "failed" if failed or checked["differ"] else "verified",
            "when": _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "hardware": dict(hw),
            "units": len(picked),
            "of_units": len(complete),
            "unit_keys": [c.keys[0] for c in picked],
            "records": sum(len(r["keys"]) for r in recs),
            "identical": all(r["identical"] for r in recs),
            "largest_difference": max(r["max_abs_diff"] for r in recs),
            "tolerance": "exact (same device, dtype and torch: identical bits expected)"
            if exact
            else f"floats within rtol={tol['rtol']:g}, atol={tol['atol']:g}; texts and counts exact "
            "(other device, dtype or torch than recorded)",
            "failed_units": failed,
            "tables_checked": list(checked["checked"]),
            "tables_differ": list(checked["differ"]),
            "not_compared": list(ignore),
            "differences": [d for r in recs for d in r["diffs"]][:MAX_DIFFS],
        }
        vrun.put("summary", summary)
    vrun.finish(summary["status"])
    return {"run_id": vrun.run_id, **summary}


__all__ = ["hardware", "sample_units", "verify_units"]
