"""The meta-evaluation's registries: a benchmark in another file format and a metric family are each one
registration, and the suite runs them end to end (values checked against a direct computation)."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from dlmeval.errors import InputError
from dlmeval.protocols.diffscore.meta_eval import (
    BENCHMARKS,
    METRIC_FAMILIES,
    SUITES,
    TABLE_ORDER,
    Benchmark,
    MetricFamily,
    SuiteOptions,
    get_benchmark,
    register_benchmark,
    register_family,
    run_suite,
    scoring_frame,
)
from dlmeval.store import RunStore

TOY = [  # a data-to-text set in JSON lines: one judged output per line
    {
        "id": "a",
        "mr": "name[Aromi] food[Thai]",
        "ref": "Aromi serves Thai food.",
        "out": "Aromi serves Thai food.",
    },
    {
        "id": "b",
        "mr": "name[Aromi] food[Thai]",
        "ref": "Aromi serves Thai food.",
        "out": "Aromi is a Thai place.",
    },
    {
        "id": "c",
        "mr": "name[Bibi] area[city]",
        "ref": "Bibi is in the city.",
        "out": "Bibi is in the city centre.",
    },
    {"id": "d", "mr": "name[Bibi] area[city]", "ref": "Bibi is in the city.", "out": "A restaurant."},
    {
        "id": "e",
        "mr": "name[Cote] price[high]",
        "ref": "Cote is expensive.",
        "out": "Cote is an expensive place.",
    },
    {"id": "f", "mr": "name[Cote] price[high]", "ref": "Cote is expensive.", "out": "Cheap food at Dino."},
]
HUMAN = [5.0, 3.0, 4.0, 1.0, 4.5, 2.0]


@pytest.fixture
def registries():
    """Whatever a test registers is gone afterwards."""
    saved = dict(BENCHMARKS), dict(SUITES), list(TABLE_ORDER), dict(METRIC_FAMILIES)
    yield
    for live, old in zip((BENCHMARKS, SUITES, TABLE_ORDER, METRIC_FAMILIES), saved):
        live.clear()
        live.update(old) if hasattr(live, "update") else live.extend(old)


def _toy_reader(b: Benchmark, data_dir, limit) -> pd.DataFrame:
    rows = [json.loads(line) for line in b.data_file(data_dir).read_text().splitlines()][:limit]
    return pd.DataFrame(
        {
            "key": [f"{b.name}/{r['id']}" for r in rows],
            "benchmark": b.name,
            "task": b.task,
            "doc_id": [r["mr"] for r in rows],
            "system": None,
            "source": [r["mr"] for r in rows],
            "cond_source": [r["mr"] for r in rows],
            "targets": [(r["ref"],) for r in rows],
            "has_reference": True,
            "candidate": [r["out"] for r in rows],
            "quality": [float(r["quality"]) for r in rows],
        }
    )


def _register_toy(path):
    return register_benchmark(
        Benchmark(
            name="ToyD2T",
            task="TOY",
            dimensions=("quality",),
            protocols=("spearman", "pearson"),
            reader=_toy_reader,
            data_file=lambda data_dir: path,
            table="toy",
            configs={"quality": "bidir"},
            prompt="describe",
            suite="toy",
        )
    )


def test_a_benchmark_in_another_format_is_one_registration(tmp_path, registries):
    from dlmeval.baselines.lexical import bleu

    path = tmp_path / "toy.jsonl"
    path.write_text("".join(json.dumps({**r, "quality": h}) + "\n" for r, h in zip(TOY, HUMAN)))
    _register_toy(path)
    assert get_benchmark("toyd2t").name == "ToyD2T" and get_benchmark("TOY/ToyD2T").task == "TOY"
    assert SuiteOptions(suite="toy").resolved_benchmarks() == ("ToyD2T",)
    assert SuiteOptions(suite="toy", benchmarks=("TOY",)).resolved_benchmarks() == ("ToyD2T",)
    assert len(scoring_frame("ToyD2T", limit=4)) == 4
    opts = SuiteOptions(suite="toy", families=("lexical",), bootstrap=0, progress=False)
    rep = run_suite(opts, RunStore(tmp_path / "s.sqlite"), out_dir=tmp_path / "out")
    res = rep.results.set_index(["metric", "protocol"])
    expected = [bleu(r["out"], (r["ref"],)) for r in TOY]
    assert res.loc[("bleu", "spearman"), "value"] == pytest.approx(stats.spearmanr(expected, HUMAN)[0])
    assert res.loc[("bleu", "pearson"), "value"] == pytest.approx(stats.pearsonr(expected, HUMAN)[0])
    assert bool(res.loc[("bleu", "spearman"), "primary"]) and not bool(
        res.loc[("bleu", "pearson"), "primary"]
    )
    # its own paper-style table, columns labelled by dimension and protocol
    assert list(rep.tables["toy"].columns) == ["ToyD2T QUA (rho)", "avg"]
    assert rep.tables["toy"].loc["BLEU (sacrebleu)", "ToyD2T QUA (rho)"] == pytest.approx(
        stats.spearmanr(expected, HUMAN)[0]
    )
    assert (tmp_path / "out" / "toy.md").is_file()
    stored = RunStore(tmp_path / "s.sqlite").get_run(rep.components["lexical"]).results()
    assert stored["ToyD2T/c|bleu"]["score"] == pytest.approx(expected[2])


def test_benchmark_registration_rejects_what_the_suite_could_not_run(tmp_path, registries, capsys):
    base = dict(
        name="Bad",
        task="TOY",
        dimensions=("quality",),
        protocols=("spearman",),
        reader=_toy_reader,
        data_file=lambda d: tmp_path,
        table="toy",
        prompt="describe",
        configs={"quality": "cond"},
    )
    with pytest.raises(InputError, match="unknown protocols"):
        register_benchmark(Benchmark(**{**base, "protocols": ("median_rank",)}))
    with pytest.raises(InputError, match="no prompt"):
        register_benchmark(Benchmark(**{**base, "prompt": None}))
    with pytest.raises(InputError, match="no DiffScore configuration"):
        register_benchmark(Benchmark(**{**base, "configs": {"fluency": "marginal"}}))
    assert "Bad" not in BENCHMARKS
    with pytest.raises(InputError, match="unknown BARTScore benchmark 'Bad'"):
        get_benchmark("Bad")
    # the command takes any registered suite and refuses an unknown one with the registered names
    from dlmeval.cli.main import main

    store = tmp_path / "s.sqlite"
    assert main(["--store", str(store), "meta-eval", "--suite", "nosuch", "--metrics", "lexical"]) == 2
    assert "unknown suite 'nosuch'; choose one of bartscore" in capsys.readouterr().err
    assert not store.exists()  # validated before the store was created


def _length_family():
    @register_family
    class LengthFamily(MetricFamily):
        """Candidate length in words, a family defined in a test."""

        name = "length"
        kind = "meta-eval-length"
        rank = 15  # between the lexical and the embedding baselines
        default = False
        order = ("length:words",)

        def configuration(self):
            return {"unit": "words"}

        def metrics(self, bench):
            return ["length:words"]

        def compute(self, frame, chunk):
            return {
                u.uid: {"length:words": {"score": len(frame["candidate"].iat[u.rows[0]].split())}}
                for u in chunk
            }

        def label(self, metric):
            return "Length (words)"

        def comparisons(self, rows):
            return [("length:words", "bleu")] if "bleu" in rows else []

    return LengthFamily


def test_a_metric_family_is_one_registration(tmp_path, data_root, registries):
    _length_family()
    assert list(METRIC_FAMILIES).index("length") == list(METRIC_FAMILIES).index("lexical") + 1
    assert "length" not in SuiteOptions().selected_families()  # default = False
    with pytest.raises(InputError, match="unknown metric family"):
        SuiteOptions(families=("lenght",)).check()
    opts = SuiteOptions(
        benchmarks=("QAGS_XSUM",),
        limit=8,
        families=("lexical", "length"),
        bootstrap=10,
        data_dir=str(data_root),
        progress=False,
    )
    store = RunStore(tmp_path / "s.sqlite")
    rep = run_suite(opts, store)
    frame = scoring_frame("QAGS_XSUM", data_root, limit=8)
    words = [len(c.split()) for c in frame["candidate"]]
    row = rep.results[(rep.results["metric"] == "length:words") & (rep.results["protocol"] == "pearson")]
    assert row["value"].item() == pytest.approx(stats.pearsonr(words, frame["fact"])[0])
    assert row["family"].item() == "length" and row["label"].item() == "Length (words)"
    # its run is its own, its rows sit by rank, its comparison was made
    assert store.get_run(rep.components["length"]).signature.kind == "meta-eval-length"
    rows = list(rep.tables["sum"].index)
    assert rows.index("Length (words)") == rows.index("METEOR (nltk)") + 1 or "METEOR (nltk)" not in rows
    cmp = rep.comparisons[rep.comparisons["metric_a"] == "length:words"]
    assert list(cmp["metric_b"]) == ["bleu"] and cmp["test"].item() == "williams"
    np.testing.assert_allclose(
        [store.get_run(rep.components["length"]).get(f"{k}|length:words")["score"] for k in frame["key"]],
        words,
    )


def test_family_registration_needs_a_name_and_a_kind():
    class Nameless(MetricFamily):
        kind = "meta-eval-x"

    with pytest.raises(TypeError, match="name"):
        register_family(Nameless)
    assert "x" not in METRIC_FAMILIES
