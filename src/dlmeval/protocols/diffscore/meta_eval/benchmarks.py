"""Benchmarks of the meta-evaluation as registered entries: where the data come from and how they are judged.

A :class:`Benchmark` says everything the suite needs to know about one judged data set: its reader (file format
-> :func:`scoring_frame` layout), its human dimensions, its protocols (the first is the headline number), the
paper-style table it goes in, whether its targets are references, and the DiffScore configuration each dimension
maps to. :func:`register_benchmark` makes one available by name to ``--benchmarks`` (and to its suite and task
group); the 12 BARTScore sets are registered at the bottom of this module.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from dlmeval.data.bartscore import BARTSCORE_BENCHMARKS, bartscore_path, load_bartscore
from dlmeval.data.bartscore_hub import load_bartscore_source
from dlmeval.errors import InputError
from dlmeval.protocols.diffscore import paper_protocols as P
from dlmeval.registry import Registry

#: task prompts for instruction-tuned diffusion models (``prompt="auto"``); see scoring.configs.PROMPTS. These go
#: into the DiffScore run's configuration as they are; a benchmark of another task brings its own (``prompt``).
TASK_PROMPTS = {"SUM": "summarize", "D2T": "describe", "WMT": "plain"}

#: the paper-style wide tables, in output order (a benchmark names its ``table``; a new name is appended)
TABLE_ORDER = ["mt", "sum", "d2t"]


@dataclass(frozen=True)
class BenchmarkSource:
    """A benchmark's data from a 🤗 dataset instead of its file (``--benchmark-source NAME[:SPLIT]=SOURCE``): a
    hub id (read from the ``datasets`` cache; fetched only with ``allow_download``), a ``save_to_disk``
    directory, or a parquet / JSONL / CSV file; ``split`` (None: the only split, else ``test``)."""

    source: str
    split: str | None = None
    allow_download: bool = False


@dataclass(frozen=True)
class Benchmark:
    """One judged data set.

    ``reader(benchmark, data_dir, limit)`` returns its scoring frame (see :func:`scoring_frame` for the columns);
    ``data_file(data_dir)`` is the file whose digest goes into the configuration of the runs that depend on the
    whole file. ``source_reader(benchmark, source, limit)``, where a benchmark has one, reads the same frame from
    a :class:`BenchmarkSource` and returns it with the rows' provenance (which then stands for the file digest). ``dimensions`` are the human judgment columns of the frame (``(P.DARR,)`` for pairwise sets, whose
    frame has ``pair_id`` / ``side`` instead). ``protocols`` are names of ``paper_protocols.PROTOCOLS``, the
    first one the headline. ``has_reference``: the targets are references (False: the source stands in, the
    factuality sets); ``english_source``: the source is English text, so the source directions (AR s2h / h2s)
    apply. ``configs`` maps a dimension to the DiffScore configuration of the paper mapping (default:
    ``paper_protocols.DIMENSION_CONFIG`` by task); ``prompt`` is the task prompt when ``task`` has none in
    :data:`TASK_PROMPTS`. ``ft_pool``: its (source, reference) pairs may train DiffScore-FT for the other
    benchmarks of its suite (:mod:`dlmeval.protocols.diffscore.ft`).
    """

    name: str
    task: str
    dimensions: tuple[str, ...]
    protocols: tuple[str, ...]
    reader: Callable[[Benchmark, str | None, int | None], pd.DataFrame]
    data_file: Callable[[str | None], Path]
    table: str
    has_reference: bool = True
    english_source: bool = True
    configs: Mapping[str, str] | None = None
    prompt: str | None = None
    suite: str = "bartscore"
    ft_pool: bool = False
    #: in its suite's default set and task group only when its data file is present (named explicitly, a missing
    #: file is an error): the sets that come from ``dlmeval data import``
    optional: bool = False
    source_reader: Callable[[Benchmark, BenchmarkSource, int | None], tuple[pd.DataFrame, dict]] | None = None
    #: its reader detokenizes tokenized text and takes ``detokenizer=`` (``--detokenizer``: the BARTScore pickles)
    detokenizes: bool = False

    def present(self, data_dir: str | None = None) -> bool:
        try:
            return self.data_file(data_dir).is_file()
        except InputError:  # no data directory at all
            return False

    def frame(
        self,
        data_dir: str | None = None,
        limit: int | None = None,
        source: BenchmarkSource | None = None,
        detokenizer: str | None = None,
    ) -> pd.DataFrame:
        """The scoring frame; ``detokenizer`` (None: the reader's default) reaches readers that detokenize."""
        if source is not None:
            return self.read_source(source, limit)[0]
        if detokenizer is not None and self.detokenizes:
            return self.reader(self, data_dir, limit, detokenizer=detokenizer)
        return self.reader(self, data_dir, limit)

    def read_source(self, source: BenchmarkSource, limit: int | None = None) -> tuple[pd.DataFrame, dict]:
        """The scoring frame and the rows' provenance from a dataset source."""
        if self.source_reader is None:
            raise InputError(f"--benchmark-source {self.name}: this benchmark reads only its own data file")
        return self.source_reader(self, source, limit)

    def config_for(self, dimension: str) -> str:
        """The DiffScore configuration the paper mapping uses for a human dimension."""
        if self.configs is not None:
            if dimension not in self.configs:
                raise InputError(f"{self.name}: no DiffScore configuration for dimension {dimension!r}")
            return self.configs[dimension]
        return P.dimension_config(self.task, dimension)

    def task_prompt(self) -> str:
        return TASK_PROMPTS.get(self.task) or str(self.prompt)


BENCHMARKS: Registry[Benchmark] = Registry("benchmark")
#: suite name -> its benchmarks in registration order (``--suite``)
SUITES: dict[str, tuple[str, ...]] = {}
SUITE_TITLES = {"bartscore": "BARTScore"}


def register_benchmark(b: Benchmark) -> Benchmark:
    """Make ``b`` available by its ``name`` to ``--benchmarks``, its task group and its suite; returns it
    (a name taken by another benchmark is refused; registering an equal benchmark again is a no-op)."""
    if not isinstance(b, Benchmark) or not b.name:
        raise TypeError("register_benchmark takes a Benchmark with a name")
    bad = [p for p in b.protocols if p not in P.PROTOCOLS]
    if not b.protocols or bad:
        raise InputError(f"{b.name}: unknown protocols {bad}; choose from {', '.join(P.PROTOCOLS)}")
    if b.task not in TASK_PROMPTS and not b.prompt:
        raise InputError(
            f"{b.name}: task {b.task!r} has no prompt in TASK_PROMPTS; give the benchmark a prompt"
        )
    for dim in b.dimensions:
        b.config_for(dim)  # every dimension maps to a configuration (raises otherwise)
    if b.name in BENCHMARKS and BENCHMARKS[b.name] == b:
        b = BENCHMARKS[b.name]  # the same entry again (a module reloaded)
    BENCHMARKS.add(b.name, b)
    if b.name not in SUITES.get(b.suite, ()):
        SUITES[b.suite] = (*SUITES.get(b.suite, ()), b.name)
    if b.table not in TABLE_ORDER:
        TABLE_ORDER.append(b.table)
    return b


def get_benchmark(name: str, suite: str = "bartscore") -> Benchmark:
    """The benchmark for ``name``: exact, case-insensitive, or with its task prefix (``WMT/gu-en``)."""
    key = name.strip()
    if "/" in key:
        task, _, key = key.partition("/")
        b = get_benchmark(key, suite)
        if b.task.lower() != task.strip().lower():
            raise InputError(f"benchmark {name!r}: {b.name} is a {b.task} set, not {task}")
        return b
    if key in BENCHMARKS:  # names are case-insensitive
        return BENCHMARKS[key]
    raise InputError(
        f"unknown {SUITE_TITLES.get(suite, suite)} benchmark {name!r}; choose one of: {', '.join(BENCHMARKS)}"
    )


def task_groups(suite: str) -> dict[str, tuple[str, ...]]:
    """``{task: benchmarks of that task}`` within a suite (``--benchmarks SUM`` names a whole group)."""
    out: dict[str, tuple[str, ...]] = {}
    for name in SUITES.get(suite, ()):
        out[BENCHMARKS[name].task] = (*out.get(BENCHMARKS[name].task, ()), name)
    return out


# ---------------------------------------------------------------------------------------------- frames
def scoring_frame(
    name: str,
    data_dir: str | None = None,
    limit: int | None = None,
    source: BenchmarkSource | None = None,
    detokenizer: str | None = None,
) -> pd.DataFrame:
    """One row per scored output of benchmark ``name``, in file order.

    Columns: ``key`` (store key prefix; the loader's item id with a digest of the row's texts, ``/better`` or
    ``/worse`` appended for pairwise sets), ``benchmark``, ``task``, ``doc_id``, ``system``, ``source`` (the text
    the output was made from: article, meaning representation, or WMT foreign-language source), ``cond_source``
    (what DiffScore and the s2h/h2s directions condition on: the source, or the reference translation for WMT),
    ``targets`` (the texts reference-based metrics compare with: the references, or the source for the factuality
    sets), ``has_reference``, ``candidate``, ``candidate_raw``, ``source_raw`` (outputs sets) and ``targets_raw`` (the
    same texts as in the data file,
    before detokenization: BARTScore's pickles are tokenized), then the human dimensions (pairwise sets: ``pair_id``, ``side``).
    ``source``: read from a dataset instead of the benchmark's file. ``detokenizer``: how a tokenized data file is
    detokenized (:data:`dlmeval.data.bartscore.DETOKENIZERS`; None: Treebank).
    """
    return get_benchmark(name).frame(data_dir, limit, source, detokenizer)


def _content_digest(*texts: str) -> str:
    """12 hex digits of the texts a row's scores are computed from (part of its store key)."""
    return hashlib.sha256("\x1e".join(texts).encode("utf-8")).hexdigest()[:12]


def data_digest(name: str, data_dir: str | None = None, source: BenchmarkSource | None = None) -> str | dict:
    """A digest of the data file of benchmark ``name`` (goes into the configuration of the runs that depend on
    the whole file: the summary, DiffScore-FT); from a ``source``, the rows' provenance instead (kind, id or
    path, split, fields, row count, a digest of every row: one changed row is another run)."""
    from dlmeval.data.paths import file_digest

    if source is not None:
        return get_benchmark(name).read_source(source)[1]
    return file_digest(get_benchmark(name).data_file(data_dir))


def dimensions(name: str) -> tuple[str, ...]:
    return get_benchmark(name).dimensions


def judged_for(frame: pd.DataFrame, dimension: str) -> P.Judged:
    """The :class:`~dlmeval.protocols.diffscore.paper_protocols.Judged` view of a scoring frame."""
    docs = frame["doc_id"].to_numpy(dtype=object)
    systems = frame["system"].astype(str).to_numpy(dtype=object)
    if dimension == P.DARR:
        pos = {k: i for i, k in enumerate(frame["key"])}
        pairs = frame.loc[frame["side"] == "better", "pair_id"].tolist()
        prefix = frame["key"].str.rsplit("/", n=1).str[0]
        better = frame.index[frame["side"] == "better"].to_numpy()
        worse = np.array([pos[f"{prefix[i]}/worse"] for i in better])
        return P.Judged(docs, systems, None, better, worse, np.asarray(pairs, dtype=object))
    return P.Judged(docs, systems, frame[dimension].to_numpy(dtype=np.float64))


# ---------------------------------------------------------------------------------------------- BARTScore readers
def _limit_rows(df: pd.DataFrame, whole_docs: bool, limit: int | None) -> pd.DataFrame:
    """The first ``limit`` rows in file order; with ``whole_docs`` (SUM) the last document is completed, so
    per-document correlations stay defined."""
    if limit is None or limit >= len(df):
        return df
    if not whole_docs:
        return df.iloc[:limit]
    keep = set(df["doc_id"].iloc[:limit])
    return df[df["doc_id"].isin(keep)]


def read_bartscore_outputs(
    b: Benchmark, data_dir: str | None, limit: int | None, detokenizer: str = "treebank"
) -> pd.DataFrame:
    """SUM / D2T ``data.pkl``: one row per judged output (see :func:`dlmeval.data.bartscore.load_bartscore`)."""
    return _outputs_frame(b, load_bartscore(b.name, data_dir, detokenizer=detokenizer), limit)


def _outputs_frame(b: Benchmark, df: pd.DataFrame, limit: int | None) -> pd.DataFrame:
    df = _limit_rows(df, b.task == "SUM", limit)
    refs = [tuple(dict.fromkeys(r)) for r in df["references"]]
    raw = "candidate_raw" in df.columns  # the tokenized pickle text (the hub reader's equals the text)
    refs_raw = [tuple(dict.fromkeys(r)) for r in df["references_raw" if raw else "references"]]
    digests = [
        _content_digest(s, *rf, c) for s, rf, c in zip(df["source"], refs, df["candidate"], strict=True)
    ]
    out = pd.DataFrame(
        {
            "key": [f"{k}@{h}" for k, h in zip(df["item_id"].astype(str), digests, strict=True)],
            "benchmark": b.name,
            "task": b.task,
            "doc_id": df["doc_id"].astype(str),
            "system": df["system"],
            "source": df["source"],
            "cond_source": df["source"],
            "targets": refs if b.has_reference else [(s,) for s in df["source"]],
            "has_reference": b.has_reference,
            "candidate": df["candidate"],
            # the texts before detokenization, for the metrics BARTScore gave them to (ROUGE, see the lexical family)
            "candidate_raw": df["candidate_raw" if raw else "candidate"],
            "source_raw": df["source_raw" if raw else "source"],
            "targets_raw": refs_raw
            if b.has_reference
            else [(s,) for s in df["source_raw" if raw else "source"]],
        }
    )
    for dim in b.dimensions:
        out[dim] = df[dim].to_numpy(dtype=np.float64)
    return out.reset_index(drop=True)


def read_bartscore_pairs(b: Benchmark, data_dir: str | None, limit: int | None) -> pd.DataFrame:
    """WMT DARR ``data.pkl``: two rows (better, worse) per judged pair; DiffScore conditions on the reference
    (WMT text is not tokenized: no ``detokenizer``)."""
    return _pairs_frame(b, load_bartscore(b.name, data_dir), limit)


def read_bartscore_source(
    b: Benchmark, source: BenchmarkSource, limit: int | None
) -> tuple[pd.DataFrame, dict]:
    """A BARTScore set from a 🤗 dataset in its fields (:mod:`dlmeval.data.bartscore_hub`): the frame of the pickle
    readers and the rows' provenance."""
    df, prov = load_bartscore_source(
        b.name, source.source, split=source.split, allow_download=source.allow_download
    )
    return (_pairs_frame if b.task == "WMT" else _outputs_frame)(b, df, limit), prov


def _pairs_frame(b: Benchmark, df: pd.DataFrame, limit: int | None) -> pd.DataFrame:
    df = _limit_rows(df, False, limit)
    rows = []
    for r in df.itertuples(index=False):
        h = _content_digest(r.src, r.ref, r.better, r.worse)
        for side, cand, system in (("better", r.better, r.better_system), ("worse", r.worse, r.worse_system)):
            rows.append(
                {
                    "key": f"{r.item_id}@{h}/{side}",
                    "benchmark": b.name,
                    "task": b.task,
                    "doc_id": str(r.pair_id),
                    "system": system,
                    "source": r.src,
                    "cond_source": r.ref,
                    "targets": (r.ref,),
                    "has_reference": True,
                    "candidate": cand,
                    "candidate_raw": cand,
                    "targets_raw": (r.ref,),
                    "pair_id": str(r.pair_id),
                    "side": side,
                }
            )
    return pd.DataFrame(rows)


_TABLES = {"SUM": "sum", "D2T": "d2t", "WMT": "mt"}

for _s in BARTSCORE_BENCHMARKS.values():
    register_benchmark(
        Benchmark(
            name=_s.name,
            task=_s.task,
            dimensions=(P.DARR,) if _s.task == "WMT" else _s.dimensions,
            protocols=P.BENCHMARK_PROTOCOLS[_s.name],
            reader=read_bartscore_pairs if _s.task == "WMT" else read_bartscore_outputs,
            data_file=lambda data_dir, _n=_s.name: bartscore_path(_n, data_dir),
            table=_TABLES[_s.task],
            has_reference=not _s.reference_is_source,
            english_source=_s.task != "WMT",
            ft_pool=_s.task == "SUM" and not _s.reference_is_source,  # SummEval, Newsroom, REALSumm
            optional=not _s.shipped,
            source_reader=read_bartscore_source,
            detokenizes=_s.task != "WMT",
        )
    )
