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
    from dlmeval.models.registry import REGISTRY

    rows = []
    for e in REGISTRY.values():
        ok, where = e.available()
        rows.append(
            {"spec": e.spec, "kind": e.kind, "available": ok, "where": where, "description": e.description}
        )
    lines = [f"{'spec':<12} {'kind':<10} {'ok':<3} description"]
    for r in rows:
        lines.append(
            f"{r['spec']:<12} {r['kind']:<10} {'yes' if r['available'] else 'no':<3} {r['description']}"
        )
        lines.append(f"{'':<27}-> {r['where']}")
    from dlmeval.models.registry import SUPPORTED_TRANSFORMERS, transformers_status

    version, ok = transformers_status()
    lines.append(
        f"transformers {version} installed; LLaDA / Dream remote code is supported with transformers "
        f"{SUPPORTED_TRANSFORMERS}{'' if ok else ' (outside that range: expect those checkpoints to fail)'}"
    )
    emit(args, rows, "\n".join(lines))
    return 0
