"""Which batch sizes move stored numbers: each protocol part run twice, at its default batch size and at another, on
the tiny models, and the stored records compared field by field (wall-clock fields left out).

    PYTHONPATH=src python benchmarks/bench_batch_bits.py [--data DIR]

Parts: robust-tiny's probes (D-GCG ``eval_batch_size``, IPM ``batch_size``, attention ``batch_size``; the linear
probe's ``batch_size`` is in its options hash, so its records get new keys and are not compared), robust-tiny's
``[dlm]`` / ``[ar]`` batch size, meta-eval's AR family at ``ar_batch_size`` 1 vs 8 (SummEval, 24 items), and
``sample`` of 40 mixed-length prompts at batch 1 / 7 / 40, care-tiny at ``generation.batch_size`` 4 vs 1, and
tiny-llada's logits of five mixed-length rows in one batch vs each row alone (``length_sorted_batches``). A batch size
whose records can differ belongs in the run signature (it is, for every part listed here; docs/scaling.md). Prints
one line per part.
"""

from __future__ import annotations

import argparse
import math
import os
import re
import tempfile
import tomllib
from pathlib import Path


def _diff(x, y, path=""):
    """Paths (with both values) where two JSON-like records differ; NaN equals NaN."""
    if isinstance(x, dict) and isinstance(y, dict):
        return [d for k in sorted(set(x) | set(y)) for d in _diff(x.get(k), y.get(k), f"{path}.{k}")]
    if isinstance(x, list) and isinstance(y, list) and len(x) == len(y):
        return [d for i, (p, q) in enumerate(zip(x, y)) for d in _diff(p, q, f"{path}[{i}]")]
    if isinstance(x, float) and isinstance(y, float) and math.isnan(x) and math.isnan(y):
        return []
    return [] if x == y else [(path, x, y)]


def _rel(d) -> float:
    _, x, y = d
    if isinstance(x, float) and isinstance(y, float):
        return abs(x - y) / max(abs(x), abs(y), 1e-30)
    return math.inf


def _records(store) -> dict[str, dict]:
    out = {}
    for r in store.list_runs():
        run = store.get_run(r["run_id"] if isinstance(r, dict) else r.run_id)
        for k, v in run.results().items():
            names = "+".join(str(m.get("name", "?")) for m in run.signature.models)
            out[f"{run.signature.kind}:{names}|{k}"] = v
    return out


def _robust(tmp: Path, tag: str, tables: dict) -> dict[str, dict]:
    from dlmeval.protocols.robust import parse_spec, run_robust, shipped_spec_path
    from dlmeval.store import RunStore

    raw = tomllib.loads(shipped_spec_path("robust-tiny").read_text())
    for t, kv in tables.items():
        raw[t] = {**raw[t], **kv}
    with RunStore(tmp / f"{tag}.sqlite") as st:
        run_robust(parse_spec(raw, name="robust-tiny"), st, device="cpu", progress=False)
        return _records(st)


def _unkeyed(recs: dict[str, dict]) -> dict[str, dict]:
    """Records with the batch size taken out of their keys and run ids, so two batchings can be compared."""
    out = {}
    for k, v in recs.items():
        k = re.sub(r"/b\d+/", "/", re.sub(r",batch=\d+\]", "]", k))
        out.setdefault(k, []).append(v)
    return out


def _compare(name: str, a: dict, b: dict, skip=("seconds", "elapsed")) -> None:
    if set(a) != set(b):  # the two runs must line up key by key, or the comparison would count nothing
        raise SystemExit(f"{name}: {len(set(a) ^ set(b))} records are in one run only (key format changed?)")
    n = differ = 0
    worst = worst_abs = 0.0
    fields = set()
    for k in sorted(set(a) & set(b)):
        for x, y in zip(a[k], b[k]):
            n += 1
            d = [t for t in _diff(x, y) if not any(s in t[0] for s in skip)]
            if d:
                differ += 1
                worst = max([worst, *(_rel(t) for t in d if _rel(t) < math.inf)])
                worst_abs = max(
                    [
                        worst_abs,
                        *(abs(x - y) for _, x, y in d if isinstance(x, float) and isinstance(y, float)),
                    ]
                )
                fields |= {re.sub(r"\[\d+\]", "[]", t[0]) for t in d}
    detail = (
        f"; at most {worst:.2g} relative, {worst_abs:.2g} absolute; fields {sorted(fields)}" if differ else ""
    )
    print(f"{name}: {differ} of {n} records differ{detail}")


