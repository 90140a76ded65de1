"""`dlmeval demo`: the main job on the embedded default models, end to end (about 600 s of CPU; README).

Steps (each stored in the run store, each printed with its run signature):

1. load the default diffusion LM and the default AR model and print their identities;
2. DiffScore vs AR likelihood on a handful of sentences and their word-shuffled copies;
3. further pillar stages registered in :data:`STAGES` (meta-evaluation, Care sweep, robustness), each small;
4. an HTML report of everything the demo just ran.
"""

from __future__ import annotations

import contextlib
import time
from pathlib import Path

from dlmeval.cli.common import emit, model_kwargs
from dlmeval.cli.options import add_runtime_group

SENTENCES = [
    "The committee approved the new budget after a long debate on Tuesday.",
    "She opened the window because the room was too warm.",
    "Heavy rain caused flooding in several towns along the river.",
    "The children played football in the park until it got dark.",
    "Scientists found that the drug reduced symptoms in most patients.",
    "He forgot his keys at the office and had to go back.",
]


def register(sub) -> None:
    p = sub.add_parser(
        "demo", help="run the main job on the embedded default models", description=__doc__.split("\n\n")[0]
    )
    p.add_argument(
        "--out", default="demo-output", help="directory for tables and the report (default: demo-output)"
    )
    p.add_argument(
        "--quick", action="store_true", help="only load the models and score the example sentences"
    )
    p.add_argument("--dlm", default="default", help="diffusion model spec (default: default)")
    p.add_argument("--ar", default="default-ar", help="autoregressive model spec (default: default-ar)")
    add_runtime_group(p)
    p.set_defaults(func=run)


def _shuffle(text: str, seed: int, item: str) -> str:
    from dlmeval.seeding import numpy_rng

    words = text.rstrip(".").split()
    rng = numpy_rng(seed, "demo-shuffle", item)
    for _ in range(10):
        perm = rng.permutation(len(words))
        if list(perm) != list(range(len(words))):
            break
    return " ".join(words[i] for i in perm) + "."


def sentence_stage(dlm, ar, store, seed: int, log) -> dict:
    """DiffScore (marginal) and AR mean log-prob on sentences and shuffled copies; stored as one run."""
    import numpy as np

    from dlmeval.scoring import DiffScorer

    scorer = DiffScorer.fast(dlm, seed=seed)
    items = []
    for i, s in enumerate(SENTENCES):
        items.append((f"s{i}", s, "original"))
        items.append((f"s{i}-shuffled", _shuffle(s, seed, f"s{i}"), "shuffled"))
    config = {"stage": "sentences", "diffscore": scorer.run_config("marginal"), "ar": "mean token log-prob"}
    run = store.open_run("demo", config, [dlm.identity(), ar.identity()], seed=seed)
    from dlmeval.parallel import Chunk, work_loop

    def compute(c: Chunk) -> list[dict]:
        df = scorer.score([t for _, t, _ in c.items], config="marginal", item_ids=list(c.keys))
        ar_lp = ar.continuation_logprobs([""] * len(c.items), [t for _, t, _ in c.items])
        return [
            {"text": t, "variant": v, "diffscore": float(s), "ar_mean_logprob": float(np.mean(a))}
            for (_, t, v), s, a in zip(c.items, df["score"], ar_lp)
        ]

    # one chunk: the sentences are scored together, so a rerun recomputes exactly that batch
    work_loop(run, [Chunk(tuple(k for k, _, _ in items), items)], compute)
    res = run.items()
    wins_d = wins_a = 0
    for i in range(len(SENTENCES)):
        o, s = res[res["key"] == f"s{i}"].iloc[0], res[res["key"] == f"s{i}-shuffled"].iloc[0]
        wins_d += int(o["diffscore"] > s["diffscore"])
        wins_a += int(o["ar_mean_logprob"] > s["ar_mean_logprob"])
    summary = {
        "sentences": len(SENTENCES),
        "diffscore_prefers_original": wins_d,
        "ar_prefers_original": wins_a,
    }
    import pandas as pd

    run.put_table("shuffle_test", pd.DataFrame([summary]))
    run.finish()
    log(
        f"  DiffScore (marginal, fast) ranks the original above its shuffle for {wins_d}/{len(SENTENCES)} "
        f"sentences; AR likelihood for {wins_a}/{len(SENTENCES)}"
    )
    log(f"  signature: {run.signature.short()}")
    return {"run_id": run.run_id, "signature": run.signature.short(), **summary}


