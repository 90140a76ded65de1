"""``[probes]``: linear probes (the paper's Sec. 5, 6.5, Table 4): corrupted vs clean tokens of perturbed prompts
from the hidden states of evenly spaced layers; best-layer accuracy and AUROC per model, task and condition."""

from __future__ import annotations

from dlmeval.errors import InputError
from dlmeval.parallel import fixed_chunks, work_loop
from dlmeval.protocols.robust.evaluate import perturbation
from dlmeval.protocols.robust.probes import Probe, register_probe, unavailable
from dlmeval.seeding import derive_seed

BUILD = ("n_layers", "layers", "balance", "batch_size")
#: the probes' feature scaling by default: none, as the paper's probes (``[probes] scaler = true``: StandardScaler)
SCALER = False


@register_probe
class LinearProbe(Probe):
    name = "probes"
    title = "Linear probes: corrupted vs clean tokens from hidden states"
    #: ``layers``: a list of hidden-state indices, or "paper" ({0, 2, ..., 30, 31}: PAPER_LAYERS); default
    #: ``n_layers`` evenly spaced states. ``scaler``: standardise features before the logistic regression
    #: (default false: the paper's probes use none)
    options = ("n_layers", "layers", "split", "balance", "batch_size", "scaler")

    @classmethod
    def validate(cls, spec, where):
        opts = spec.kwargs()
        if not isinstance(opts.get("scaler", SCALER), bool):
            raise InputError(f"spec: {where}.scaler must be true or false")
        layers = opts.get("layers")
        if isinstance(layers, str) and layers != "paper":
            raise InputError(f'spec: {where}.layers must be a list of hidden-state indices or "paper"')
        if "clean" in spec.conditions:
            raise InputError(
                f"spec: {where}.conditions must be perturbation keys (clean has no corrupted tokens)"
            )

    def run(self, ctx, resp, run) -> list[dict]:
        try:
            from dlmeval.robustness.probes import probe_dataset, probe_layers
        except ImportError as e:
            return unavailable(run, "linear probes", e, ctx.say)
        from dlmeval.store.signature import config_hash

        spec, opts = ctx.spec, ctx.probe.kwargs()
        split = opts.get("split", "token")
        build = {k: opts[k] for k in BUILD if k in opts}
        if build.get("layers") == "paper":
            from dlmeval.robustness.probes import PAPER_LAYERS

            build["layers"] = list(PAPER_LAYERS)
        seed = spec.perturbation_seeds[0]
        tasks = [(ctx.task(t), ctx.items(t)) for t in ctx.probe.tasks]
        jobs = [(task, its, cond) for task, its in tasks for cond in ctx.conditions()]
        scaler = bool(opts.get("scaler", SCALER))
        # the scaler in force is in the record keys (its default changed in #34: records of the old default are
        # never read back as the new one's)
        h = config_hash({**opts, "scaler": scaler, "scope": spec.scope})[:12]
        keys = [f"probes/{task.name}/{cond}/s{seed}/n{len(its)}/{h}" for task, its, cond in jobs]

        def compute(chunk) -> list[dict]:  # one probe (task, condition) per chunk: it reads all its sequences
            task, its, cond = chunk.items[0]
            pert = perturbation(cond)
            msgs = [task.user_message(it, pert, seed=seed, scope=spec.scope) for it in its]
            texts = [resp.wrap(m.text) for m in msgs]
            fs = probe_dataset(
                resp.model,
                texts,
                [m.perturbation.edits for m in msgs],
                seed=derive_seed(spec.seed, "robust-probe", task.name, cond),
                shifts=[max(t.rfind(m.text), 0) for t, m in zip(texts, msgs)],
                **build,
            )
            pr = probe_layers(
                fs, seed=derive_seed(spec.seed, "robust-probe-split", task.name, cond), split=split,
                scaler=scaler,
            )  # fmt: skip
            return [{"condition": cond, **pr.as_dict()}]

        work_loop(run, fixed_chunks(jobs, keys, 1), compute)
        out = []
        for (task, its, _), key in zip(jobs, keys):
            rec = run.get(key)
            out.append({**rec, "task": task.name, "n_sequences": len(its)})
            ctx.say(
                f"robust: {resp.entry.label} probe {task.name}/{rec['condition']}: best layer {rec['best_layer']} "
                f"accuracy {rec['best_accuracy']:.3f}"
            )
        return out

    def rows(self, ctx) -> list[dict]:
        rows = []
        for label, recs in ctx.collected.items():
            for rec in recs:
                rows.append({
                    "model": label, "role": ctx.roles[label], "task": rec["task"], "condition": rec["condition"],
                    "n_sequences": rec["n_sequences"], "best_layer": rec["best_layer"],
                    "best_accuracy": rec["best_accuracy"], "auroc_at_best": rec["auroc_at_best"],
                    "max_auroc": rec["max_auroc"], "n_train": rec["n_train"], "n_test": rec["n_test"],
                    "layers": " ".join(str(x) for x in rec["layers"]),
                    "accuracy_by_layer": " ".join(f"{x:.3f}" for x in rec["accuracy"]),
                })  # fmt: skip
        return rows
