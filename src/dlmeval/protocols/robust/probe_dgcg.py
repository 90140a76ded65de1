"""``[dgcg]``: D-GCG (DLM) / GCG (AR) adversarial suffixes on clean prompts (the paper's Sec. 4, 6.4, Table 3,
App. C): accuracy with the optimised suffix vs without, relative degradation, the shortest suffix reaching
``threshold`` degradation, mean gradient norm and loss trajectory; and, for every AR model, the transfer of the
suffixes found on each DLM it is paired with (the DLMs run first, so this never depends on the pair order).

The attack target is the task's (:meth:`dlmeval.tasks.Task.attack_target`). Both models are evaluated on the
optimised prompt ids themselves (``before + suffix + after``, nothing decoded and re-encoded; the AR responder
generates and scores from token ids): judged span = scored span = attacked span. Each record says whether the
ids the answer was conditioned on are exactly the optimised ids (``ids_match``; only a prompt cut to the model's
window breaks it), and the table gives the share (``ids_match_rate``). Transfer gives a DLM's suffix to the AR
model as text (``append_suffix``): the two tokenizers differ.
"""

from __future__ import annotations

import numpy as np

from dlmeval.parallel import fixed_chunks, work_loop
from dlmeval.protocols.common import mean_or_nan
from dlmeval.protocols.robust.evaluate import ensure, generation_seed, judged
from dlmeval.protocols.robust.probes import Probe, register_probe, unavailable
from dlmeval.seeding import derive_seed

GCG_OPTIONS = (
    "steps",
    "top_k",
    "search_width",
    "eval_batch_size",
    "ascii_only",
    "retokenize_filter",
    "eval_samples",
)


DEGRADATIONS = ("relative", "absolute")


