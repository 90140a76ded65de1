"""`dlmeval models`: the model specs dlmeval understands and whether each is available here."""

from __future__ import annotations

from dlmeval.cli.common import emit


def register(sub) -> None:
    p = sub.add_parser(
        "models",
        help="list model specs and what is available",
        description="List the model spec forms and the embedded models, with availability.",
    )
    p.set_defaults(func=run)


def run(args) -> int:
    from dlmeval.models.family import FAMILIES
    from dlmeval.models.registry import model_entries

    rows = []
    for e in model_entries():
        ok, where = e.available()
        rows.append(
            {
                "spec": e.spec,
                "kind": e.kind,
                "family": e.family,
                "available": ok,
                "where": where,
                "description": e.description,
                "facts": FAMILIES.get(e.family).facts(),
            }
        )
    lines = [f"{'spec':<16} {'kind':<10} {'ok':<3} description"]
    for r in rows:
        lines.append(
            f"{r['spec']:<16} {r['kind']:<10} {'yes' if r['available'] else 'no':<3} {r['description']}"
        )
        lines.append(f"{'':<31}-> {r['where']}")
    lines.append("")
    lines.append(f"{'family':<12} {'attention':<14} {'shift':<5} {'schedule':<8} native samplers / releases")
    for fam in FAMILIES.values():
        if fam.kind != "diffusion":
            continue
        native = ", ".join(f"{k}->{v}" for k, v in fam.native_samplers.items()) or "-"
        lines.append(
            f"{fam.name:<12} {fam.attention:<14} {fam.logit_shift:<5} {fam.native_schedule:<8} {native}"
            + (f"; {', '.join(fam.hub_ids)}" if fam.hub_ids else "")
        )
    for fam in FAMILIES.values():  # a family's own options: SPEC?NAME=VALUE,... (declared by the family)
        for o in fam.options:
            lines.append(
                f"option {fam.spec}?{o.name}=VALUE: {o.help or o.type.__name__} (default {o.default!r})"
            )
    from dlmeval.models.registry import SUPPORTED_TRANSFORMERS, transformers_status

    version, ok = transformers_status()
    lines.append(
        f"transformers {version} installed; LLaDA / Dream remote code is supported with transformers "
        f"{SUPPORTED_TRANSFORMERS}{'' if ok else ' (outside that range: expect those checkpoints to fail)'}"
    )
    from dlmeval import plugins

    if plugins.LOADED:
        lines.append("plugins: " + ", ".join(f"{n} ({src})" for n, src in plugins.LOADED))
    emit(args, rows, "\n".join(lines))
    return 0
