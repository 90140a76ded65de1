"""THE run skeleton of a protocol that stores one run per model and one run over all of them (Care, robustness),
written once; meta-eval shares its last step (:func:`put_whole`).

:func:`run_protocol` takes the protocol as :class:`Hooks` (what differs), not as a subclass, and for each entry
(one model of the spec), in order:

1. takes the given model (``models[name]``) or loads it (``load``: the family-aware loader, on its device);
2. opens its run: ``store.open_run(kind, config(entry), [its identity, *identities], seed, command_line)``;
3. computes it (``compute(entry, model, run)``: the records, the per-model tables put on the open run);
4. syncs the run (data parallel: every rank's records and warnings reach rank 0), finishes it, keeps its warnings
   (main rank, as ``"<name>: <warning>"``) and frees the model unless it was given;

then computes the tables of the whole (``tables(done)``, from every entry's records), puts them on the run over
every model (``whole_kind``, ``whole_config``) with the ``notes`` as its warnings, finishes it, and on the main
rank only adds its warnings and writes the outputs (``write``). It knows no concrete protocol (it imports only
:mod:`dlmeval.protocols.common` of the protocols) and no CLI.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from dlmeval.parallel import current, sync
from dlmeval.protocols.common import empty_cuda


@dataclass
class Done:
    """What :func:`run_protocol` did: ``run_ids`` and ``seconds`` per entry name, ``records`` (what ``compute``
    returned, per entry in order), the model ``identities``, the ``warnings`` (main rank), the ``whole`` run with its
    ``tables`` and short ``signature``, and ``out_dir`` where the outputs were written."""

    run_ids: dict[str, str] = field(default_factory=dict)
    records: list[Any] = field(default_factory=list)
    identities: list[Any] = field(default_factory=list)
    seconds: dict[str, float] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    whole: Any = None
    tables: dict[str, pd.DataFrame] = field(default_factory=dict)
    signature: str = ""
    out_dir: Path | None = None


@dataclass
class Hooks:
    """A protocol, as the skeleton sees it. ``name(entry)``: the key of ``models``, of :attr:`Done.run_ids` and
    the prefix of its warnings; ``announce(entry)``: the line said (before ``" -> run <id>"``) when its run
    opens; ``identities``: the identities every run lists after its models' (Care: its evaluators);
    ``notes(tables)``: warnings of the whole run; ``write(tables, out_dir, signature)``: the outputs."""

    kind: str
    whole_kind: str
    load: Callable[[Any], Any]
    config: Callable[[Any], Mapping[str, Any]]
    compute: Callable[[Any, Any, Any], Any]
    whole_config: Mapping[str, Any]
    tables: Callable[[Done], dict[str, pd.DataFrame]]
    seed: int = 0
    name: Callable[[Any], str] = str
    announce: Callable[[Any], str] = str
    identities: Sequence[Any] = ()
    notes: Callable[[dict[str, pd.DataFrame]], Iterable[str]] = lambda tables: ()
    write: Callable[[dict[str, pd.DataFrame], Any, str], Path] | None = None


def run_entries(
    hooks: Hooks,
    entries: Iterable[Any],
    store,
    *,
    models: Mapping[str, Any] | None = None,
    command_line: str | None = None,
    say: Callable[[str], None] | None = None,
    finish: str = "done",
) -> Done:
    """The per-entry part of :func:`run_protocol`: take or load each entry's model, open its run, compute, sync,
    finish it as ``finish`` (``"shard i/n"`` for a job's part of a run), keep its warnings, free the model.
    ``models`` maps an entry name to an already loaded model (kept: never freed here); ``say`` is called on every
    rank (gate it)."""
    models = dict(models or {})
    say = say or (lambda s: None)
    main = current().is_main
    done = Done()
    for entry in entries:
        t0 = time.perf_counter()
        name = hooks.name(entry)
        own = name in models
        model = models[name] if own else hooks.load(entry)
        done.identities.append(model.identity())
        run = store.open_run(
            hooks.kind,
            hooks.config(entry),
            [done.identities[-1], *hooks.identities],
            seed=hooks.seed,
            command_line=command_line,
        )
        done.run_ids[name] = run.run_id
        say(f"{hooks.announce(entry)} -> run {run.run_id}")
        done.records.append(hooks.compute(entry, model, run))
        # data parallel: what this rank wrote or warned after compute's last work_loop reaches rank 0 before the
        # run finishes (a warning of a rank other than 0 waits in its outbox until a sync; a no-op in one process)
        sync(run)
        run.finish(finish)
        if main:
            done.warnings += [f"{name}: {w}" for w in run.warnings()]
        done.seconds[name] = round(time.perf_counter() - t0, 2)
        del model
        if not own:
            gc.collect()
            empty_cuda()
    return done


def run_protocol(
    hooks: Hooks,
    entries: Iterable[Any],
    store,
    *,
    models: Mapping[str, Any] | None = None,
    command_line: str | None = None,
    say: Callable[[str], None] | None = None,
    out_dir: str | Path | None = None,
) -> Done:
    """Run (or resume) every entry (:func:`run_entries`), then the whole, into ``store`` (see the module
    docstring)."""
    main = current().is_main
    done = run_entries(hooks, entries, store, models=models, command_line=command_line, say=say)
    done.tables = hooks.tables(done)
    done.whole = put_whole(
        store,
        hooks.whole_kind,
        hooks.whole_config,
        [*done.identities, *hooks.identities],
        done.tables,
        seed=hooks.seed,
        command_line=command_line,
        notes=hooks.notes(done.tables),
    )
    done.signature = done.whole.signature.short()
    if main:  # data parallel: rank 0 reports and writes the outputs
        done.warnings += [w for w in done.whole.warnings() if w not in done.warnings]
        if out_dir is not None and hooks.write is not None:
            done.out_dir = hooks.write(done.tables, out_dir, done.signature)
    return done


def put_whole(
    store,
    kind: str,
    config: Mapping[str, Any],
    identities: Sequence[Any],
    tables: Mapping[str, pd.DataFrame],
    *,
    seed: int = 0,
    command_line: str | None = None,
    notes: Iterable[str] = (),
):
    """The run over a whole spec: open it, put ``tables`` on it in their order, record ``notes`` as its warnings,
    finish it; returns the run."""
    run = store.open_run(kind, config, identities, seed=seed, command_line=command_line)
    for name, df in tables.items():
        run.put_table(name, df)
    for w in notes:
        run.warn(w)
    run.finish()
    return run


__all__ = ["Done", "Hooks", "put_whole", "run_entries", "run_protocol"]