# Readable settings on the default model, from benchmarks/bench_sample_readability.py's grid (MODEL.md "Readable
# samples"): semi-autoregressive blocks of 4 at temperature 1 with nucleus 0.8 left no token 4 times in a row in 24
# webtext continuations at either of two seeds (longest runs 2 and 3; Distinct-2 0.84 / 0.86). Greedy decoding
# repeats phrases; one block, blocks of 8, nucleus 0.9 or 0.95, or temperature 0.8 leave runs of "." (4 to 32 long).
DEMO_SAMPLE = {"strategy": "none", "temperature": 1.0, "top_p": 0.8, "block_length": 4, "length": 32}
DEMO_PROMPTS = [
    "The city council met on Monday to discuss",
    "Scientists at the university have found that",
    "After the game, the coach told reporters that",
]


def sample_stage(dlm, store, seed: int, log) -> dict:
    """A few continuations from the default model with :data:`DEMO_SAMPLE`, stored as a ``sample`` run."""
    from dlmeval.metrics.diversity import distinct_n
    from dlmeval.protocols.sample import run_config, sample_prompts, store_samples
    from dlmeval.sampling import RemaskingSampler, SamplerConfig

    cfg = SamplerConfig(steps=DEMO_SAMPLE["length"], seed=seed, **DEMO_SAMPLE)
    got = sample_prompts(RemaskingSampler(dlm, cfg), DEMO_PROMPTS, [str(i) for i in range(len(DEMO_PROMPTS))])
    records = [{**r, "prompt": p} for r, p in zip(got.records, DEMO_PROMPTS)]
    run = store_samples(store, records, run_config(got, DEMO_PROMPTS), dlm, seed, command_line="dlmeval demo")
    for r, p in zip(got.records, DEMO_PROMPTS):
        log(f"  {p} ... {r['text']}  [nfe {r['nfe']}]")
    d2 = distinct_n([r["text"] for r in got.records], 2)
    run_max = max(longest_run(r["token_ids"]) for r in got.records)
    settings = ", ".join(f"{k} {v}" for k, v in DEMO_SAMPLE.items())
    log(
        f"  ({settings}; Distinct-2 {d2:.2f}, longest run of one token {run_max}; a 22M-parameter model: fluent "
        "locally, not coherent)"
    )
    log(f"  signature: {run.signature.short()}")
    return {
        "run_id": run.run_id,
        "signature": run.signature.short(),
        "distinct_2": d2,
        "longest_run": run_max,
    }


def longest_run(ids) -> int:
    """The longest run of one token id back to back (readable samples have none of 4 or more: #36)."""
    best = cur = 1 if len(ids) else 0
    for a, b in zip(ids, ids[1:]):
        cur = cur + 1 if a == b else 1
        best = max(best, cur)
    return best


# the shipped specs the demo's pillar stages run (tests swap in the tiny ones: tiny models have 128-token windows)
CARE_SPEC = "care-mini"
ROBUST_SPEC = "robust-mini"
# the meta-evaluation stage: one real benchmark, enough outputs for a bootstrap CI of a correlation (about +-0.14
# at n = 200), DiffScore beside the reference-based baselines on the very same outputs
META_BENCHMARK = "SFHOT"
META_LIMIT = 200
META_FAMILIES = ("diffscore", "lexical", "embedding")
# the rows the headline compares: DiffScore as the paper maps it, ROUGE-L F1 and BERTScore-F
META_HEADLINE = ("diffscore:mapped", "rougeL", "bertscore_f")
# the command that runs each pillar at the paper's scale (one sentence in the verdict when the embedded models
# are too small to show the paper's finding)
PAPER_COMMANDS = {
    "meta-eval": "dlmeval meta-eval --dlm llada:PATH --trust-remote-code",
    "care": "dlmeval care care-paper",
    "robust": "dlmeval robust robust-paper",
}


def _runner_kwargs(args) -> dict:
    """The model settings (``--trust-remote-code`` included) and progress bars for a protocol runner."""
    return {
        **model_kwargs(args),
        "command_line": "dlmeval demo",
        "progress": not (args.json or args.no_progress),
    }


