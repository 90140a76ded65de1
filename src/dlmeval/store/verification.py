"""Verification status of a run, and its evidence, as the store holds them (#39).

A verification recomputes a seeded sample of a run's work units (:func:`dlmeval.parallel.verify.verify_units`)
and is itself a run in the store: ``kind = "verify"``, configuration ``{"verifies": <run id>, "sample", "seed",
"tolerance"}``, the identities of the recomputing model and hardware, one record per recomputed unit
(``unit/<first key>``: its keys, whether the bits were identical, the largest difference, the differing fields)
and a ``summary`` record; it finishes with status ``verified`` or ``failed``. A bundle of a run carries its
verification runs (:mod:`dlmeval.store.bundle`).

A run's status (:func:`run_status`): ``failed`` when any verification of it failed, else ``verified`` when one
succeeded, else ``pending``.
"""

from __future__ import annotations

import math
from typing import Any

from dlmeval.store import jsonsafe

VERIFY_KIND = "verify"
STATUSES = ("verified", "pending", "failed")
#: the tolerance across hardware, dtypes or library versions: floats within rtol / atol, everything else exact
CROSS_HARDWARE = {"rtol": 1e-5, "atol": 1e-6}
EXACT = {"rtol": 0.0, "atol": 0.0}


def compare_records(stored: Any, new: Any, *, rtol: float = 0.0, atol: float = 0.0, _at: str = "") -> dict:
    """Compare two records field by field: ``identical`` (the same canonical JSON), ``max_abs_diff`` (largest
    difference between numbers), ``ok`` (numbers within ``atol + rtol * |stored|``, everything else equal) and
    ``diffs`` (the fields that are not ok, as ``{"field", "stored", "new"}``)."""
    out = {"identical": True, "max_abs_diff": 0.0, "ok": True, "diffs": []}

    def walk(a: Any, b: Any, at: str) -> None:
        num = (int, float)
        if isinstance(a, num) and isinstance(b, num) and not isinstance(a, bool) and not isinstance(b, bool):
            fa, fb = float(a), float(b)
            if (math.isnan(fa) and math.isnan(fb)) or fa == fb:
                return
            out["identical"] = False
            d = abs(fa - fb)
            if not math.isnan(d):
                out["max_abs_diff"] = max(out["max_abs_diff"], d)
            if not (d <= atol + rtol * abs(fa)):
                out["ok"] = False
                out["diffs"].append({"field": at or "$", "stored": a, "new": b})
            return
        if isinstance(a, dict) and isinstance(b, dict):
            for k in sorted(set(a) | set(b)):
                walk(a.get(k), b.get(k), f"{at}.{k}" if at else str(k))
            return
        if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
            for i, (x, y) in enumerate(zip(a, b)):
                walk(x, y, f"{at}[{i}]")
            return
        if jsonsafe.dumps(a, canonical=True) != jsonsafe.dumps(b, canonical=True):
            out["identical"] = out["ok"] = False
            out["diffs"].append({"field": at or "$", "stored": a, "new": b})

    walk(stored, new, _at)
    return out


def verification_index(store) -> dict[str, list]:
    """``{run id: its verification runs, oldest first}`` over every verification run of ``store``, read once: a
    caller that asks about many runs (a leaderboard, a site) passes it to :func:`verification_runs` /
    :func:`run_status` instead of reading the verification runs again for each run."""
    out: dict[str, list] = {}
    for info in store.list_runs(VERIFY_KIND):
        run = store.get_run(info["run_id"])
        verifies = run.signature.config.get("verifies")
        if isinstance(verifies, str):
            out.setdefault(verifies, []).append(run)
    return out


def verification_runs(store, run_id: str, index: dict[str, list] | None = None) -> list:
    """The verification runs of ``run_id`` in ``store``, oldest first (from ``index`` when given:
    :func:`verification_index`)."""
    return list((verification_index(store) if index is None else index).get(run_id, []))


def evidence(run) -> dict[str, Any]:
    """A verification run's summary: status, when, hardware, units, largest difference, tolerance, failures."""
    summary = run.get("summary") or {}
    return {"run_id": run.run_id, "status": run.status, **summary}


def run_status(store, run_id: str, index: dict[str, list] | None = None) -> dict[str, Any]:
    """``{"status": verified | pending | failed, "evidence": <the deciding verification's summary> or None}``
    (``index``: :func:`verification_index`, read once for many runs)."""
    done = [evidence(r) for r in verification_runs(store, run_id, index)]
    done = [e for e in done if e["status"] in ("verified", "failed")]
    failed = [e for e in done if e["status"] == "failed"]
    if failed:
        return {"status": "failed", "evidence": failed[-1]}
    if done:
        return {"status": "verified", "evidence": done[-1]}
    return {"status": "pending", "evidence": None}


def status_line(st: dict[str, Any]) -> str:
    """One line for a status: ``verified 2026-12-03 (cpu float32, 4 units, max numeric diff 0, 11 tables
    recomputed)``."""
    e = st.get("evidence")
    if not e:
        return st["status"]
    hw = e.get("hardware") or {}
    when = str(e.get("when", ""))[:10]
    line = (
        f"{st['status']} {when} ({hw.get('device', '?')} {hw.get('dtype', '?')}, {e.get('units', '?')} units, "
        f"max numeric diff {e.get('largest_difference', float('nan')):.3g}, "
        f"{len(e.get('tables_checked') or [])} tables recomputed)"
    )
    if e.get("failed_units"):
        line += " failed units: " + ", ".join(e["failed_units"][:3])
    if e.get("tables_differ"):
        line += " tables differ: " + ", ".join(e["tables_differ"])
    return line


__all__ = [
    "CROSS_HARDWARE",
    "EXACT",
    "STATUSES",
    "VERIFY_KIND",
    "compare_records",
    "evidence",
    "run_status",
    "status_line",
    "verification_index",
    "verification_runs",
]
