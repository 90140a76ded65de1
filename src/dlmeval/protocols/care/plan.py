"""What ``dlmeval care SPEC --plan`` lists beyond the sweep cells: every downstream unit with its predicted
forward passes, the log-likelihood checks, the data each corpus and task is read from, and the readings in
force (prompts per seed, MAUVE sample size and clusters, GSM8K exemplars). Nothing is loaded: a source is named,
not read (its row count and digest enter the run when it runs)."""

from __future__ import annotations

from typing import Any

from dlmeval.protocols.care.cells import downstream_cells
from dlmeval.protocols.care.spec import LOGLIK_TASKS, CareSpec


def _where(src) -> str:
    if src.source is None:
        return "shipped stand-in"
    parts = [src.source]
    if src.config:
        parts.append(f"[{src.config}]")
    if src.split:
        parts.append(f"split {src.split}")
    return " ".join(parts)


def data_rows(spec: CareSpec) -> list[dict[str, Any]]:
    """One row per corpus and downstream task the spec reads: where from."""
    from dlmeval.data.rows import HUB
    from dlmeval.protocols.care.spec import CORPORA, STANDS_IN_FOR

    rows = []
    for s in spec.generation.sources:
        c = spec.corpus(s)
        where = _where(c)
        if c.source is not None:
            default = HUB.get(s, (None, None, "the only split"))[2]
            where = c.describe() + ("" if c.split else f" (split: {default} or the only one)")
        elif s in STANDS_IN_FOR:
            paper = STANDS_IN_FOR[s]
            where += (
                f' (offline default) for {paper}: the paper\'s corpus is sources = ["{paper}"] with '
                f"--allow-download: {CORPORA[paper].describe()}"
            )
        rows.append({"data": f"corpus {s}", "style": c.style, "field": c.field, "from": where})
    d = spec.downstream
    for task in ("humaneval", "gsm8k", *LOGLIK_TASKS):
        t = getattr(d, task)
        if t.n:
            extra = f", subtasks {', '.join(t.configs)}" if task == "bbh" else ""
            rows.append({"data": f"task {task}", "n": t.n, "from": _where(t) + extra})
    return rows


def downstream_rows(spec: CareSpec) -> list[dict[str, Any]]:
    """Every downstream unit: generation tasks per cell (predicted NFE per item without EOS stops, forward
    calls over the items), then the log-likelihood checks (K masks x T rates scored per option)."""
    from dlmeval.sampling import predict_nfe, steps_for_nfe

    d, g = spec.downstream, spec.generation
    rows = []
    gen_tasks = []
    if d.humaneval.n:
        lengths = d.humaneval.lengths
        for L in lengths:
            gen_tasks.append(("humaneval" if len(lengths) == 1 else f"humaneval@{L}", d.humaneval.n, L))
    if d.gsm8k.n:
        gen_tasks.append(("gsm8k", d.gsm8k.n, d.gsm8k.gen_tokens))
    for task, n, length in gen_tasks:
        for c in downstream_cells(spec):
            kw = dict(strategy=c.strategy, remask_fraction=c.fraction, accounting=g.accounting)
            if c.steps is not None:
                steps, nfe = c.steps, predict_nfe(length, c.steps, **kw)
            else:
                steps, nfe = steps_for_nfe(c.nfe, length, **kw)
            rows.append(
                {
                    "unit": f"{task} {c.key}",
                    "gen_tokens": length,
                    "steps": steps,
                    "nfe_per_item": nfe,
                    "nfe_target_reached": None if c.nfe is None else nfe == c.nfe,
                    "forward_calls": nfe * -(-n // g.batch_size),
                }
            )
    for task in LOGLIK_TASKS:
        t = getattr(d, task)
        if t.n:
            n = t.n * (len(t.configs) if task == "bbh" else 1)
            rows.append(
                {
                    "unit": f"{task} (log-likelihood, DiffScore K={t.n_masks} x T={t.n_rates})",
                    "items": n,
                    "scored_rows_per_option": t.n_masks * t.n_rates,
                }
            )
    return rows


def readings(spec: CareSpec) -> dict[str, str]:
    """The readings in force, one line each (docs/care.md)."""
    g, m, d = spec.generation, spec.metrics, spec.downstream
    out = {
        "prompts": (
            "each seed draws its own prompts (generation.resample_prompts = true)"
            if g.resample_prompts
            else "the same prompts for every seed (the paper: seed variance is sampling only)"
        ),
        "mauve": (
            f"{'every accepted generation' if m.mauve_samples is None else f'{m.mauve_samples} accepted generations'}"
            f" vs {m.n_reference} references, clusters "
            + (f"{m.mauve_buckets}" if m.mauve_buckets != "auto" else "auto (samples / 10)")
        ),
    }
    if d.gsm8k.n:
        g8 = d.gsm8k
        out["gsm8k_exemplars"] = (
            f"{g8.shots} from the source's {g8.exemplar_split} split (else the last {g8.shots} evaluated items)"
            if g8.source is not None
            else f"the last {g8.shots} items of the shipped test file (no train split ships), out of the pool"
        )
    if d.humaneval.n and len(d.humaneval.lengths) > 1:
        out["humaneval"] = (
            f"generated at {', '.join(map(str, d.humaneval.lengths))} tokens (Table 11 is inconsistent: docs/care.md)"
        )
    return out


def plan_extras(spec: CareSpec) -> dict[str, Any]:
    """The plan's data, downstream and readings sections, for the CLI payload."""
    from dlmeval.protocols.published import plan_records

    return {
        "data": data_rows(spec),
        "downstream": downstream_rows(spec),
        "readings": readings(spec),
        "published": plan_records(spec.published),
    }


def plan_lines(extras: dict[str, Any]) -> list[str]:
    lines = ["data:"]
    for r in extras["data"]:
        lines.append(f"  {r['data']}: {r['from']}")
    if extras["downstream"]:
        lines.append("downstream:")
        for r in extras["downstream"]:
            if "nfe_per_item" in r:
                note = "  (target out of reach)" if r["nfe_target_reached"] is False else ""
                lines.append(
                    f"  {r['unit']:<52} gen {r['gen_tokens']:>4}  steps {r['steps']:>4}  NFE/item "
                    f"{r['nfe_per_item']:>4}  calls {r['forward_calls']}{note}"
                )
            else:
                lines.append(
                    f"  {r['unit']}: {r['items']} items x {r['scored_rows_per_option']} rows per option"
                )
    lines.append("readings:")
    lines += [f"  {k}: {v}" for k, v in extras["readings"].items()]
    if extras.get("published"):
        from dlmeval.protocols.published import parse_entries
        from dlmeval.protocols.published import plan_lines as published_lines

        lines += published_lines(parse_entries(extras["published"]))
    return lines


__all__ = ["data_rows", "downstream_rows", "plan_extras", "plan_lines", "readings"]