def ci_text(value: float, lo: float, hi: float) -> str:
    """``0.25 [0.02, 0.45]``."""
    return f"{value:+.3f} [{lo:+.3f}, {hi:+.3f}]"


def excludes_zero(lo: float, hi: float) -> bool:
    """Whether a CI lies wholly on one side of zero (NaN bounds: no)."""
    return bool(lo > 0 or hi < 0)


def correlation_verdict(
    label: str, value: float, lo: float, hi: float, best_baseline: tuple[str, float]
) -> str:
    """The meta-evaluation verdict: the sign DiffScore's CI supports, and how it stands against the best baseline
    on the same items (the paper: DiffScore correlates positively, and better than ROUGE / BERTScore)."""
    name, b = best_baseline
    if lo > 0:
        sign = "positive (its 95% CI excludes zero)"
    elif hi < 0:
        sign = "negative (its 95% CI excludes zero: the opposite of the paper's sign)"
    else:
        sign = "not distinguishable from zero (its 95% CI includes zero)"
    rel = "above" if value > b else "below"
    return f"{label}'s correlation with the human judgments is {sign}, and {rel} {name} ({b:+.3f}) on the same items"


def meta_eval_stage(dlm, ar, store, args, out: Path, log) -> dict:
    """DiffScore-Fast, ROUGE and BERTScore-style against the human judgments of one real benchmark
    (:data:`META_BENCHMARK`, its first :data:`META_LIMIT` outputs), each correlation with its bootstrap CI."""
    from dlmeval.protocols.diffscore.meta_eval import SuiteOptions, run_suite

    opts = SuiteOptions(
        benchmarks=(META_BENCHMARK,),
        limit=META_LIMIT,
        families=META_FAMILIES,
        dlm=args.dlm,
        ar=args.ar,
        fast=True,
        bootstrap=1000,
        device=args.device,
        dtype=args.dtype,
        trust_remote_code=args.trust_remote_code,
        seed=args.seed,
        progress=not (args.json or args.no_progress),
    )
    rep = run_suite(
        opts,
        store,
        out_dir=out / "meta-eval",
        command_line="dlmeval demo",
        models={args.dlm: dlm, args.ar: ar},
    )
    headline = meta_headline(rep.results)
    for line in headline["lines"]:
        log(line)
    log(f"  signature: {rep.run.signature.short()}")
    return {
        "run_id": rep.run.run_id,
        "signature": rep.run.signature.short(),
        "run_ids": list(rep.components.values()),
        **{k: v for k, v in headline.items() if k != "lines"},
    }


def meta_headline(results) -> dict:
    """The stage's headline from the suite's result rows: per headline metric its Spearman correlation and CI on
    the benchmark's first dimension, the other dimensions in brief, and the verdict line."""
    import math

    res = results[results["primary"] & results["value"].notna()] if len(results) else results
    if not len(res):
        return {"lines": ["  no correlations: the benchmark gave no rows"], "verdict": "no result"}
    dims = list(dict.fromkeys(res["dimension"]))
    dim = dims[0]
    rows = {r["metric"]: r for _, r in res[res["dimension"] == dim].iterrows()}
    n = int(next(iter(rows.values()))["n"])
    proto = next(iter(rows.values()))["protocol"]
    lines = [
        f"  {META_BENCHMARK} {dim}, {n} outputs: {proto} correlation with the human scores [95% bootstrap CI]"
    ]
    got = {}
    for metric in META_HEADLINE:
        r = rows.get(metric)
        if r is None:
            continue
        got[metric] = (r["label"], float(r["value"]), float(r["ci_lo"]), float(r["ci_hi"]))
        lines.append(f"    {r['label'][:60]:<60} {ci_text(*got[metric][1:])}")
    others = [d for d in dims[1:]]
    if "diffscore:mapped" in got and others:
        brief = []
        for d in others:
            sub = res[(res["dimension"] == d) & (res["metric"].isin(META_HEADLINE))].set_index("metric")[
                "value"
            ]
            brief.append(
                f"{d} " + " / ".join(f"{float(sub[m]):+.2f}" for m in META_HEADLINE if m in sub.index)
            )
        lines.append(f"    other dimensions (same order): {'; '.join(brief)}")
    out: dict = {"benchmark": META_BENCHMARK, "dimension": dim, "n": n}
    if "diffscore:mapped" not in got:
        out["verdict"] = "DiffScore gave no correlation on these items"
        lines.append(f"  verdict: {out['verdict']}")
        out["lines"] = lines
        return out
    label, v, lo, hi = got["diffscore:mapped"]
    base = [(lab.split(" [")[0], val) for m, (lab, val, _, _) in got.items() if m != "diffscore:mapped"]
    best = max(base, key=lambda t: t[1]) if base else ("no baseline", math.nan)
    out.update(diffscore=v, ci_lo=lo, ci_hi=hi, ci_excludes_zero=excludes_zero(lo, hi))
    out["verdict"] = correlation_verdict("DiffScore", v, lo, hi, best)
    lines.append(f"  verdict: {out['verdict']}.")
    if not (lo > 0 and v > best[1]):
        lines.append(
            "  The embedded 22M-parameter model is too small to show the paper's finding (DiffScore above the "
            f"baselines, with 7-8B diffusion models): `{PAPER_COMMANDS['meta-eval']}` runs it at the paper's scale."
        )
    out["lines"] = lines
    return out


