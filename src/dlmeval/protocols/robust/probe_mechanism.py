"""``[trajectory]`` and ``[attention]``: the mechanistic routing analyses (the paper's Sec. 5, 6.5, Fig. 8).

* ``trajectory`` (DLMs; Fig. 8A): each prompt is sampled clean and perturbed with the model's own sampler
  settings for the task (the pair's recipe) and the same sampler seed, recording the per-step predictions over the
  generation region (:func:`dlmeval.robustness.probes.record_trajectory`); at ``snapshots`` log-spaced steps
  from ``t = T`` down to ``t = low * T`` (8 and 0.01 in the paper) the ID divergence (share of positions whose
  prediction differs), the confidence drop (clean minus noisy probability of the predicted token) and the
  stability drop (clean minus noisy share of positions whose prediction stays from one snapshot to the next).
* ``attention`` (AR models; Fig. 8B): the attention mass each layer puts on corrupted keys of the perturbed
  prompt, over the uniform baseline (ratio > 1: the model attends to the corruption more than chance, < 1: it
  routes around it), under eager attention (:func:`dlmeval.robustness.probes.attention_ratio`).

Both key their records by the item, the condition, the perturbation seed and their own settings.
"""

from __future__ import annotations

import numpy as np

from dlmeval.parallel import fixed_chunks, work_loop
from dlmeval.protocols.common import mean_or_nan
from dlmeval.protocols.robust.evaluate import generation_seed, perturbation
from dlmeval.protocols.robust.probes import Probe, register_probe, unavailable


@register_probe
class TrajectoryProbe(Probe):
    name = "trajectory"
    title = "Denoising-trajectory divergence, clean vs perturbed prompt (DLMs; Fig. 8A)"
    options = ("snapshots", "low")
    roles = ("dlm",)

    def run(self, ctx, resp, run) -> list[dict]:
        try:
            from dlmeval.robustness.probes import record_trajectory, snapshot_steps, trajectory_divergence
        except ImportError as e:
            return unavailable(run, "trajectory analysis", e, ctx.say)
        from dlmeval.sampling import RemaskingSampler
        from dlmeval.store.signature import config_hash

        spec, opts = ctx.spec, ctx.probe.kwargs()
        n_snap, low = int(opts.get("snapshots", 8)), float(opts.get("low", 0.01))
        seed = spec.perturbation_seeds[0]
        out = []
        for task_name in ctx.probe.tasks:
            task, its = ctx.task(task_name), ctx.items(task_name)
            for cond in ctx.conditions():
                pert = perturbation(cond)
                cfg = resp.sampler_config(task.name, generation_seed(spec, task.name, cond, seed))
                h = config_hash(
                    {"sampler": cfg.as_dict(), "snapshots": n_snap, "low": low, "scope": spec.scope}
                )[:12]
                sampler = RemaskingSampler(resp.model, cfg)  # one per condition, not per item
                keys = [f"trajectory/{task.name}/{cond}/s{seed}/{h}/{it.item_id}" for it in its]

                def compute(c, task=task, pert=pert, cond=cond, sampler=sampler) -> list[dict]:
                    it = c.items[0]  # one item a chunk
                    clean = resp.wrap(task.user_message(it).text)
                    noisy = resp.wrap(task.user_message(it, pert, seed=seed, scope=spec.scope).text)
                    _, tc = record_trajectory(sampler, clean, it.item_id)
                    _, tn = record_trajectory(sampler, noisy, it.item_id)
                    d = trajectory_divergence(tc, tn, snapshot_steps(tc.ids.shape[0], n_snap, low))
                    return [{"item_id": it.item_id, "condition": cond, **d.as_dict()}]

                work_loop(run, fixed_chunks(its, keys, 1), compute)
                out += [{**run.get(k), "task": task.name} for k in keys]
                ctx.say(f"robust: {resp.entry.label} trajectory {task.name}/{cond}: {len(its)} items")
        return out

    def rows(self, ctx) -> list[dict]:
        rows = []
        for label, task, cond, g in ctx.groups():
            per_step = np.nanmean(np.array([r["per_step_divergence"] for r in g], dtype=float), axis=0)
            rows.append({
                "model": label, "role": ctx.roles[label], "task": task, "condition": cond, "n": len(g),
                "id_divergence": mean_or_nan([r["id_divergence"] for r in g], skip_missing=True),
                "confidence_drop": mean_or_nan([r["confidence_drop"] for r in g], skip_missing=True),
                "stability_drop": mean_or_nan([r["stability_drop"] for r in g], skip_missing=True),
                "snapshot_steps": " ".join(str(s) for s in g[0]["steps"]),
                "divergence_by_snapshot": " ".join(f"{x:.3f}" for x in per_step),
            })  # fmt: skip
        return rows


@register_probe
class AttentionProbe(Probe):
    name = "attention"
    title = "Attention on corrupted tokens over the uniform baseline (AR models; Fig. 8B)"
    options = ("batch_size",)
    roles = ("ar",)

    def run(self, ctx, resp, run) -> list[dict]:
        try:
            from dlmeval.robustness.probes import attention_ratio
        except ImportError as e:
            return unavailable(run, "attention analysis", e, ctx.say)
        spec, opts = ctx.spec, ctx.probe.kwargs()
        seed, bs = spec.perturbation_seeds[0], int(opts.get("batch_size", 8))
        out = []
        for task_name in ctx.probe.tasks:
            task, its = ctx.task(task_name), ctx.items(task_name)
            for cond in ctx.conditions():
                pert = perturbation(cond)
                # the batch size is in the key: which prompts are padded together can move a ratio's last bits
                keys = [f"attention/{task.name}/{cond}/s{seed}/{spec.scope}/b{bs}/{it.item_id}" for it in its]

                def compute(c, task=task, pert=pert, cond=cond) -> list[dict]:  # one batch of prompts a chunk
                    msgs = [task.user_message(it, pert, seed=seed, scope=spec.scope) for it in c.items]
                    texts = [resp.wrap(m.text) for m in msgs]
                    res = attention_ratio(
                        resp.model,
                        texts,
                        [m.perturbation.edits for m in msgs],
                        shifts=[max(t.rfind(m.text), 0) for t, m in zip(texts, msgs)],
                        batch_size=bs,
                    )
                    return [
                        {"item_id": it.item_id, "condition": cond, **a.as_dict()}
                        for it, a in zip(c.items, res)
                    ]

                work_loop(run, fixed_chunks(its, keys, bs), compute)
                out += [{**run.get(k), "task": task.name} for k in keys]
        return out

    def rows(self, ctx) -> list[dict]:
        rows = []
        for label, task, cond, g in ctx.groups():
            seen = [r for r in g if r["queries"] > 0]
            ratio = (
                np.nanmean(np.array([r["ratio"] for r in seen], dtype=float), axis=0)
                if seen
                else np.array([])
            )
            rows.append({
                "model": label, "role": ctx.roles[label], "task": task, "condition": cond, "n": len(g),
                "n_with_corruption": len(seen), "mean_ratio": float(np.nanmean(ratio)) if ratio.size else float("nan"),
                "ratio_by_layer": " ".join(f"{x:.3f}" for x in ratio),
            })  # fmt: skip
        return rows