def _by_prefix(recs: dict, prefix: str) -> dict:
    return {k: v for k, v in recs.items() if k.split("|", 1)[1].startswith(prefix)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--data", default=os.environ.get("DLMEVAL_DATA"), help="data directory (meta-eval's SummEval)"
    )
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        base = _unkeyed(_robust(tmp, "base", {}))
        probes = _unkeyed(_robust(tmp, "probes", {"ipm": {"batch_size": 1}, "dgcg": {"eval_batch_size": 1},
                                                  "attention": {"batch_size": 1}}))  # fmt: skip
        for part, prefix in (("D-GCG eval_batch_size 32 vs 1", "dgcg/"), ("IPM batch_size 16 vs 1", "ipm/"),
                             ("attention batch_size 8 vs 1", "attention/")):  # fmt: skip
            _compare(f"robust-tiny {part}", _by_prefix(base, prefix), _by_prefix(probes, prefix))
        roles = _unkeyed(_robust(tmp, "roles", {"dlm": {"batch_size": 1}, "ar": {"batch_size": 1}}))
        _compare("robust-tiny [dlm]/[ar] batch_size 5 vs 1 (task records)", base, roles)
        _care(tmp)
        _meta_eval(tmp, args.data)
        _sample(tmp)
        _rows_alone()


def _care(tmp: Path) -> None:
    import dataclasses

    from dlmeval.protocols import care
    from dlmeval.store import RunStore

    got = {}
    for bs in (4, 1):
        spec = care.load_spec("care-tiny")
        spec = spec.replace(generation=dataclasses.replace(spec.generation, batch_size=bs))
        with RunStore(tmp / f"care{bs}.sqlite") as st:
            care.run_care(spec, st, progress=False)
            got[bs] = _unkeyed(_records(st))
    _compare("care-tiny generation.batch_size 4 vs 1", got[4], got[1])


def _rows_alone() -> None:
    """One forward pass of mixed-length rows against each row alone (what length_sorted_batches' docstring says)."""
    import torch

    from dlmeval.models.registry import load_diffusion

    m = load_diffusion("tiny-llada", seed=0)
    rows = [[(7 * i + 3 * j) % 50 + 5 for j in range(n)] for i, n in enumerate((31, 24, 17, 9, 4))]
    with torch.no_grad():
        ids, mask = m.pad(rows)
        batch = m.logits(ids, mask)
        differ, worst = 0, 0.0
        for i, r in enumerate(rows):
            a_ids, a_mask = m.pad([r])
            alone = m.logits(a_ids, a_mask)[0][a_mask[0].bool()]
            mine = batch[i][mask[i].bool()]
            d = float((alone - mine).abs().max())
            differ += d > 0
            worst = max(worst, d)
        perm = [4, 2, 0, 3, 1]  # the same rows in another order: the same padded width
        p_ids, p_mask = m.pad([rows[k] for k in perm])
        moved = float((m.logits(p_ids, p_mask)[perm.index(0)] - batch[0]).abs().max())
    print(
        f"tiny-llada, 5 rows of 4-31 tokens in one batch vs each alone: {differ} of 5 rows' logits differ, at "
        f"most {worst:.2g}; the same batch in another row order: max change {moved:.2g}"
    )


def _meta_eval(tmp: Path, data: str | None) -> None:
    from dlmeval.protocols.diffscore.meta_eval import SuiteOptions, run_suite
    from dlmeval.store import RunStore

    res = {}
    for bs in (8, 1):
        with RunStore(tmp / f"ar{bs}.sqlite") as st:
            opts = SuiteOptions(benchmarks=("SummEval",), limit=24, families=("ar",), ar="tiny-causal",
                                ar_batch_size=bs, bootstrap=0, progress=False, data_dir=data)  # fmt: skip
            rep = run_suite(opts, st)
            res[bs] = {k: [v] for k, v in st.get_run(rep.components["ar"]).results().items()}
    _compare("meta-eval AR family ar_batch_size 8 vs 1 (SummEval, 24 items)", res[8], res[1])


def _sample(tmp: Path) -> None:
    from dlmeval.models.registry import load_diffusion
    from dlmeval.protocols.sample import sample_prompts
    from dlmeval.sampling import RemaskingSampler, SamplerConfig

    words = (
        "the a cat dog sat on mat river ran quickly slowly over under big small red blue house tree".split()
    )
    prompts = [
        " ".join(words[(i * 7 + j * 3) % len(words)] for j in range(1 + (i * 5) % 14)) for i in range(40)
    ]
    sampler = RemaskingSampler(load_diffusion("default", seed=0), SamplerConfig(length=16, steps=16, seed=0))
    ids = [str(i) for i in range(len(prompts))]
    got = {bs: sample_prompts(sampler, prompts, ids, batch_size=bs).records for bs in (1, 7, 40)}
    for bs in (7, 40):
        same = sum(a["text"] == b["text"] for a, b in zip(got[1], got[bs]))
        print(f"sample 40 prompts of 1-14 words, batch 1 vs {bs}: {len(prompts) - same} of 40 texts differ")


if __name__ == "__main__":
    main()
