"""The paper's estimator against the default on SummEval: how far apart are their numbers?

    # one estimator per call (each writes its per-item scores; a call takes minutes on a shared CPU)
    .venv/bin/python benchmarks/bench_estimator_paper.py score --preset standard --docs 50 --out DIR
    .venv/bin/python benchmarks/bench_estimator_paper.py score --preset paper --docs 50 --out DIR
    .venv/bin/python benchmarks/bench_estimator_paper.py score --preset standard --scheme exact-count --docs 50 --out DIR
    # then the comparison of every score file in DIR
    .venv/bin/python benchmarks/bench_estimator_paper.py compare --out DIR
    # exact expectations and variances on a tiny model, every mask pattern enumerated (about a minute)
    .venv/bin/python benchmarks/bench_estimator_paper.py tiny

``score`` scores the candidates of the first ``--docs`` SummEval documents (16 systems each) with DiffScore
``--config`` (default ``marginal``: the candidate alone, the configuration of fluency, and the cheapest) on the
default model, with the estimator of ``--preset`` and optional ``--scheme`` / ``--weighting`` / ``-K`` / ``-T``,
and writes ``DIR/<label>.csv`` (item id, doc id, score, se, human scores). ``compare`` prints, for every score
file: the summary-level Spearman (per document, averaged: the paper's SummEval protocol) with the four human
dimensions, the mean Monte Carlo standard error; and, for every pair of files, the Spearman correlation of their
per-item scores, the mean difference of the scores (with its standard error over items) and the mean absolute
difference, in units of the mean standard error. ``tiny`` enumerates every mask pattern of a 9-token text on the
tiny LLaDA stand-in (511 patterns, brute force), computes the exact expectation of the paper's estimator and of
exact-count masks, and draws 1,500 seeded estimates per scheme (read off the enumerated table, so no sampling of
the model) at (K, T) = (20, 10), (10, 5), (5, 5): mean, variance, variance over the paper's.
"""

from __future__ import annotations

import argparse
import itertools
import math
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.stats import spearmanr

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from dlmeval.data.bartscore import load_bartscore  # noqa: E402
from dlmeval.protocols.diffscore.paper_protocols import summary_level  # noqa: E402
from dlmeval.scoring import DiffScorer, resolve_estimator  # noqa: E402

DIMS = ("coherence", "consistency", "fluency", "relevance")


def _label(spec, config: str) -> str:
    return f"{config}-K{spec.n_masks}-T{spec.n_rates}-{spec.scheme}-{spec.weighting}"


def score(args) -> None:
    from dlmeval.models import load_diffusion

    df = load_bartscore("SummEval")
    docs = list(dict.fromkeys(df["doc_id"]))[: args.docs]
    df = df[df["doc_id"].isin(docs)].reset_index(drop=True)
    spec = resolve_estimator(
        args.preset, n_masks=args.masks, n_rates=args.rates, scheme=args.scheme, weighting=args.weighting
    )
    model = load_diffusion("default", device="cpu")
    scorer = DiffScorer.from_spec(model, spec, seed=args.seed)
    t0 = time.perf_counter()
    out = scorer.score(
        df["candidate"].tolist(),
        df["source"].tolist() if args.config != "marginal" else None,
        config=args.config,
        item_ids=df["item_id"].tolist(),
    )
    wall = time.perf_counter() - t0
    res = df[["item_id", "doc_id", *DIMS]].copy()
    res["score"], res["se"] = out["score"].to_numpy(), out["se"].to_numpy()
    path = Path(args.out) / f"{_label(spec, args.config)}.csv"
    path.parent.mkdir(parents=True, exist_ok=True)
    res.to_csv(path, index=False)
    print(
        f"{path.name}: {len(res)} outputs of {len(docs)} documents, {scorer.rows_scored} rows, {wall:.0f} s"
    )
    print(f"settings: {spec.as_dict()}")


def compare(args) -> None:
    files = sorted(Path(args.out).glob("*.csv"))
    runs = {f.stem: pd.read_csv(f) for f in files}
    lines = [
        "| estimator | n | " + " | ".join(f"{d[:3].upper()} (rho doc-avg)" for d in DIMS) + " | mean se |"
    ]
    lines.append("|---|---:|" + "---:|" * len(DIMS) + "---:|")
    for name, r in runs.items():
        rhos = [summary_level(r["score"], r[d], r["doc_id"]).value for d in DIMS]
        lines.append(
            f"| {name} | {len(r)} | "
            + " | ".join(f"{x:.3f}" for x in rhos)
            + f" | {np.nanmean(r['se']):.4f} |"
        )
    print("\n".join(lines) + "\n")
    lines = ["| A | B | Spearman(A, B) over items | mean(A - B) +- se | mean abs(A - B) | / mean se |"]
    lines.append("|---|---|---:|---:|---:|---:|")
    names = list(runs)
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            x = runs[a].set_index("item_id")
            y = runs[b].set_index("item_id").loc[x.index]
            d = x["score"] - y["score"]
            se = float(np.sqrt((np.nanmean(x["se"] ** 2) + np.nanmean(y["se"] ** 2)) / 2))
            rho = spearmanr(x["score"], y["score"]).statistic
            lines.append(
                f"| {a} | {b} | {rho:.4f} | {d.mean():+.4f} +- {d.std(ddof=1) / np.sqrt(len(d)):.4f} | "
                f"{d.abs().mean():.4f} | {d.abs().mean() / se:.2f} |"
            )
    print("\n".join(lines))