def care_stage(dlm, ar, store, args, out: Path, log) -> dict:
    """The Care protocol on the shipped ``care-mini`` spec: the headline pair at nominal steps and at an equal
    actual-NFE budget, paired by seed."""
    from dlmeval.protocols.care import load_spec, run_care

    spec = load_spec(CARE_SPEC).replace(models=(args.dlm,), evaluator=args.ar)
    res = run_care(
        spec, store, out_dir=out / "care", models={args.dlm: dlm, args.ar: ar}, **_runner_kwargs(args)
    )
    model_run = res.model_runs.get(args.dlm)
    cells = store.get_run(model_run).items() if model_run else None
    headline = care_headline(cells, spec, res.tables.get("compute_matched"))
    for line in headline["lines"]:
        log(line)
    log(f"  signature: {res.signature}")
    return {
        "run_id": res.sweep_run,
        "signature": res.signature,
        "run_ids": list(res.model_runs.values()),
        **{k: v for k, v in headline.items() if k != "lines"},
    }


def _cells(items):
    """The cell records of a Care model run (one per strategy x budget x temperature x seed)."""
    if items is None or "key" not in items.columns:
        return None
    c = items[items["key"].astype(str).str.startswith("cell/")]
    need = {"strategy", "seed", "mauve", "nfe"}
    return c if len(c) and need <= set(c.columns) else None


