"""The metric-family interface and its registry.

A metric family is a group of metrics scored by one component: one run in the store (its ``kind`` and
:meth:`MetricFamily.configuration` make the run id, so changing one family recomputes only that family), a list of
metric ids per benchmark, a chunk computation, and table labels. The suite knows families only through this
interface; the built-in ones are ``lexical``, ``embedding`` (:mod:`.baselines`), ``ar`` (:mod:`.ar`),
``diffscore`` and ``ft`` (:mod:`.diffscore`, :mod:`.ft`). Adding one::

    @register_family
    class MyFamily(MetricFamily):
        name = "mine"                  # --metrics name, the records' "family"
        kind = "meta-eval-mine"        # run kind in the store
        rank = 25                      # rows after the embedding baselines, before AR
        order = ("mine:a", "mine:b")   # metric ids in table order

        def configuration(self):       # everything the numbers depend on (besides the models)
            return {"metrics": list(self.order)}

        def metrics(self, bench):      # metric ids this family yields on a benchmark
            return list(self.order)

        def compute(self, frame, chunk):  # {unit uid: {metric id: {"score": float, ...}}}
            rows = [frame.iloc[u.rows[0]] for u in chunk]
            return {u.uid: {"mine:a": {"score": ...}, "mine:b": {"score": ...}} for u, r in zip(chunk, rows)}

        def label(self, metric):
            return {"mine:a": "Mine A", "mine:b": "Mine B"}[metric]

then import its module in ``meta_eval/__init__.py`` (the registration happens on import; ``rank``, not the
import order, places it; keep the module's top-level imports light: the command line imports it to read the
family's options).

A family owns its command-line options: ``options = (FamilyOption("--mine-model", help=...),)`` on the class is
all ``dlmeval meta-eval`` needs to offer ``--mine-model`` in a group of the family's own and pass its value to
the :class:`~dlmeval.protocols.diffscore.meta_eval.SuiteOptions` field of that name (``mine_model``; the field
holds the default, and the family reads ``self.opts.mine_model``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from dlmeval.errors import InputError
from dlmeval.registry import Registry

if TYPE_CHECKING:
    import pandas as pd

    from dlmeval.protocols.diffscore.meta_eval.benchmarks import Benchmark
    from dlmeval.protocols.diffscore.meta_eval.work import Unit


class SuiteAPI(Protocol):
    """What a metric family may use of its suite (``self.suite``): the public interface, nothing else.

    The input half (:class:`~.inputs.SuiteInputs` has it; a family's :meth:`MetricFamily.load` runs on the
    inputs before the store is opened, so it uses only this half): ``opts``, ``benchmarks``, ``models`` (the
    models known so far by key), ``frame(name)``, ``data_identity(name)``, ``model(key, make)`` (load once,
    share across the suite), ``dlm()``, ``ar()``, ``embedder()``, ``has_chat(model)``,
    ``scorer(task, model, cache_key, layout)``, ``release_scorer(task, cache_key)``.

    The run half (:class:`~.suite.Suite` only): ``open_run(kind, config, models)`` and
    ``compute_diffscore(frame, chunk, task, prefix, model, cache_key)``."""

    opts: Any
    benchmarks: tuple[str, ...]

    @property
    def models(self) -> dict[str, Any]: ...

    def frame(self, name: str) -> pd.DataFrame: ...
    def data_identity(self, name: str) -> str | dict: ...
    def model(self, key: str, make: Callable[[], Any]) -> Any: ...
    def dlm(self) -> Any: ...
    def ar(self) -> Any: ...
    def embedder(self) -> Any: ...
    def has_chat(self, model: Any) -> bool: ...
    def scorer(
        self, task: str, model: Any = None, cache_key: str = "zs", layout: dict | None = None
    ) -> Any: ...
    def release_scorer(self, task: str, cache_key: str) -> None: ...
    def open_run(self, kind: str, config: dict, models: list) -> Any: ...
    def compute_diffscore(
        self,
        frame: pd.DataFrame,
        chunk: Sequence[Unit],
        task: str,
        prefix: str = "diffscore",
        model: Any = None,
        cache_key: str = "zs",
    ) -> dict: ...


@dataclass(frozen=True)
class FamilyOption:
    """A command-line option of a metric family: ``flag`` sets the ``SuiteOptions`` field ``field`` (default: the
    flag's name, ``--bertscore-model`` -> ``bertscore_model``). A flag that is not given sets nothing, so the
    field's default is the one default. ``action`` "store_true" / "store_false" makes a switch (which sets the
    field True / False); otherwise the flag takes a value, converted by ``type``."""

    flag: str
    help: str
    field: str = ""
    type: Callable[[str], Any] | None = None
    metavar: str | None = None
    action: str | None = None

    @property
    def dest(self) -> str:
        """The ``SuiteOptions`` field the option sets (the parsed arguments' attribute too)."""
        return self.field or self.flag.lstrip("-").replace("-", "_")

    def add_to(self, parser) -> None:
        """Add the flag to an argparse parser or group."""
        import argparse

        kw: dict[str, Any] = {"dest": self.dest, "default": argparse.SUPPRESS, "help": self.help}
        if self.action is not None:
            kw["action"] = self.action
        else:
            kw.update(type=self.type, metavar=self.metavar)
        parser.add_argument(self.flag, **kw)


class MetricFamily:
    """One component of the suite. Instances are made by the suite (``family(suite)``), one per suite; a family
    talks to it only through :class:`SuiteAPI`."""

    #: ``--metrics`` name, the ``family`` of the result records, the key of ``Suite.components``
    name: ClassVar[str] = ""
    #: the run kind in the store
    kind: ClassVar[str] = ""
    #: chosen with ``--metrics`` (False: switched on by an option of its own, see :meth:`enabled`)
    listed: ClassVar[bool] = True
    #: run when ``--metrics`` is not given
    default: ClassVar[bool] = True
    #: place among the families: scoring order and table row order (built-ins: lexical 10, embedding 20,
    #: ar 30, diffscore 40, ft 50; ties keep registration order)
    rank: ClassVar[float] = 100
    #: metric ids in table order (ids not listed sort after them, by label)
    order: ClassVar[tuple[str, ...]] = ()
    #: the id of the family's "(paper mapping)" row, if it has one (see :meth:`mapped_source`)
    mapped: ClassVar[str | None] = None
    #: the paper's baseline row this family provides (None: none); a suite that does not run it gets a row
    #: "NAME (absent: why)" in its tables (:meth:`absent`)
    paper_row: ClassVar[str | None] = None
    #: what the family needs to run, for that row and for errors (e.g. "--unieval-model DIR or --allow-download")
    needs: ClassVar[str] = ""
    #: the family forwards padded batches of ``SuiteOptions.ar_batch_size`` rows (its AR, seq2seq or encoder
    #: model): the batch size is then part of its run configuration, since which rows share a forward pass moves a
    #: score's last bits (the AR family on SummEval, 24 items, batch 1 vs 8: 26 of 224 scores, at most 1.8e-8:
    #: benchmarks/bench_batch_bits.py)
    batched: ClassVar[bool] = False
    #: the family's command-line options (``dlmeval meta-eval`` shows them as one group, titled
    #: :attr:`options_title`, and passes each to its ``SuiteOptions`` field)
    options: ClassVar[tuple[FamilyOption, ...]] = ()
    #: what the family's options configure, for the title of their group (default: the family's name)
    options_title: ClassVar[str] = ""
    #: the checkpoints it loads, for ``meta-eval --plan``: ``(SuiteOptions field, what, default hub ids)`` (the
    #: field's value when set, else the first default hub id found in the local cache)
    checkpoints: ClassVar[tuple[tuple[str, str, tuple[str, ...]], ...]] = ()

    @classmethod
    def tools(cls, opts: Any) -> list[tuple[str, str]]:
        """Other things the family needs on this machine, for ``meta-eval --plan``: ``(what, present or why
        not)``."""
        return []

    def __init__(self, suite: SuiteAPI):
        self.suite = suite
        self._run = None

    @property
    def opts(self):
        """The suite's options (read through the suite: an analysis may replace them on a built suite)."""
        return self.suite.opts

    # ------------------------------------------------------------------ selection
    @classmethod
    def enabled(cls, opts: Any) -> bool:
        """Whether the suite runs this family under ``opts``."""
        return cls.name in opts.selected_families()

    @classmethod
    def absent(cls, opts: Any) -> str | None:
        """Why this family's paper row is not in a suite run under ``opts`` (None: it runs)."""
        if cls.enabled(opts):
            return None
        return f"not run; add it with --metrics ... {cls.name}" + (f" ({cls.needs})" if cls.needs else "")

    def applies(self, bench: Benchmark) -> bool:
        """Whether the family scores ``bench`` at all (default: every benchmark)."""
        return True

    # ------------------------------------------------------------------ the run
    def load(self) -> None:
        """Load the models the family needs (called before any run is opened: a bad spec fails early)."""

    def configuration(self) -> dict[str, Any]:
        """The run configuration: everything the scores depend on besides the models and the seed."""
        raise NotImplementedError

    def models(self) -> list[Any]:
        """Models (or identities) recorded in the run's signature."""
        return []

    def opened(self, run: Any) -> None:
        """Called once the run is open (e.g. to record a warning about what is unavailable)."""

    @property
    def run(self):
        if self._run is None:
            config = self.configuration()
            if self.batched:
                config = {**config, "ar_batch_size": self.opts.ar_batch_size}
            self._run = self.suite.open_run(self.kind, config, self.models())
            self.opened(self._run)
        return self._run

    @property
    def family(self) -> str:  # the old Component.family
        return self.name

    # ------------------------------------------------------------------ scoring
    def metrics(self, bench: Benchmark) -> list[str]:
        """Metric ids this family yields on ``bench`` (each stored as ``"{row key}|{metric id}"``)."""
        raise NotImplementedError

    def reported(self, bench: Benchmark, protocol: str | None = None) -> list[str]:
        """The metric ids that become rows of ``bench``'s results (default: every stored one, :meth:`metrics`); a
        family that stores P / R / F variants reports the one suite protocol ``protocol`` (default: the suite's
        ``--protocol``) uses there (:func:`~dlmeval.protocols.diffscore.paper_protocols.metric_variant`)."""
        return self.metrics(bench)

    def compute(self, frame: pd.DataFrame, chunk: list[Unit]) -> dict[str, dict[str, dict[str, Any]]]:
        """``{unit uid: {metric id: result dict with a "score"}}`` for one chunk (read a unit's texts from
        ``frame.iloc[unit.rows[0]]``)."""
        raise NotImplementedError

    def score(self, bench: Benchmark, frame: pd.DataFrame, units: Sequence[Unit], done: set[str]) -> int:
        """Compute and store every pending unit of ``bench``; returns the units computed. Default: the suite's
        chunk loop over :meth:`compute` (override for a family that needs more, e.g. DiffScore-FT's adapters)."""
        from dlmeval.protocols.diffscore.meta_eval.work import run_chunks

        return run_chunks(
            self.run,
            frame,
            units,
            self.metrics(bench),
            lambda chunk: self.compute(frame, chunk),
            chunk_size=self.opts.chunk_size,
            done=done,
            label=f"{bench.name} {self.name}",
            progress=self.opts.progress,
        )

    # ------------------------------------------------------------------ tables
    def label(self, metric: str) -> str:
        """The table row label of a metric id (also of :attr:`mapped`)."""
        raise NotImplementedError

    def mapped_source(self, bench: Benchmark, dimension: str) -> str | None:
        """The metric id whose scores the :attr:`mapped` row reads on ``(bench, dimension)`` (None: no row)."""
        return None

    def comparisons(self, rows: Sequence[str]) -> list[tuple[str, str]]:
        """Significance tests on the primary protocol: ``(metric a, metric b)`` pairs among the benchmark's
        ``rows`` (default: none)."""
        return []


#: listed in rank (table) order, ties in registration order
METRIC_FAMILIES: Registry[type[MetricFamily]] = Registry("metric family", order=lambda c: c.rank)


def register_family(cls: type[MetricFamily]) -> type[MetricFamily]:
    """Class decorator: make a metric family available by its ``name`` (a name taken by another class is
    refused)."""
    if not getattr(cls, "name", None) or not getattr(cls, "kind", None):
        raise TypeError(f"{cls.__name__} needs class attributes `name` and `kind`")
    if not issubclass(cls, MetricFamily):
        raise TypeError(f"{cls.__name__} is not a MetricFamily")
    return METRIC_FAMILIES.add(cls.name, cls)


def get_family(name: str) -> type[MetricFamily]:
    if name not in METRIC_FAMILIES:
        raise InputError(f"unknown metric family {name!r}; choose from {', '.join(family_names())}")
    return METRIC_FAMILIES[name]


def family_options() -> list[tuple[type[MetricFamily], FamilyOption]]:
    """Every registered family's options, in rank order: ``(family, option)``."""
    return [(cls, o) for cls in METRIC_FAMILIES.values() for o in cls.options]


def option_values(args: Any) -> dict[str, Any]:
    """``SuiteOptions`` keywords from parsed arguments: the family options that were given (``dest: value``)."""
    return {o.dest: getattr(args, o.dest) for _, o in family_options() if hasattr(args, o.dest)}


def family_names() -> tuple[str, ...]:
    """The families ``--metrics`` chooses from, in rank (table) order."""
    return tuple(n for n, c in METRIC_FAMILIES.items() if c.listed)


def refs_label(name: str, opts) -> str:
    """A likelihood family's model label, with the reference limit (``--ar-max-refs``) when one applies."""
    return name if opts.ar_max_refs is None else f"{name}, best of first {opts.ar_max_refs} refs"


def refs_config(cfg: dict[str, Any], opts) -> dict[str, Any]:
    """A likelihood family's run configuration ``cfg`` with the reference limit (``max_refs``, from
    ``--ar-max-refs``) added last when one applies: the configuration side of :func:`refs_label`."""
    if opts.ar_max_refs is not None:
        cfg["max_refs"] = int(opts.ar_max_refs)
    return cfg
