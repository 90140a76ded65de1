"""Variance of every DiffScore estimator option against the paper's estimator at equal forward passes.

    .venv/bin/python benchmarks/bench_estimator_variance.py --quick      # 8 + 8 texts of 7-8 tokens, 60 reps
    .venv/bin/python benchmarks/bench_estimator_variance.py              # the issue's 40 + 40 texts, 200 reps
    .venv/bin/python benchmarks/bench_estimator_variance.py --direct     # real-length sentences, scored directly

Default (exact tables): texts of 7 to ``--max-tokens`` (9) tokens, ``--items`` SummEval sentences (the first such sentence of a candidate
of each document) and as many sentences of the held-out split of the default model's corpus; for each text the
default model scores *every* mask pattern once (``2^L - 1`` forward rows, DiffScore ``marginal``), so the exact
expectation of the paper's estimator is known and every estimator option can be drawn ``--reps`` times per text
at K = 4, 8 and 16 masks (T = 10, MLP or ``--weighting``) with no further model calls, reading each mask's
log-probabilities off the table exactly as :class:`~dlmeval.scoring.DiffScorer` combines them. Printed per K and
option: the forward passes spent (distinct rows per estimate), the variance ratio to the paper's estimator
(``independent``; sum over texts of the per-text variance over replicates, over the paper's), the bias against the
exact expectation (mean over texts of ``(mean of replicates - exact) / its se``, and the largest ``|z|``), and the
agreement with a 256-pass reference (the paper's estimator at K = 256, one draw per text): the mean over
replicates of the Spearman correlation across texts. ``--direct``: SummEval and held-out first sentences of 8-25
words scored through ``DiffScorer`` itself, ``--reps`` replicates per option and K (costly: a forward pass per
mask). The last line is ``default/paper variance ratio at 8 passes: X``.
"""

from __future__ import annotations

import argparse
import itertools
import re
import sys
import time
from pathlib import Path

import numpy as np
from scipy.stats import spearmanr

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from dlmeval.data.bartscore import load_bartscore  # noqa: E402
from dlmeval.data.corpus import load_corpus  # noqa: E402
from dlmeval.scoring import DiffScorer, EstimatorSpec  # noqa: E402
from dlmeval.scoring.core import MaskedRow, score_rows  # noqa: E402
from dlmeval.scoring.masks import make_masks, rate_grid  # noqa: E402
from dlmeval.scoring.names import SCHEMES  # noqa: E402
from dlmeval.scoring.spec import mask_values  # noqa: E402
from dlmeval.seeding import numpy_rng  # noqa: E402

OPTIONS = (
    "independent",
    "balanced",
    "reuse",
    "stratified",
    "antithetic",
    "control",
    "importance",
    "combined",
)
PASSES = (4, 8, 16)
T = 10


def _sentences(text: str) -> list[str]:
    return re.split(r"(?<=[.!?])\s", " ".join(text.split()))


def texts(n: int, fits) -> list[tuple[str, str]]:
    """n SummEval sentences (the first of each document's candidates that ``fits``) and n held-out sentences."""
    out: list[tuple[str, str]] = []
    seen: set[str] = set()
    df = load_bartscore("SummEval")
    for _, g in df.groupby("doc_id", sort=True):
        s = next((s for c in g["candidate"] for s in _sentences(c) if s not in seen and fits(s)), None)
        if s and len(out) < n:
            seen.add(s)
            out.append(("summeval", s))
    for doc in load_corpus(split="heldout"):
        s = next((s for s in _sentences(doc) if s not in seen and fits(s)), None)
        if s and len(out) < 2 * n:
            seen.add(s)
            out.append(("heldout", s))
    return out


# ------------------------------------------------------------------------------------------------- exact tables
def pattern_table(scorer: DiffScorer, text: str) -> tuple[dict[tuple[int, ...], np.ndarray], int]:
    """{hidden positions: log p of each hidden token} for every non-empty mask pattern of ``text`` (marginal)."""
    layout = scorer.formatter.layout("marginal", text, None)
    a, b = layout.span("candidate")
    n = b - a
    pats = [s for r in range(1, n + 1) for s in itertools.combinations(range(n), r)]
    rows = [MaskedRow(layout.ids, a + np.asarray(s)) for s in pats]
    lps = [
        lp for b in score_rows(scorer.model, rows, batch_size=128) for lp in b.logprob
    ]  # equal lengths: in order
    return dict(zip(pats, lps, strict=True)), n


def exact_paper(table, n: int, weighting: str) -> float:
    """The paper's expectation: rates t_k = k/T with weight 1/T, Bernoulli(t_k) masks, an empty draw one uniform
    token (MLP) or the empty sum 0 (ELBO)."""
    total = 0.0
    for t in rate_grid(T):
        p_empty = (1 - t) ** n
        for s, lp in table.items():
            p = t ** len(s) * (1 - t) ** (n - len(s))
            if weighting == "mlp":
                total += (p + (p_empty / n if len(s) == 1 else 0.0)) * lp.mean() / T
            else:
                total += p * lp.sum() / t / (n if weighting == "elbo_norm" else 1) / T
    return total


def draw(table, n: int, scheme: str, k: int, weighting: str, rng) -> tuple[float, int]:
    """One estimate read off the table, as DiffScorer computes it, and its forward passes (distinct rows)."""
    spec = EstimatorSpec(k, T, scheme, weighting)
    ms = make_masks(scheme, n, k, T, rng)
    pats = [tuple(np.flatnonzero(h)) for h in ms.hidden]
    sums = np.array([table[p].sum() for p in pats])
    full = table[tuple(range(n))] if ms.control is not None else None
    return float(ms.weights() @ mask_values(sums, ms, spec, full)), len(set(pats))