def tiny(args) -> None:
    import torch

    from dlmeval.models import tiny_model
    from dlmeval.scoring import EstimatorSpec
    from dlmeval.scoring.masks import hidden_count, make_masks, masks_per_rate, rate_grid
    from dlmeval.scoring.spec import mask_values

    model = tiny_model("llada", seed=1)
    layout = DiffScorer(model).formatter.layout("marginal", args.text, None)
    a, b = layout.span("candidate")
    n = b - a
    pats = [s for r in range(1, n + 1) for s in itertools.combinations(range(n), r)]
    seqs = [
        [model.mask_token_id if a <= i < b and i - a in s else t for i, t in enumerate(layout.ids)]
        for s in pats
    ]
    ids, attn = model.pad(seqs)
    orig, _ = model.pad([list(layout.ids)] * len(seqs))
    with torch.no_grad():
        logp = torch.log_softmax(model.logits(ids, attn), -1)
    off = model.offset(attn)
    table = {
        s: np.array([float(logp[r, int(off[r]) + a + i, orig[r, int(off[r]) + a + i]]) for i in s])
        for r, s in enumerate(pats)
    }
    print(f"text {args.text!r}: L = {n}, {len(pats)} patterns enumerated")
    print(
        "| K | T | exact E (paper) | exact E (exact-count) | scheme | mean of estimates | variance | / paper's |"
    )
    print("|---:|---:|---:|---:|---|---:|---:|---:|")
    for k, t in ((20, 10), (10, 5), (5, 5)):
        rates = rate_grid(t)
        share = masks_per_rate(k, t) / k
        exact = 0.0
        for r_i, rate in enumerate(rates):
            e = sum(
                (rate ** len(s) * (1 - rate) ** (n - len(s)) + ((1 - rate) ** n / n if len(s) == 1 else 0.0))
                * table[s].mean()
                for s in pats
            )
            exact += share[r_i] * e
        ec = 0.0
        for r_i, rate in enumerate(rates):
            m, low = hidden_count(rate, n), t - 2 - r_i
            if 0 <= low < r_i and n - hidden_count(rates[low], n) >= 1:
                m = n - hidden_count(rates[low], n)
            ec += share[r_i] * float(np.mean([table[s].mean() for s in pats if len(s) == m]))
        var = {}
        for scheme in ("independent", "balanced", "exact-count"):
            spec = EstimatorSpec(k, t, scheme, "mlp")
            est = np.empty(args.draws)
            for d in range(args.draws):
                ms = make_masks(scheme, n, k, t, np.random.default_rng([17, d]))
                sums = np.array([table[tuple(np.flatnonzero(h))].sum() for h in ms.hidden])
                est[d] = mask_values(sums, ms, spec).mean()
            var[scheme] = est.var(ddof=1)
            se = math.sqrt(var[scheme] / args.draws)
            print(
                f"| {k} | {t} | {exact:.4f} | {ec:.4f} | {scheme} | {est.mean():.4f} +- {se:.4f} | "
                f"{var[scheme]:.4f} | {var[scheme] / var['independent']:.2f} |"
            )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("score")
    s.add_argument("--preset", default="standard")
    s.add_argument("--scheme", default=None)
    s.add_argument("--weighting", default=None)
    s.add_argument("--masks", "-K", type=int, default=None)
    s.add_argument("--rates", "-T", type=int, default=None)
    s.add_argument("--config", default="marginal")
    s.add_argument("--docs", type=int, default=50)
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--out", required=True)
    c = sub.add_parser("compare")
    c.add_argument("--out", required=True)
    ti = sub.add_parser("tiny")
    ti.add_argument("--text", default="the cat sat on the mat in the house")
    ti.add_argument("--draws", type=int, default=1500)
    args = p.parse_args()
    {"score": score, "compare": compare, "tiny": tiny}[args.cmd](args)


if __name__ == "__main__":
    main()