def care_headline(items, spec, matched_table=None) -> dict:
    """MAUVE of the headline pair at the spec's nominal steps (the sweep: the strategy spends more passes) and at
    an equal actual-NFE budget (``[compute_matched]``: each strategy's cell at the nominal steps that spend the
    budget, as the protocol's ``compute_matched`` table resolved them; a cell provably the same as a sweep cell is
    stored once, under its nominal steps), each a paired t-test over the seeds; and the verdict on Care's
    reversal."""
    import numpy as np
    import pandas as pd

    from dlmeval.stats import paired_ttest

    h = spec.headline
    lines: list[str] = []
    out: dict = {"baseline": h.baseline, "strategy": h.strategy}
    cells = _cells(items)
    budgets = list(spec.compute_matched.nfe)
    if cells is None or not budgets:
        out["verdict"] = "no compute-matched cells"
        return {**out, "lines": [f"  verdict: {out['verdict']}"]}
    budget = budgets[0]
    temp, temp_m = spec.headline_temperature, spec.compute_matched.temperatures[0]
    src = spec.generation.sources[0] if spec.generation.sources else None

    def sel(temperature: float, *, steps: float | None = None, nfe: float | None = None):
        """Sweep cells (the sweep's remask fraction: dose-response cells left out) at ``steps`` nominal steps,
        or compute-matched cells at ``nfe`` actual passes."""
        c = cells[np.isclose(cells["temperature"].astype(float), temperature)]
        if src is not None and "source" in c.columns:
            c = c[c["source"].isna() | (c["source"] == src)]
        if "fraction" in c.columns:
            f = c["fraction"].astype(float)
            c = c[f.isna() | np.isclose(f.fillna(-1), spec.sweep.remask_fraction)]
        budget_col = c["nfe_budget"].astype(float) if "nfe_budget" in c.columns else c["seed"] * np.nan
        if nfe is None:
            return c[budget_col.isna() & np.isclose(c["steps"].astype(float).fillna(-1), steps)]
        return c[np.isclose(budget_col.fillna(-1), nfe)]

    def at_budget(strategy: str):
        """The strategy's cells that spend the budget: stored under the budget, or under the nominal steps the
        compute_matched table resolved it to."""
        got = [sel(temp_m, nfe=budget)]
        if matched_table is not None and len(matched_table):
            m = matched_table[
                (matched_table["strategy"] == strategy)
                & np.isclose(matched_table["nfe_budget"].astype(float), budget)
                & np.isclose(matched_table["temperature"].astype(float), temp_m)
            ]
            if len(m):
                got.append(sel(temp_m, steps=float(m["steps"].iloc[0])))
        elif strategy == h.baseline:
            got.append(sel(temp_m, steps=budget))  # the baseline decodes one token per pass
        c = pd.concat(got)
        return c[c["strategy"] == strategy]

    nominal = sel(temp, steps=spec.headline_steps)
    base_matched, strat_matched = at_budget(h.baseline), at_budget(h.strategy)

    def pair(a_rows, b_rows):
        a = a_rows[a_rows["strategy"] == h.baseline].drop_duplicates("seed").set_index("seed")
        b = b_rows[b_rows["strategy"] == h.strategy].drop_duplicates("seed").set_index("seed")
        seeds = sorted(set(a.index) & set(b.index))
        return a.loc[seeds], b.loc[seeds], seeds

    def compare(name, a, b, seeds) -> dict | None:
        if len(seeds) < 2:
            return None
        t = paired_ttest(b["mauve"].to_numpy(float), a["mauve"].to_numpy(float))
        row = {
            "mauve_baseline": float(a["mauve"].mean()),
            "mauve_strategy": float(b["mauve"].mean()),
            "nfe_baseline": float(a["nfe"].mean()),
            "nfe_strategy": float(b["nfe"].mean()),
            "diff": t.mean_diff,
            "p": t.p,
            "n_seeds": len(seeds),
        }
        lines.append(
            f"  {name}: MAUVE {h.baseline} {row['mauve_baseline']:.3f} ({row['nfe_baseline']:.1f} passes) vs "
            f"{h.strategy} {row['mauve_strategy']:.3f} ({row['nfe_strategy']:.1f} passes); "
            f"{h.strategy} - {h.baseline} = {row['diff']:+.3f} +- {t.se:.3f}, paired t-test over "
            f"{len(seeds)} seeds p = {row['p']:.3g}"
        )
        return row

    n_prompts = spec.generation.n_prompts
    lines.append(f"  {n_prompts} prompts per cell, seeds paired, unmask temperature {temp}:")
    nom = compare(f"at {spec.headline_steps} nominal steps", *pair(nominal, nominal))
    mat = compare(f"at {budget} actual passes (compute-matched)", *pair(base_matched, strat_matched))
    out.update(nominal=nom, matched=mat, alpha=0.05)
    if nom is None or mat is None:
        out["verdict"] = "too few seeds for a paired test"
    else:
        sig_n, sig_m = nom["p"] < 0.05, mat["p"] < 0.05
        better_n, worse_m = nom["diff"] > 0, mat["diff"] < 0
        if sig_n and sig_m and better_n and worse_m:
            out["verdict"] = (
                f"the compute-matched reversal is shown: {h.strategy} beats {h.baseline} at equal nominal steps "
                f"and loses to it at equal actual passes (both p < 0.05)"
            )
        elif sig_m:
            out["verdict"] = (
                f"at equal actual passes {h.strategy} is {'worse' if worse_m else 'better'} than {h.baseline} "
                f"(p = {mat['p']:.3g}); at equal nominal steps the difference is "
                f"{'significant' if sig_n else 'not significant'} (p = {nom['p']:.3g})"
            )
        else:
            out["verdict"] = (
                f"no significant difference at equal actual passes (p = {mat['p']:.3g}) nor at equal nominal "
                f"steps (p = {nom['p']:.3g}): no reversal can be claimed"
            )
    lines.append(f"  verdict: {out['verdict']}.")
    if out["verdict"].startswith("the compute-matched reversal") is False:
        lines.append(
            f"  {n_prompts} generations per cell from a 22M-parameter model are too few to show the paper's "
            f"effect: `{PAPER_COMMANDS['care']}` runs it at the paper's scale."
        )
    out["lines"] = lines
    return out


