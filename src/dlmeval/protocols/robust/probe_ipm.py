"""``[ipm]``: input prompt masking variants on the DLM (the paper's Sec. 6.6, Tables 5 and 10, App. G).

The noisy prompt is patched by :func:`dlmeval.robustness.ipm.run_ipm`, then answered by the same sampler with
the same seed as the noisy baseline; the table gives accuracy, the change against that baseline and the mean
numbers of flagged and changed tokens, beside the clean and noisy rows, per task and condition. The
edit-distance variants (``editdist``, ``hybrid``) flag words with ``flagger`` = ``pyspellchecker`` (the default:
an external dictionary, :mod:`dlmeval.robustness.spelling`) or ``vocabulary`` (the model's own vocabulary and
WordNet).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dlmeval.errors import InputError
from dlmeval.parallel import fixed_chunks, work_loop
from dlmeval.protocols.common import mean_or_nan
from dlmeval.protocols.robust.evaluate import ensure, generation_seed, judged, perturbation, user_span
from dlmeval.protocols.robust.probes import Probe, register_probe, unavailable
from dlmeval.seeding import derive_seed

PARAM = {"topk": "k", "threshold": "tau", "iterative": "tau", "uniform": "rho", "hybrid": "k"}


def ipm_configs(opts: Mapping[str, Any]):
    """``variants`` ("topk:2", "threshold:0.1", "uniform:0.1", "iterative:0.1", "editdist", "hybrid:2" or tables
    of IPMConfig fields) with the shared settings (``steps`` = T_d, ``min_chars``, ``batch_size``,
    ``max_distance``, ``hybrid_with``, ``max_iter``)."""
    from dlmeval.robustness.ipm import IPMConfig

    shared = {
        "infill_steps": opts.get("steps", 16),
        "min_chars": opts.get("min_chars", 3),
        "batch_size": opts.get("batch_size", 16),
        "max_distance": opts.get("max_distance", 2),
        "hybrid_with": opts.get("hybrid_with", "topk"),
        "max_iter": opts.get("max_iter", 3),
    }
    out = []
    for v in opts.get("variants", ["topk:2"]):
        if isinstance(v, Mapping):
            try:
                out.append(IPMConfig(**{**shared, **v}))
            except TypeError as e:
                raise InputError(f"spec: ipm variant {dict(v)!r}: {e}") from None
            continue
        name, _, arg = str(v).partition(":")
        kw = dict(shared)
        if arg:
            if name not in PARAM:
                raise InputError(f"spec: ipm variant {v!r}: {name} takes no argument")
            try:
                kw[PARAM[name]] = int(arg) if PARAM[name] == "k" else float(arg)
            except ValueError:
                raise InputError(f"spec: ipm variant {v!r}: {arg!r} is not a number") from None
        out.append(IPMConfig(variant=name, **kw))
    return out


@register_probe
class IPMProbe(Probe):
    name = "ipm"
    title = "Input prompt masking (IPM) variants"
    options = (
        "variants",
        "steps",
        "min_chars",
        "batch_size",
        "max_distance",
        "hybrid_with",
        "max_iter",
        "flagger",
    )
    roles = ("dlm",)

    @classmethod
    def validate(cls, spec, where):
        from dlmeval.robustness.spelling import FLAGGERS

        opts = spec.kwargs()
        ipm_configs(opts)
        if opts.get("flagger", "pyspellchecker") not in FLAGGERS:
            raise InputError(
                f"spec: {where}.flagger must be one of {', '.join(FLAGGERS)}, got {opts['flagger']!r}"
            )

    def _flagger(self, opts, model, cfg):
        if cfg.variant not in ("editdist", "hybrid"):
            return None, ""
        kind = opts.get("flagger", "pyspellchecker")
        if kind == "vocabulary":
            return None, "+vocabulary"
        from dlmeval.robustness.spelling import dictionary_version, spelling_flagger

        return spelling_flagger(max_distance=cfg.max_distance), f"+{dictionary_version()}"

    def run(self, ctx, resp, run) -> list[dict]:
        if resp.entry.role not in self.roles:
            return []
        try:
            from dlmeval.robustness.ipm import run_ipm
        except ImportError as e:
            return unavailable(run, "IPM", e, ctx.say)
        spec, opts = ctx.spec, ctx.probe.kwargs()
        configs = ipm_configs(opts)
        out: list[dict] = []
        for task_name in ctx.probe.tasks:
            task, its = ctx.task(task_name), ctx.items(task_name)
            for r in ensure(spec, resp, run, task.name, "generation", "clean", None, its):
                out.append({**r, "variant": "clean", "for": None})
            for cond in ctx.conditions():
                pert = perturbation(cond)
                for s in spec.perturbation_seeds:
                    for r in ensure(spec, resp, run, task.name, "generation", cond, s, its):
                        out.append({**r, "variant": "noisy baseline", "for": cond})
                for cfg in configs:
                    flagger, fkey = self._flagger(opts, resp.model, cfg)
                    for seed in spec.perturbation_seeds:
                        # the detection batch size is in the key: a padded batch can move a surprisal's last bits
                        keys = [
                            f"ipm/{cfg.key}{fkey}/b{cfg.batch_size}/{task.name}/{cond}/s{seed}/{it.item_id}"
                            for it in its
                        ]

                        def patched(c, task=task, cond=cond, pert=pert, seed=seed, cfg=cfg, flagger=flagger,
                                    fkey=fkey) -> list[dict]:  # fmt: skip
                            chunk = list(c.items)
                            msgs = [task.user_message(it, pert, seed=seed, scope=spec.scope) for it in chunk]
                            prompts = [resp.wrap(m.text) for m in msgs]
                            iids = [it.item_id for it in chunk]
                            res = run_ipm(
                                resp.model,
                                prompts,
                                cfg,
                                item_ids=iids,
                                seed=derive_seed(spec.seed, "robust-ipm", task.name, cond, seed),
                                spans=[user_span(p, m.text) for p, m in zip(prompts, msgs)],
                                flagger=flagger,
                            )
                            ans = resp.generate(  # the noisy baseline's sampler seed
                                task, [r.patched_ids for r in res.results], iids,
                                generation_seed(spec, task.name, cond, seed),
                            )  # fmt: skip
                            return [
                                {
                                    "item_id": it.item_id, "variant": cfg.key, "condition": cond, "seed": seed,
                                    "flagger": fkey.lstrip("+"), "flagged": len(r.flagged),
                                    "flagged_tokens": r.flagged_tokens, "changed_tokens": r.changed,
                                    "patched_text": r.patched_text, **judged(task, it, o, tp), **ex,
                                }
                                for it, r, o, tp, ex in zip(chunk, res.results, ans.outputs, ans.probs, ans.extra)
                            ]  # fmt: skip

                        work_loop(run, fixed_chunks(its, keys, resp.batch_size), patched)
                        recs = [run.get(k) for k in keys]
                        out += [{**r, "task": task.name, "for": cond} for r in recs]
                        acc = mean_or_nan([r["correct"] for r in recs])
                        ctx.say(f"robust: IPM {cfg.key} on {task.name}/{cond}/s{seed}: accuracy {acc:.3f}")
        return out

    def rows(self, ctx) -> list[dict]:
        rows = []
        for label, recs in ctx.collected.items():
            for task_name in ctx.probe.tasks:
                mine = [r for r in recs if r.get("task") == task_name]
                base = {"model": label, "role": ctx.roles[label], "task": task_name}
                clean = [r for r in mine if r["variant"] == "clean"]
                for cond in ctx.conditions():
                    noisy = [r for r in mine if r["variant"] == "noisy baseline" and r["for"] == cond]
                    acc_noisy = mean_or_nan([r["correct"] for r in noisy])
                    rows.append({**base, "condition": cond, "variant": "clean", "n": len(clean),
                                 "accuracy": mean_or_nan([r["correct"] for r in clean])})  # fmt: skip
                    rows.append({**base, "condition": cond, "variant": "noisy baseline", "n": len(noisy),
                                 "accuracy": acc_noisy, "delta": 0.0})  # fmt: skip
                    variants = dict.fromkeys(
                        r["variant"] for r in mine if r["for"] == cond and r["variant"] != "noisy baseline"
                    )
                    for v in variants:
                        vr = [r for r in mine if r["for"] == cond and r["variant"] == v]
                        acc = mean_or_nan([r["correct"] for r in vr])
                        rows.append({
                            **base, "condition": cond, "variant": v, "n": len(vr), "accuracy": acc,
                            "delta": acc - acc_noisy, "mean_flagged": mean_or_nan([r["flagged"] for r in vr]),
                            "mean_changed": mean_or_nan([r["changed_tokens"] for r in vr]),
                        })  # fmt: skip
        return rows
