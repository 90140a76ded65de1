"""The downstream checks of a Care sweep, as units of the run loop (:mod:`.loop`): HumanEval pass@1 (completions
run in :mod:`dlmeval.sandbox`) and GSM8K exact match (lm-evaluation-harness's prompt and strict match) per
downstream cell, and the log-likelihood checks (DiffScore conditional), which no sampling setting can change:
HellaSwag and BBH (the paper's Section 4.6 sanity checks, with GSM8K) and ARC-Challenge (a dlmeval addition)."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

import numpy as np

from dlmeval.protocols import common
from dlmeval.protocols.care.cells import Cell, sampler_config
from dlmeval.protocols.care.frames import DOWN_COLUMNS
from dlmeval.protocols.care.loop import Unit
from dlmeval.protocols.care.plan import CarePlan
from dlmeval.protocols.care.prompts import continuation_text
from dlmeval.protocols.care.spec import LOGLIK_TASKS, CareSpec
from dlmeval.protocols.common import cut_at
from dlmeval.seeding import derive_seed

#: stop sequences of a HumanEval completion (Codex / lm-evaluation-harness)
HUMANEVAL_STOP = ("\nclass", "\ndef", "\n#", "\nif", "\nprint")
#: lm-evaluation-harness ``gsm8k`` (v3.0): stop strings and the strict-match answer pattern
GSM8K_STOP = ("Question:", "</s>", "<|im_end|>")
_GSM8K_STRICT = re.compile(r"#### (\-?[0-9\.\,]+)")


def gsm8k_prompt(item, shots: Sequence) -> str:
    """lm-evaluation-harness's ``gsm8k`` prompt (the Care paper, C.1: "the 4-shot in-context format from the
    original lm-eval configuration"): ``Question: {question}\nAnswer: {answer}`` per exemplar (the answer as
    the data set writes it, calculator annotations and ``#### N`` included), joined by blank lines, then
    ``Question: {question}\nAnswer:``."""
    parts = [f"Question: {s.question}\nAnswer: {s.answer}" for s in shots]
    return "\n\n".join([*parts, f"Question: {item.question}\nAnswer:"])


def gsm8k_strict_match(text: str) -> str | None:
    """lm-eval's ``strict-match`` filter: the first ``#### N``, with ``,``, ``$`` and a final ``.`` dropped (its
    exact-match ``regexes_to_ignore``), or None."""
    m = _GSM8K_STRICT.search(text)
    if not m:
        return None
    return re.sub(r"\.$", "", m.group(1).replace(",", "").replace("$", ""))


def downstream_units(plan: CarePlan, label: str, model, *, model_spec: str | None = None) -> list[Unit]:
    """The downstream work of one model: the log-likelihood checks (ARC, HellaSwag, BBH, when asked for), then
    HumanEval (at each of its lengths) and GSM8K per downstream cell (run as ``model_spec``'s override says); the
    items are the plan's (:meth:`~dlmeval.protocols.care.plan.CarePlan.task`)."""
    spec = plan.spec
    d = spec.downstream
    units = [_choice_unit(plan, label, model, t) for t in LOGLIK_TASKS if t in plan.tasks]
    tasks = []
    if "humaneval" in plan.tasks:
        items = plan.task("humaneval").items
        lengths = d.humaneval.lengths
        for length in lengths:
            name = "humaneval" if len(lengths) == 1 else f"humaneval@{length}"
            tasks.append((name, [(it.item_id, it.prompt, it) for it in items], length))
    if "gsm8k" in plan.tasks:
        td = plan.task("gsm8k")
        work = [(it.item_id, gsm8k_prompt(it, td.shots), it) for it in td.items]
        tasks.append(("gsm8k", work, d.gsm8k.gen_tokens, f"gsm8k few-shot exemplars: {td.shots_from}"))
    for task, work, length, *notice in tasks:
        for cell in plan.downstream_cells:
            units.append(
                _task_unit(spec, label, model, task, cell, work, length, *notice, model_spec=model_spec)
            )
    return units


def _task_unit(
    spec: CareSpec,
    label: str,
    model,
    task: str,
    cell: Cell,
    work: list,
    length: int,
    notice: str | None = None,
    model_spec: str | None = None,
) -> Unit:
    """One (task, cell): ``work`` holds ``(item id, prompt, item)``; ``length`` generated tokens per prompt;
    ``notice``: a line the run records (where GSM8K's exemplars came from)."""
    sampler = []  # built on first use: a finished unit is read back without one

    def generate(chunk, warn) -> list[dict]:
        from dlmeval.sampling import RemaskingSampler

        if notice:
            warn(notice)

        if not sampler:
            sampler.append(
                RemaskingSampler(model, sampler_config(spec, cell, length=length, model=model_spec))
            )
        s = sampler[0]
        enc = [s.encode_prompt(prompt) for _, prompt, _ in chunk]
        keep = model.max_length - length
        if any(len(e) > keep for e in enc):
            warn(
                f"{task}: prompts longer than the model window minus {length} generated tokens were cut to their "
                f"last {keep} tokens"
            )
            enc = [e[-keep:] if len(e) > keep else e for e in enc]
        res = s.sample(enc, item_ids=[iid for iid, _, _ in chunk])
        rows = []
        for (iid, _, it), e, rec in zip(chunk, enc, res.records()):
            text = continuation_text(model, e, rec["token_ids"], rec["text"])
            row = {"item": iid, "nfe": rec["nfe"], "raw": text}
            row.update(_humaneval(spec, it, text, warn) if task.startswith("humaneval") else _gsm8k(it, text))
            rows.append(row)
        return rows

    def finish(recs, warn) -> dict:
        labels = sorted({str(r["isolation"]) for r in recs if r.get("isolation")})
        return {
            **cell.fields(),
            "task": task,
            "cell": cell.key,
            "n": len(recs),
            "accuracy": float(np.mean([bool(r["correct"]) for r in recs])),
            "nfe": float(np.mean([r["nfe"] for r in recs])),
            # where the code ran (HumanEval): the tables carry it, so an unsafe run says so wherever it is shown
            **({"sandbox": ",".join(labels)} if labels else {}),
        }

    return Unit(
        key=f"down/{task}/{cell.key}",
        name=f"{task} {cell.key}",
        table="down",
        items=work,
        item_keys=[f"{task}/{cell.key}/{iid}" for iid, _, _ in work],
        chunk_size=spec.generation.batch_size,
        generate=generate,
        finish=finish,
        row=lambda rec: {"model": label, **{k: rec.get(k) for k in DOWN_COLUMNS if k != "model"}},
        describe=lambda rec: f"care: {task} {cell.key}: accuracy {rec['accuracy']:.3f}, nfe {rec['nfe']:.1f}",
    )


def _humaneval(spec: CareSpec, it, text: str, warn) -> dict:
    from dlmeval.sandbox import check_humaneval

    h = spec.downstream.humaneval
    completion = cut_at(text, HUMANEVAL_STOP)
    ex = check_humaneval(
        it.prompt, completion, it.test, it.entry_point, timeout_s=h.timeout_s, memory_mb=h.memory_mb
    )
    # the isolation the code actually had goes into the run (the report lists run warnings)
    unsafe = "unsafe" in ex.isolation.split(":")[-1].split("+")
    warn(
        f"HumanEval completions ran in the sandbox with isolation {ex.isolation}"
        + (" (required layers missing, run with --sandbox-unsafe)" if unsafe else "")
    )
    return {"completion": completion, "status": ex.status, "correct": ex.passed, "isolation": ex.isolation}


def _gsm8k(it, text: str) -> dict:
    from dlmeval.tasks import extract_gsm8k_answer

    answer = cut_at(text, GSM8K_STOP)
    pred = gsm8k_strict_match(answer)
    gold = it.answer.split("####")[-1].strip().replace(",", "")
    return {
        "prediction": pred,
        "gold": gold,
        "correct": pred is not None and pred == gold,
        # lm-eval's flexible-extract analogue, kept beside the strict match it reports
        "flexible": extract_gsm8k_answer(answer),
        "flexible_correct": extract_gsm8k_answer(answer) == it.gold,
    }


def _choice_unit(plan: CarePlan, label: str, model, task: str) -> Unit:
    """A log-likelihood check (ARC-Challenge, HellaSwag, BBH) by conditional DiffScore over the options (mean
    log-probability; argmax wins): one summary record, no per-item records. Unit key ``down/<task>``."""

    spec = plan.spec

    def finish(recs, warn) -> dict:
        from dlmeval.scoring import DiffScorer
        from dlmeval.scoring.core import FAMILY_VOCAB, vocab_rows
        from dlmeval.tasks import argmax_choice, get_task

        a = getattr(spec.downstream, task)
        t = get_task("arc_challenge" if task == "arc" else task)
        items = plan.task(task).items
        requests = []
        for it in items:
            msg, conts = t.choice_request(it)
            requests.append((msg.text, conts))
        nfe0 = model.nfe
        # the ARC check keeps its historical seed; the others derive theirs from their name
        if a.likelihood == "llada":
            scores = _harness_choice_scores(model, task, requests, items, a, derive_seed(spec.seed, task))
            how = {"likelihood": "llada", "mc_num": a.mc_num, "mc_batch": a.mc_batch, "cfg": a.cfg,
                   "vocab_rows": vocab_rows(model, FAMILY_VOCAB)}  # fmt: skip
        else:
            scorer = DiffScorer(
                model, n_masks=a.n_masks, n_rates=a.n_rates, seed=derive_seed(spec.seed, task)
            )
            scores = common.diffscore_choice_scores(scorer, requests, item_ids=[it.item_id for it in items])
            how = {"n_masks": a.n_masks, "n_rates": a.n_rates}
        correct = [
            argmax_choice([x if math.isfinite(x) else -math.inf for x in s]) == it.gold
            for it, s in zip(items, scores)
        ]
        return {
            "task": task,
            "n": len(items),
            "accuracy": float(np.mean(correct)),
            "nfe": float(model.nfe - nfe0),
            **how,
        }

    def row(rec) -> dict:
        return {"model": label, "task": task, "strategy": None, "steps": None, "nfe_budget": None,
                "temperature": None, "seed": None, "n": rec["n"], "accuracy": rec["accuracy"], "nfe": rec["nfe"]}  # fmt: skip

    return Unit(
        key=f"down/{task}",
        name=task,
        table="down",
        items=[],
        item_keys=[],
        chunk_size=1,
        generate=lambda chunk, warn: [],
        finish=finish,
        row=row,
        describe=lambda rec: (
            f"care: {task} (log-likelihood): accuracy {rec['accuracy']:.3f} over {rec['n']} items"
        ),
    )


def _harness_choice_scores(model, task: str, requests, items, a, seed: int) -> list[list[float]]:
    """Each option's log-likelihood as LLaDA's lm-eval harness computes it (``likelihood = "llada"``): lm-eval's
    token split of context + option (:func:`~dlmeval.scoring.llada_ll.llada_encode_pair`), LLaDA's Monte Carlo ELBO
    summed over the option's tokens, the family's vocabulary rule; draws seeded by (check seed, item id, option)."""
    from dlmeval.scoring.llada_ll import harness_pair, llada_log_likelihood
    from dlmeval.seeding import torch_generator

    out = []
    for it, (context, options) in zip(items, requests):
        row = []
        for j, option in enumerate(options):
            ids, span = harness_pair(model, context, option, f"care: {task} item {it.item_id}, option {j}")
            gen = torch_generator(derive_seed(seed, it.item_id, j))
            row.append(
                llada_log_likelihood(
                    model, ids, span, mc_num=a.mc_num, batch_size=a.mc_batch, cfg=a.cfg, generator=gen
                )
            )
        out.append(row)
    return out


__all__ = ["GSM8K_STOP", "HUMANEVAL_STOP", "downstream_units", "gsm8k_prompt", "gsm8k_strict_match"]
