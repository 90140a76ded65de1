"""The registry of ``dlmeval meta-eval --analysis NAME`` producers, and the store glue they share.

An analysis is one function ``fn(suite, **options) -> {table name: DataFrame}`` registered with :func:`register`
in a module of this package (every module of the package is imported by :func:`analyses`, so adding an analysis
is one file). The registry is the one source of the CLI's ``--analysis`` choices and of the options each analysis
takes (``--analysis-option KEY=VALUE``, or the CLI flags named in :data:`CLI_OPTIONS`).

This module imports nothing heavy at the top (the CLI builds its parser from it).

Store glue: each analysis writes its per-item values into a run of kind ``meta-eval-analysis`` (configuration:
the analysis name and what decides its numbers) chunk by chunk, one transaction per chunk, so a rerun resumes and
recomputes only the chunks it lacks (:func:`score_items`); the summary tables go into the same run
(:func:`store_tables`).
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from dlmeval.errors import InputError
from dlmeval.registry import Registry

RUN_KIND = "meta-eval-analysis"


@dataclass(frozen=True)
class Analysis:
    """One registered analysis: ``options`` maps each keyword ``fn`` takes to its type (for KEY=VALUE parsing)."""

    name: str
    fn: Callable[..., dict]
    help: str
    paper: str = ""  # the paper's table / figure it produces
    options: Mapping[str, type] = field(default_factory=dict)
    order: int = 0
    profiles: bool = (
        False  # reads the per-rate profile S(t_k): needs a scheme whose per-rate means estimate it
    )


REGISTRY: Registry[Analysis] = Registry("analysis")
#: CLI flags that feed an analysis option of the same name (the CLI passes them when the analysis declares them)
CLI_OPTIONS = ("n_pairs", "compare_model")


def register(
    name: str,
    *,
    help: str,
    paper: str = "",
    options: Mapping[str, type] | None = None,
    profiles: bool = False,
) -> Callable[[Callable[..., dict]], Callable[..., dict]]:
    """Decorator: add ``fn`` to :data:`REGISTRY` under ``name`` (a name taken by another analysis is refused)."""

    def deco(fn: Callable[..., dict]) -> Callable[..., dict]:
        REGISTRY.add(name, Analysis(name, fn, help, paper, dict(options or {}), len(REGISTRY), profiles))
        return fn

    return deco


#: modules imported first (their analyses come first in the CLI's list); any other module follows by name
FIRST = ("bias", "adversarial", "ablation", "profiles", "latency", "templates")


def _load() -> None:
    for name in _module_order():
        importlib.import_module(f"{__package__}.{name}")


def analyses() -> list[Analysis]:
    """Every registered analysis, in registration order (imports the analysis modules)."""
    _load()
    return sorted(REGISTRY.values(), key=lambda a: a.order)


def get(name: str) -> Analysis:
    _load()
    return REGISTRY.get(name)


def _module_order() -> list[str]:
    from dlmeval.protocols.diffscore import analyses as pkg

    names = [m.name for m in pkgutil.iter_modules(pkg.__path__) if not m.name.startswith("_")]
    return sorted(set(names) - {"registry"}, key=lambda n: (FIRST.index(n) if n in FIRST else len(FIRST), n))


def declared_names() -> list[str]:
    """The names the analysis modules register, read from their source with :mod:`ast` (first argument of each
    ``@register("name", ...)``), in registration order, without importing them: ``--help`` lists the choices
    without loading torch / pandas (a test checks this equals the names :func:`analyses` registers)."""
    import ast
    from pathlib import Path

    here = Path(__file__).parent
    out: list[str] = []
    for mod in _module_order():
        found = []
        for node in ast.walk(ast.parse((here / f"{mod}.py").read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                for d in node.decorator_list:
                    if (
                        isinstance(d, ast.Call)
                        and getattr(d.func, "id", None) == "register"
                        and d.args
                        and isinstance(d.args[0], ast.Constant)
                        and isinstance(d.args[0].value, str)
                    ):
                        found.append((d.lineno, d.args[0].value))
        out += [name for _, name in sorted(found)]
    return out


class Names(Sequence):
    """The registered names as a lazy sequence: argparse's ``choices`` reads it only when it checks a value or
    prints help; both read the names from the modules' source (:func:`declared_names`) unless the modules are
    already imported, so building the parser and ``--help`` import no analysis module (they pull in torch)."""

    def _names(self) -> list[str]:
        if REGISTRY:
            return [a.name for a in analyses()]
        return declared_names()

    def __getitem__(self, i):  # type: ignore[override]
        return self._names()[i]

    def __len__(self) -> int:
        return len(self._names())

    def __iter__(self) -> Iterator[str]:
        return iter(self._names())

    def __contains__(self, x: object) -> bool:
        return x in self._names()


def parse_options(
    name: str, pairs: Iterable[str] = (), cli: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """The keyword options of analysis ``name``: the CLI flags of :data:`CLI_OPTIONS` it declares (when set), then
    ``KEY=VALUE`` strings, converted with the declared type; an undeclared key is refused."""
    a = get(name)
    out: dict[str, Any] = {}
    for k, v in (cli or {}).items():
        if k in a.options and v is not None:
            out[k] = v
    for p in pairs:
        key, sep, value = str(p).partition("=")
        key = key.strip().replace("-", "_")
        if not sep or not key:
            raise InputError(f"--analysis-option takes KEY=VALUE, got {p!r}")
        if key not in a.options:
            raise InputError(
                f"analysis {name!r} has no option {key!r}; its options: {', '.join(a.options) or 'none'}"
            )
        typ = a.options[key]
        try:
            out[key] = (value.strip().lower() in ("1", "true", "yes")) if typ is bool else typ(value)
        except ValueError:
            raise InputError(f"--analysis-option {key}: {value!r} is not a {typ.__name__}") from None
    return out


def run_analysis(name: str, suite, **kw) -> dict:
    """Run analysis ``name`` on ``suite`` (a :class:`dlmeval.protocols.diffscore.meta_eval.Suite` with its store set)."""
    a = get(name)
    bad = [k for k in kw if k not in a.options]
    if bad:
        raise InputError(
            f"analysis {name!r} takes no option {bad}; its options: {', '.join(a.options) or 'none'}"
        )
    return a.fn(suite, **kw)


# ---------------------------------------------------------------------------------------------- store glue
def suite_version() -> int:
    from dlmeval.protocols.diffscore import meta_eval

    return int(getattr(meta_eval, "SUITE_VERSION", 1))


def analysis_run(suite, name: str, config: dict, models: list, *, selection: bool = False):
    """Open (or reopen, to resume) the store run of analysis ``name`` under ``config``; ``selection``: the
    benchmarks and ``--limit`` go into the configuration too, so each selection has its own run and its tables
    are never overwritten by another selection's."""
    if selection:
        config = {"benchmarks": list(suite.benchmarks), "limit": suite.opts.limit, **config}
    return suite.store.open_run(
        RUN_KIND,
        {"suite_version": suite_version(), "analysis": name, **config},
        models,
        suite.opts.seed,
        suite.command_line,
    )