@register_probe
class DGCGProbe(Probe):
    name = "dgcg"
    title = "D-GCG / GCG adversarial suffix probe"
    #: ``degradation``: "relative" ((A_clean - A_suffix) / A_clean, like RDI; the default) or "absolute"
    #: (A_clean - A_suffix): the paper does not say, and Table 3's "Min-len" threshold depends on it
    options = ("suffix_lengths", "threshold", "degradation", *GCG_OPTIONS)

    @classmethod
    def validate(cls, spec, where):
        from dlmeval.errors import InputError
        from dlmeval.protocols.spec_io import as_int, as_list
        from dlmeval.robustness.dgcg import GCGConfig

        opts = spec.kwargs()
        if opts.get("degradation", "relative") not in DEGRADATIONS:
            raise InputError(f"spec: {where}.degradation must be one of {', '.join(DEGRADATIONS)}")
        lengths = as_list(
            opts.get("suffix_lengths", [8]), f"{where}.suffix_lengths", lambda v, w: as_int(v, w, minimum=1)
        )
        try:
            GCGConfig(suffix_length=lengths[0], **{k: opts[k] for k in GCG_OPTIONS if k in opts})
        except (TypeError, InputError) as e:
            raise InputError(f"spec: [{where}]: {e}") from None

    def _configs(self, opts):
        from dlmeval.robustness.dgcg import GCGConfig

        kw = {k: opts[k] for k in GCG_OPTIONS if k in opts}
        return [GCGConfig(suffix_length=int(n), **kw) for n in opts.get("suffix_lengths", [8])]

    def run(self, ctx, resp, run) -> list[dict]:
        try:
            from dlmeval.robustness.dgcg import append_suffix, attack_item, run_gcg
        except ImportError as e:
            return unavailable(run, "D-GCG", e, ctx.say)
        spec, opts = ctx.spec, ctx.probe.kwargs()
        label, role = resp.entry.label, resp.entry.role
        out: list[dict] = []
        for task_name in ctx.probe.tasks:
            task, its = ctx.task(task_name), ctx.items(task_name)
            for r in ensure(spec, resp, run, task.name, "generation", "clean", None, its):
                out.append({**r, "part": "clean"})
            rseed = generation_seed(spec, task.name, "clean", None)
            gseed = derive_seed(spec.seed, "robust-dgcg", task.name)
            for cfg in self._configs(opts):
                # "ids/": an AR attack evaluated on the optimised ids; records of the earlier evaluation on the
                # re-encoded text (keys without it) are not reused. The DLM's evaluation did not change.
                ev = "ids/" if role == "ar" else ""
                keys = [f"dgcg/{cfg.key}/{ev}{task.name}/{it.item_id}" for it in its]

                def attacked(c, task=task, cfg=cfg, rseed=rseed, gseed=gseed) -> list[dict]:
                    (it,) = c.items
                    msg = task.user_message(it)
                    target = task.attack_target(it, chat=resp.chat)
                    res = run_gcg(resp.model, [attack_item(resp.model, msg.text, target, it.item_id, wrap=resp.wrap)],
                                  cfg, seed=gseed)[0]  # fmt: skip
                    ans = resp.generate(task, [list(res.prompt_ids)], [it.item_id], rseed)
                    match = list(ans.prompt_ids[0]) == list(res.prompt_ids) if ans.prompt_ids else False
                    return [{
                        "item_id": it.item_id, "kind": res.kind, "suffix_length": cfg.suffix_length,
                        "suffix_text": res.suffix_text, "suffix_ids": list(res.suffix_ids), "loss": res.loss, "candidate_loss": res.candidate_loss,
                        "grad_norm": res.grad_norm, "initial_eval_loss": res.initial_eval_loss,
                        "final_eval_loss": res.final_eval_loss, "attack_nfe": res.nfe, "seconds": res.seconds,
                        "ids_match": match, **judged(task, it, ans.outputs[0], ans.probs[0]),
                    }]  # fmt: skip

                # data parallel: every rank optimises its share of the pending items (one chunk each)
                work_loop(run, fixed_chunks(its, keys, 1), attacked)
                out += [{**run.get(k), "part": "attack", "task": task.name, "config": cfg.key} for k in keys]
                if role != "ar":
                    continue
                for dl in ctx.partners(label):  # every DLM this AR model is paired with, from its records
                    sfx = {
                        r["item_id"]: r["suffix_text"]
                        for r in ctx.collected.get(dl, [])
                        if r.get("part") == "attack"
                        and r["task"] == task.name
                        and r["suffix_length"] == cfg.suffix_length
                    }
                    if not sfx:
                        continue
                    tkeys = [
                        f"dgcg-transfer/{derive_seed(dl) % 10**8}/{cfg.key}/{task.name}/{it.item_id}"
                        for it in its
                    ]
                    pend = [(it, k) for it, k in zip(its, tkeys) if it.item_id in sfx]

                    def transferred(c, task=task, sfx=sfx, rseed=rseed, dl=dl) -> list[dict]:
                        (it,) = c.items
                        msg = task.user_message(it)
                        ans = resp.generate(
                            task, [resp.wrap(append_suffix(msg.text, sfx[it.item_id]))], [it.item_id], rseed
                        )
                        return [
                            {
                                "item_id": it.item_id,
                                "source": dl,
                                **judged(task, it, ans.outputs[0], ans.probs[0]),
                            }
                        ]

                    work_loop(run, fixed_chunks([p[0] for p in pend], [p[1] for p in pend], 1), transferred)
                    out += [
                        {
                            **run.get(k),
                            "part": "transfer",
                            "task": task.name,
                            "suffix_length": cfg.suffix_length,
                        }
                        for k in tkeys
                        if run.get(k) is not None
                    ]
        return out

    def rows(self, ctx) -> list[dict]:
        from dlmeval.robustness.dgcg import degradation, min_suffix_length

        threshold = float(ctx.probe.kwargs().get("threshold", 0.2))
        rel = ctx.probe.kwargs().get("degradation", "relative") == "relative"
        rows = []
        for label, recs in ctx.collected.items():
            for task_name in ctx.probe.tasks:
                clean = [r for r in recs if r["part"] == "clean" and r.get("task") == task_name]
                clean_acc = mean_or_nan([r["correct"] for r in clean])
                base = {"model": label, "role": ctx.roles[label], "task": task_name, "n": len(clean),
                        "clean_accuracy": clean_acc}  # fmt: skip
                mine, deg = [], {}
                lengths = dict.fromkeys(
                    r["suffix_length"] for r in recs if r["part"] == "attack" and r["task"] == task_name
                )
                for length in lengths:
                    att = [
                        r
                        for r in recs
                        if r["part"] == "attack" and r["task"] == task_name and r["suffix_length"] == length
                    ]
                    acc = mean_or_nan([r["correct"] for r in att])
                    deg[length] = degradation(clean_acc, acc, relative=rel)
                    loss = np.array([r["loss"] for r in att], dtype=float)
                    cand = np.array([r["candidate_loss"] for r in att], dtype=float)
                    row = {
                        **base, "kind": att[0]["kind"], "suffix_length": length, "attacked_accuracy": acc,
                        "degradation": deg[length], "mean_grad_norm": mean_or_nan([np.mean(r["grad_norm"]) for r in att]),
                        "mean_loss_increase": mean_or_nan([r["final_eval_loss"] - r["initial_eval_loss"] for r in att]),
                        "step_improvement_rate": float((cand > loss).mean()),
                        "loss_trajectory": " ".join(f"{x:.3f}" for x in loss.mean(0)),
                        "ids_match_rate": mean_or_nan([bool(r.get("ids_match", True)) for r in att]),
                    }  # fmt: skip
                    transfers = [
                        r
                        for r in recs
                        if r["part"] == "transfer" and r["task"] == task_name and r["suffix_length"] == length
                    ]
                    sources = dict.fromkeys(r["source"] for r in transfers)
                    if not sources:
                        mine.append(row)
                    for src in sources:  # one row per DLM whose suffixes this AR model was given
                        tacc = mean_or_nan([r["correct"] for r in transfers if r["source"] == src])
                        mine.append({**row, "transfer_from": src, "transfer_accuracy": tacc,
                                     "transfer_degradation": degradation(clean_acc, tacc, relative=rel)})  # fmt: skip
                ml = min_suffix_length(deg, threshold)
                best = max(deg.values()) if deg else float("nan")  # Table 3's "Best deg." over the lengths
                for r in mine:
                    r["min_len"] = ml if ml is not None else "none"
                    r["best_degradation"] = best
                rows += mine
        return rows
