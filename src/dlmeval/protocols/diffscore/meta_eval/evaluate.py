"""Per-benchmark evaluation: every metric row under every protocol of the benchmark (value, n, bootstrap CI),
and the significance comparisons the families ask for on the primary protocol."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from dlmeval.protocols.diffscore import paper_protocols as P
from dlmeval.protocols.diffscore.meta_eval.benchmarks import get_benchmark, judged_for
from dlmeval.protocols.diffscore.meta_eval.paper_marks import paper_mark_records
from dlmeval.seeding import derive_seed


def has_systems(frame) -> bool:
    """Whether the frame names at least two systems (a D2T file may name none)."""
    names = {s for s in frame["system"] if s is not None and str(s) not in ("", "None")}
    return len(names) >= 2


def evaluate_benchmark(suite, name: str) -> tuple[list[dict], list[dict]]:
    """``(result records, comparison records)`` of benchmark ``name`` from the scores in the suite's runs."""
    o = suite.opts
    bench = get_benchmark(name)
    frame = suite.frame(name)
    scores = suite.scores(name, frame)
    task = frame["task"].iat[0]

    def protocols_under(suite_protocol: str) -> tuple[str, ...]:
        protocols = bench.protocols
        if suite_protocol == "bartscore" and name in P.BARTSCORE_PROTOCOLS:
            protocols = P.BARTSCORE_PROTOCOLS[
                name
            ]  # BARTScore's analysis (see paper_protocols.SUITE_PROTOCOLS)
        if task == "D2T" and has_systems(frame):
            # the paper's D2T table is system-level: where the files name the systems (the importer keeps them),
            # the system-level Spearman is the headline; BARTScore's files name none, and the outputs are correlated
            protocols = ("sys_spearman", *(p for p in protocols if p != "sys_spearman"))
        return protocols

    # where the two suite protocols differ on this benchmark (REALSumm), the other one's records follow, named by
    # their suite_protocol and never primary: results.csv holds both
    passes = [o.protocol]
    if name in P.BARTSCORE_PROTOCOLS or P.metric_variant(name, "bartscore") != "f":
        passes += [sp for sp in P.SUITE_PROTOCOLS if sp != o.protocol]
    results, comps = [], []
    for dim in bench.dimensions:
        judged = judged_for(frame, dim)
        cfg = bench.config_for(dim)
        seen: set[tuple[str, str]] = set()  # (metric, protocol) pairs already recorded
        for sp in passes:
            full = suite.metric_sources(name, dim, scores, protocol=sp)
            rows = [(m, fam, lab) for m, fam, lab, _ in full]
            vectors = {m: scores[src] for m, _, _, src in full}
            for pi, proto in enumerate(protocols_under(sp)):
                primary = sp == o.protocol and pi == 0
                bseed = derive_seed(o.seed, "meta-eval-bootstrap", name, dim, proto)
                # the columns every record of this (dimension, protocol) starts with
                where = {"benchmark": name, "task": task, "dimension": dim,
                         "dimension_tag": P.DIMENSION_TAGS.get(dim, dim), "suite_protocol": sp,
                         "protocol": proto}  # fmt: skip
                _records(o, judged, dim, cfg, proto, primary, bseed, where, rows, vectors, seen, results)
                if not primary:
                    continue
                comps += _comparisons(suite, o, judged, dim, proto, bseed, where, rows, vectors)
    return results, comps


def _records(o, judged, dim, cfg, proto, primary, bseed, where, rows, vectors, seen, results) -> None:
    """The result records of one (dimension, protocol), appended to ``results`` (a (metric, protocol) pair in
    ``seen`` is skipped: recorded under the run's own suite protocol already)."""
    for m, fam, label in rows:
        if (m, proto) in seen:
            continue
        seen.add((m, proto))
        j, v, n_ok, n_dropped = _finite(judged, vectors[m], dim)
        rec = {
            **where,
            "protocol_label": P.PROTOCOLS[proto],
            "primary": primary,
            "metric": m,
            "family": fam,
            "label": label,
            "config": cfg if m.endswith(":mapped") else None,
            "value": math.nan,
            "n": 0,
            "ci_lo": math.nan,
            "ci_hi": math.nan,
            "dropped": n_dropped,
        }
        if n_ok >= 2:
            res = P.evaluate(proto, j, v)
            rec["value"], rec["n"] = res.value, res.n
            if o.bootstrap and (primary or o.ci_protocols == "all"):
                rec["ci_lo"], rec["ci_hi"] = P.protocol_ci(
                    proto, j, v, n_resamples=o.bootstrap, confidence=o.confidence, seed=bseed
                )
        results.append(rec)


