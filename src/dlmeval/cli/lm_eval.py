"""`dlmeval lm-eval ARGS...`: lm-evaluation-harness's own command line with the ``dlmeval`` model registered.

lm-eval 0.4.13 (the version dlmeval is tested with) discovers models only through its built-in table and
``@register_model`` at import time; it reads no installed-plugin entry points (``lm_eval/api/registry.py``), so
``lm_eval --model dlmeval`` cannot find dlmeval by itself. This command imports the model class (which registers
``dlmeval``) and hands every argument after ``lm-eval`` to lm-eval unchanged: ``dlmeval lm-eval --model dlmeval
--model_args model=default --tasks arc_easy`` is ``lm_eval --model dlmeval ...`` with the model known. Under
``torchrun`` / ``accelerate launch`` each rank answers its share of the requests (docs/lm-eval.md).
"""

from __future__ import annotations

NAME = "lm-eval"


def register(sub) -> None:
    p = sub.add_parser(
        NAME,
        help="run lm-evaluation-harness with the dlmeval model (arguments passed to lm-eval unchanged)",
        description="lm-eval's command line with `--model dlmeval` registered; every argument after `lm-eval` "
        "goes to lm-eval unchanged (`dlmeval lm-eval run --help` lists them).",
        add_help=False,
    )
    p.set_defaults(func=run)


def run(args) -> int:
    from dlmeval.integrations.lm_eval import main

    return main(list(getattr(args, "passthrough_args", None) or []))