def stored(run, prefix: str) -> dict[str, dict[str, Any]]:
    """``{key: result}`` of the items of ``run`` whose key starts with ``prefix`` (one query where the store's
    run has ``results_with_prefix``)."""
    if hasattr(run, "results_with_prefix"):
        return run.results_with_prefix(prefix)
    return {k: v for k, v in run.results().items() if str(k).startswith(prefix)}


def score_items(
    run,
    keys: Sequence[str],
    metrics: Sequence[str],
    compute: Callable[[list[int]], list[dict[str, dict[str, Any]]]],
    *,
    chunk_size: int,
    label: str = "",
    progress: bool = False,
) -> dict[str, list[dict[str, Any]]]:
    """Chunked, resumable per-item values: ``compute(rows)`` returns, for each row index of a chunk, ``{metric:
    result}``; a chunk with any ``"{key}|{metric}"`` missing from the run is recomputed whole and written in one
    transaction. Returns ``{metric: [result of each key]}`` in ``keys`` order."""
    from dlmeval.parallel import Chunk, work_loop

    if len(set(keys)) != len(keys):
        raise InputError(f"{label}: item keys are not unique")
    prefix = _common_prefix(keys)
    work = [
        Chunk(tuple(f"{keys[i]}|{m}" for i in rows for m in metrics), rows, size=len(rows))
        for rows in (list(range(s, min(s + chunk_size, len(keys)))) for s in range(0, len(keys), chunk_size))
    ]

    def records(chunk: Chunk) -> list[dict[str, Any]]:
        out = []
        for i, got in zip(chunk.items, compute(list(chunk.items)), strict=True):
            missing = [m for m in metrics if m not in got]
            if missing:
                raise RuntimeError(f"{label}: no {missing} for item {keys[i]}")
            out += [got[m] for m in metrics]
        return out

    work_loop(run, work, records, label=label, progress=progress, done=set(stored(run, prefix)))
    res = stored(run, prefix)
    return {m: [res[f"{k}|{m}"] for k in keys] for m in metrics}


def _common_prefix(keys: Sequence[str]) -> str:
    if not keys:
        return ""
    first = str(keys[0]).split("/", 1)[0] + "/"
    return first if all(str(k).startswith(first) for k in keys) else ""


def store_tables(run, tables: Mapping[str, Any]) -> None:
    for name, df in tables.items():
        run.put_table(name, df)
    run.finish()


__all__ = [
    "CLI_OPTIONS",
    "REGISTRY",
    "RUN_KIND",
    "Analysis",
    "Names",
    "analyses",
    "analysis_run",
    "get",
    "parse_options",
    "register",
    "run_analysis",
    "score_items",
    "store_tables",
    "stored",
]