def robust_stage(dlm, ar, store, args, out: Path, log) -> dict:
    """The robustness protocol on the shipped ``robust-mini`` spec: a task the embedded models answer above chance,
    clean and perturbed, with RDI and the DLM's advantage over the AR model with its bootstrap CI."""
    from dlmeval.protocols.robust import PairSpec, load_spec, run_robust

    spec = load_spec(ROBUST_SPEC)
    spec = spec.replace(pairs=(PairSpec(args.dlm, args.ar, label=f"{args.dlm} vs {args.ar}"),))
    res = run_robust(
        spec,
        store,
        out_dir=out / "robust",
        models={args.dlm: dlm, args.ar: ar},
        **_runner_kwargs(args),
    )
    headline = robust_headline(res.tables)
    for line in headline["lines"]:
        log(line)
    log(f"  signature: {res.signature}")
    return {
        "run_id": res.spec_run,
        "signature": res.signature,
        "run_ids": list(res.model_runs.values()),
        **{k: v for k, v in headline.items() if k != "lines"},
    }


def robust_headline(tables: dict) -> dict:
    """Clean accuracy against chance per model, mean RDI, and the DLM's mean RDI advantage with its CI and the
    Wilcoxon test, on the spec's first task and mode; and the verdict."""
    lines: list[str] = []
    guard, summ, comp = (tables.get(k) for k in ("guard", "summary", "comparison"))
    if summ is None or not len(summ):
        return {"lines": ["  verdict: no robustness summary"], "verdict": "no robustness summary"}
    first = summ.iloc[0]
    task, mode = first["task"], first["mode"]
    out: dict = {"task": task, "mode": mode}
    for _, r in summ[(summ["task"] == task) & (summ["mode"] == mode)].iterrows():
        g = None
        if guard is not None and len(guard):
            gm = guard[(guard["task"] == task) & (guard["mode"] == mode) & (guard["model"] == r["model"])]
            g = gm.iloc[0] if len(gm) else None
        chance = (
            f" (chance {g['chance']:.2f}, binomial p = {g['p_value']:.2g}, n = {int(g['n'])})"
            if g is not None
            else ""
        )
        lines.append(
            f"  {task} ({mode}) {r['role'].upper()} {r['model']}: clean accuracy {r['acc_clean']:.3f}{chance}; "
            f"perturbed {r['acc_r']:.3f}; mean RDI {r['mean_rdi']:.3f}"
        )
        out[f"acc_clean_{r['role']}"] = float(r["acc_clean"])
        out[f"mean_rdi_{r['role']}"] = float(r["mean_rdi"])
        out[f"above_chance_{r['role']}"] = bool(r["above_chance"])
    c = None
    if comp is not None and len(comp):
        cm = comp[(comp["task"] == task) & (comp["mode"] == mode)]
        c = cm.iloc[0] if len(cm) else None
    if c is not None and bool(c.get("meaningful", False)):
        lines.append(
            f"  DLM - AR mean RDI advantage over {int(c['n_conditions'])} conditions "
            f"{ci_text(c['mean_adv'], c['ci_lo'], c['ci_hi'])}, Wilcoxon p = {c['wilcoxon_p']:.3g}"
        )
        out.update(
            mean_adv=float(c["mean_adv"]),
            ci_lo=float(c["ci_lo"]),
            ci_hi=float(c["ci_hi"]),
            wilcoxon_p=float(c["wilcoxon_p"]),
        )
        side = "less" if c["ci_lo"] > 0 else "more"
        if excludes_zero(c["ci_lo"], c["ci_hi"]) and c["wilcoxon_p"] < 0.05:
            out["verdict"] = (
                f"the diffusion LM degrades {side} than the AR model under noise (the CI excludes zero and the "
                f"Wilcoxon test agrees, p = {c['wilcoxon_p']:.3g})"
            )
        elif excludes_zero(c["ci_lo"], c["ci_hi"]):
            out["verdict"] = (
                f"weak evidence that the diffusion LM degrades {side} than the AR model: the bootstrap CI excludes "
                f"zero, the Wilcoxon test over {int(c['n_conditions'])} conditions does not (p = {c['wilcoxon_p']:.3g})"
            )
        else:
            out["verdict"] = "no robustness difference between the two models (the CI includes zero)"
    else:
        why = c["note"] if c is not None and c.get("note") else "no comparison"
        out["verdict"] = f"RDI is not meaningful here: {why}"
    lines.append(f"  verdict: {out['verdict']}.")
    if not out["verdict"].startswith("the diffusion LM degrades less"):  # the paper's finding, shown
        lines.append(
            "  The embedded models are too small to show the paper's finding (7-8B diffusion LMs more robust than "
            f"their AR peers): `{PAPER_COMMANDS['robust']}` runs it at the paper's scale."
        )
    out["lines"] = lines
    return out


