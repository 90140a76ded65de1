"""Helpers shared by CLI commands: logging, what the parsed runtime options give the code, output. The option
groups themselves are :mod:`dlmeval.cli.options`'."""

from __future__ import annotations

import json
import sys
from typing import Any


def console_logging(debug: bool = False) -> None:
    """dlmeval's warnings (``dlmeval.*`` loggers: truncated texts, changed library versions, failed report
    sections) go to stderr through a rich console, as the progress bars do, never as raw ``WARNING:name:`` lines
    (a library that calls ``logging.basicConfig`` would otherwise print them so)."""
    import logging

    from rich.console import Console
    from rich.logging import RichHandler

    log = logging.getLogger("dlmeval")
    if any(getattr(h, "_dlmeval_console", False) for h in log.handlers):
        return
    h = RichHandler(
        console=Console(stderr=True),
        show_time=False,
        show_path=debug,
        markup=False,
        rich_tracebacks=debug,
        omit_repeated_times=False,
    )
    h._dlmeval_console = True  # type: ignore[attr-defined]
    h.setFormatter(logging.Formatter("%(message)s"))
    log.addHandler(h)
    log.setLevel(logging.DEBUG if debug else logging.INFO)
    log.propagate = False


def model_kwargs(args) -> dict[str, Any]:
    from dlmeval.parallel import current

    return {
        # under torchrun each rank loads its models on its own local device (auto / cuda -> cuda:LOCAL_RANK)
        "device": current().device(args.device),
        "dtype": args.dtype,
        "trust_remote_code": args.trust_remote_code,
        "allow_download": args.allow_download,
    }


def command_line(args) -> str:
    """The command line recorded with a run: the arguments main() was given (set by :func:`dlmeval.cli.main.main`;
    sys.argv for a handler called some other way)."""
    import shlex

    return getattr(args, "command_line", None) or shlex.join(["dlmeval", *sys.argv[1:]])


def protocol_kwargs(args) -> dict[str, Any]:
    """What a protocol runner (``run_care``, ``run_robust``) takes from the command line: the model settings, the
    data directory, the command line for the run record, progress bars, and progress lines on stderr (none with
    --json)."""

    quiet = getattr(args, "json", False)
    from dlmeval.parallel import current

    ev = getattr(args, "evaluator_device", None)
    return {
        **model_kwargs(args),
        "evaluator_device": None if ev is None else current().device(ev),
        "data_dir": args.data_dir,
        "command_line": command_line(args),
        "progress": not args.no_progress,
        "echo": None if quiet else (lambda s: print(s, file=sys.stderr, flush=True)),
    }


def run_in_store(args, runner, spec, out: str | None = None) -> Any:
    """Run a protocol runner (``run_care``, ``run_robust``, ``run_leaderboard``) on ``spec`` into the store of
    ``--store``, outputs under ``out`` (None: a runner without outputs), with :func:`protocol_kwargs`; only rank 0
    checks the store is writable first (the others write journals beside it). Returns the runner's result."""
    from dlmeval.parallel import current, open_store
    from dlmeval.store.access import check_writable_store

    if current().is_main:
        check_writable_store(args.store)
    with open_store(args.store) as store:
        return runner(spec, store, **({} if out is None else {"out_dir": out}), **protocol_kwargs(args))


def run_lines(res, whole: str, whole_run: str | None) -> list[str]:
    """The closing lines of a protocol run's text: its runs (each model's, then the run over all of them, named
    ``whole``), its warnings, its signature."""
    return [
        "runs: " + ", ".join(f"{m} {r}" for m, r in res.model_runs.items()) + f"; {whole} {whole_run}",
        *(f"warning: {w}" for w in res.warnings),
        f"signature: {res.signature}",
    ]


def emit(args, payload: Any, text: str | None = None) -> None:
    """JSON on stdout with --json, else the human text."""
    if getattr(args, "json", False):
        from dlmeval.store.jsonsafe import dumps

        sys.stdout.write(dumps(payload) + "\n")
    else:
        sys.stdout.write((text if text is not None else json.dumps(payload, indent=2, default=str)) + "\n")