def run_tables(a, model) -> dict:
    scorer = DiffScorer(model)

    def fits(s: str) -> bool:
        return 7 <= scorer.formatter.layout("marginal", s, None).n_tokens("candidate") <= a.max_tokens

    its = texts(a.items, fits)
    t0 = time.perf_counter()
    tables = [pattern_table(scorer, s) for _, s in its]
    rows = sum(len(tb) for tb, _ in tables)
    lengths = [n for _, n in tables]
    print(
        f"{sum(w == 'summeval' for w, _ in its)} SummEval + {sum(w == 'heldout' for w, _ in its)} held-out "
        f"sentences of {min(lengths)}-{max(lengths)} tokens (mean {np.mean(lengths):.1f}); every pattern scored: "
        f"{rows} rows in {time.perf_counter() - t0:.0f} s; marginal, {a.weighting}, T={T}, {a.reps} replicates"
    )
    exact = np.array([exact_paper(tb, n, a.weighting) for tb, n in tables])
    ref = np.array(
        [
            draw(tb, n, "independent", 256, a.weighting, numpy_rng(a.seed, "ref", i))[0]
            for i, (tb, n) in enumerate(tables)
        ]
    )
    print(f"256-pass reference (paper's estimator) vs exact: Spearman {spearmanr(ref, exact).statistic:.4f}")
    out = {}
    for k in PASSES:
        for opt in a.options:
            est = np.empty((len(tables), a.reps))
            passes = np.empty_like(est)
            for i, (tb, n) in enumerate(tables):
                for r in range(a.reps):
                    est[i, r], passes[i, r] = draw(
                        tb, n, opt, k, a.weighting, numpy_rng(a.seed, opt, k, i, r)
                    )
            z = (est.mean(axis=1) - exact) / (est.std(axis=1, ddof=1) / np.sqrt(a.reps))
            rho = np.mean([spearmanr(est[:, r], ref).statistic for r in range(a.reps)])
            out[opt, k] = (est, passes.mean(), z, rho)
    return out


# ------------------------------------------------------------------------------------------------- direct
def run_direct(a, model) -> dict:
    its = texts(a.items, lambda s: 8 <= len(s.split()) <= 25)
    txt = [s for _, s in its]
    lengths = [DiffScorer(model).formatter.layout("marginal", s, None).n_tokens("candidate") for s in txt]
    print(
        f"{len(txt)} first sentences of 8-25 words, {np.mean(lengths):.1f} tokens (range {min(lengths)}-"
        f"{max(lengths)}); scored directly; marginal, {a.weighting}, T={T}, {a.reps} replicates"
    )

    def reps(scheme: str, k: int, n_reps: int) -> tuple[np.ndarray, float]:
        scorer = DiffScorer.from_spec(model, EstimatorSpec(k, T, scheme, a.weighting), seed=a.seed)
        ids = [f"{i}/{r}" for i in range(len(txt)) for r in range(n_reps)]
        df = scorer.score([s for s in txt for _ in range(n_reps)], config="marginal", item_ids=ids)
        return df["score"].to_numpy().reshape(len(txt), n_reps), scorer.rows_scored / (len(txt) * n_reps)

    ref = reps("independent", a.ref, 1)[0][:, 0]
    out = {}
    for k in PASSES:
        for opt in a.options:
            est, passes = reps(opt, k, a.reps)
            z = (est.mean(axis=1) - ref) / np.sqrt(est.var(axis=1, ddof=1) / a.reps)
            rho = np.mean([spearmanr(est[:, r], ref).statistic for r in range(a.reps)])
            out[opt, k] = (est, passes, z, rho)
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="8 + 8 texts of at most 8 tokens, 60 replicates")
    p.add_argument("--direct", action="store_true", help="real-length sentences scored through DiffScorer")
    p.add_argument("--items", type=int, default=40, help="SummEval sentences, and as many held-out sentences")
    p.add_argument("--reps", type=int, default=200)
    p.add_argument("--ref", type=int, default=256, help="passes of the reference (the paper's estimator)")
    p.add_argument(
        "--max-tokens", type=int, default=9, help="longest text of the exact tables (2^L - 1 rows)"
    )
    p.add_argument("--weighting", default="mlp")
    p.add_argument("--options", nargs="+", default=list(OPTIONS), choices=SCHEMES)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=1)
    a = p.parse_args(argv)
    if a.quick:
        a.items, a.reps, a.max_tokens = 8, 60, 8
    import torch

    from dlmeval.models import load_diffusion

    torch.set_num_threads(a.threads)
    t0 = time.perf_counter()
    model = load_diffusion("default", device="cpu")
    res = (run_direct if a.direct else run_tables)(a, model)
    ref_what = "256-pass reference" if not a.direct else f"{a.ref}-pass reference"
    bias_what = "exact" if not a.direct else "reference"
    print(
        f"\n| option | K | passes | variance / paper's | mean z vs {bias_what} | max abs z | Spearman with {ref_what} |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|")
    default = EstimatorSpec().scheme
    ratio8 = None
    for k in PASSES:
        pv = res["independent", k][0].var(axis=1, ddof=1).sum() if ("independent", k) in res else np.nan
        for opt in a.options:
            est, passes, z, rho = res[opt, k]
            r = est.var(axis=1, ddof=1).sum() / pv
            label = opt + (" (paper)" if opt == "independent" else " (default)" if opt == default else "")
            print(
                f"| {label} | {k} | {passes:.2f} | {r:.3f} | {np.mean(z):+.2f} | {np.max(np.abs(z)):.2f} | {rho:.3f} |"
            )
            if opt == default and k == 8:
                ratio8 = r
    print(f"\ntotal {time.perf_counter() - t0:.0f} s")
    if ratio8 is not None:
        print(f"default/paper variance ratio at 8 passes: {ratio8:.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