# Pillar stages after the sentence stage: (title, callable(dlm, ar, store, args, out_dir, log) -> dict).
STAGES: list[tuple[str, object]] = [
    (
        "meta-evaluation: DiffScore-Fast, ROUGE and BERTScore-style vs human judgments (SFHOT)",
        meta_eval_stage,
    ),
    (
        "Care: remasking vs none at equal nominal steps and at equal actual passes (care-mini spec)",
        care_stage,
    ),
    ("robustness: default DLM vs default AR under character and word noise (robust-mini spec)", robust_stage),
]


@contextlib.contextmanager
def _timed(log):
    """Times a stage: wall seconds and CPU seconds of this process (all its threads), printed after it."""
    took: dict[str, float] = {}
    w0, c0 = time.perf_counter(), time.process_time()
    yield took
    took.update(wall_s=round(time.perf_counter() - w0, 1), cpu_s=round(time.process_time() - c0, 1))
    log(f"  took {took['wall_s']} s wall, {took['cpu_s']} s CPU")


def check_demo_data() -> None:
    """Stop in one line, before any model loads, when the data directory lacks a file the pillar stages read."""
    from dlmeval.data import catalog
    from dlmeval.data.fetch import status
    from dlmeval.data.paths import data_dir
    from dlmeval.errors import InputError

    try:
        root = data_dir()
    except InputError:
        root = None
    missing = [f for f in catalog.resolve(["demo"]) if status(f, root) == "missing"]
    if missing:
        mb = sum(f.size for f in missing) / 1e6
        where = f"{root} lacks" if root is not None else "no data directory holds"
        raise InputError(
            f"the demo reads public data sets and {where} {', '.join(f.name for f in missing)}: run "
            f"`dlmeval data fetch demo` (downloads {mb:.1f} MB from their sources), set DLMEVAL_DATA, or use --quick"
        )


def run(args) -> int:
    from dlmeval.models import load_causal_lm, load_diffusion
    from dlmeval.store import RunStore

    if not args.quick:
        check_demo_data()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.time()

    def log(s: str) -> None:
        if not args.json:
            print(s, flush=True)

    store = RunStore(args.store)
    log(f"dlmeval demo: run store {store.path}")
    dlm = load_diffusion(args.dlm, **model_kwargs(args))
    ar = load_causal_lm(args.ar, **model_kwargs(args))
    for m in (dlm, ar):
        i = m.identity()
        log(f"  loaded {i.name} ({i.family}, {i.dtype}, {i.device}) weights sha256 {i.weights_sha256[:12]}")
    result = {"store": str(store.path), "stages": {}}
    log("[1] DiffScore vs AR likelihood: sentences and their word-shuffled copies")
    with _timed(log) as took:
        result["stages"]["sentences"] = sentence_stage(dlm, ar, store, args.seed, log)
    result["stages"]["sentences"]["time"] = took
    log("[1b] a sample from the default diffusion model")
    result["stages"]["sample"] = sample_stage(dlm, store, args.seed, log)
    if not args.quick:
        for n, (name, fn) in enumerate(STAGES, start=2):
            log(f"[{n}] {name}")
            with _timed(log) as took:
                result["stages"][name] = fn(dlm, ar, store, args, out, log)
            if isinstance(result["stages"][name], dict):
                result["stages"][name]["time"] = took
    try:
        from dlmeval.report import build_report

        run_ids = []
        for st in result["stages"].values():
            if isinstance(st, dict):
                run_ids += [r for r in [st.get("run_id"), *st.get("run_ids", [])] if r]
        path = build_report(store, run_ids=run_ids, out_path=out / "report.html")
        result["report"] = str(path)
        log(f"report written to {Path(path).resolve()}")
    except ImportError:
        log("(no report: dlmeval.report is not installed in this build)")
    result["wall_s"] = round(time.time() - t0, 1)
    log(f"demo finished in {result['wall_s']} s")
    if args.json:
        emit(args, result)
    return 0