def _comparisons(suite, o, judged, dim, proto, bseed, where, rows, vectors) -> list[dict]:
    """Significance records on the primary protocol of one dimension."""
    comps: list[dict] = []
    # significance on the primary protocol: the pairs each family asks for (DiffScore (paper mapping)
    # against every other row, DiffScore-FT against zero-shot DiffScore and AR)
    ids = [m for m, _, _ in rows]
    pairs = [p for f in suite.families() for p in suite.component(f).comparisons(ids)]
    labels = {m: lab for m, _, lab in rows}
    for a, b in pairs:
        rec = _compare(judged, dim, proto, vectors[a], vectors[b], o, derive_seed(bseed, "compare", a, b))
        if rec is None:
            continue
        comps.append(
            {
                **where,
                "metric_a": a,
                "label_a": labels[a],
                "metric_b": b,
                "label_b": labels[b],
                **rec,
            }
        )
    # the paper's marks: DiffScore against BARTScore / GPTScore, Williams at the column's level
    for rec in paper_mark_records(judged, proto, vectors, o.alpha):
        comps.append(
            {
                **where,
                "label_a": labels[rec["metric_a"]],
                "label_b": labels[rec["metric_b"]],
                **rec,
            }
        )
    return comps


def _compare(
    judged: P.Judged, dim: str, proto: str, va: np.ndarray, vb: np.ndarray, o, seed: int
) -> dict | None:
    """The comparison of two score vectors on the outputs both scored (None: too few to test)."""
    ok = np.isfinite(va) & np.isfinite(vb)
    if dim == P.DARR:
        ok = np.isfinite(va[judged.better_index]) & np.isfinite(va[judged.worse_index])
        ok &= np.isfinite(vb[judged.better_index]) & np.isfinite(vb[judged.worse_index])
        j = _subset_pairs(judged, ok)
    else:
        j = _subset_rows(judged, ok)
        va, vb = va[ok], vb[ok]
    if (dim == P.DARR and ok.sum() < 2) or (dim != P.DARR and ok.sum() < 4):
        return None
    c = P.compare(proto, j, va, vb, alpha=o.alpha, n_resamples=max(o.bootstrap, 1), seed=seed)
    return {
        "test": c.test,
        "value_a": c.value_a,
        "value_b": c.value_b,
        "statistic": c.statistic,
        "p": c.p,
        "diff_ci_lo": c.ci_lo,
        "diff_ci_hi": c.ci_hi,
        "n": c.n,
        "a_significantly_better": c.a_better,
    }


def _subset_rows(j: P.Judged, ok: np.ndarray) -> P.Judged:
    return P.Judged(j.docs[ok], j.systems[ok], None if j.human is None else j.human[ok])


def _subset_pairs(j: P.Judged, ok: np.ndarray) -> P.Judged:
    return replace(
        j,
        better_index=j.better_index[ok],
        worse_index=j.worse_index[ok],
        pair_ids=None if j.pair_ids is None else j.pair_ids[ok],
    )


def _finite(j: P.Judged, v: np.ndarray, dim: str) -> tuple[P.Judged, np.ndarray, int, int]:
    """Drop outputs whose score is NaN (an empty text DiffScore could not score, or a score not computed): rows,
    or whole DARR pairs. Returns the judged view, the scores, the units left and the units dropped."""
    if dim == P.DARR:
        ok = np.isfinite(v[j.better_index]) & np.isfinite(v[j.worse_index])
        w = np.where(np.isfinite(v), v, 0.0)  # outputs of dropped pairs are never read
        return _subset_pairs(j, ok), w, int(ok.sum()), int((~ok).sum())
    ok = np.isfinite(v)
    return _subset_rows(j, ok), v[ok], int(ok.sum()), int((~ok).sum())
