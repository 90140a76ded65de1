"""Meta-evaluation benchmarks read from 🤗 datasets built on disk with ``datasets`` itself
(``--benchmark-source NAME[:SPLIT]=SOURCE``): the tables come out, the rows' digest is in the run identity, bad
rows and an uncached hub id fail in one line before any store exists."""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest

from dlmeval.data.bartscore_hub import load_bartscore_source
from dlmeval.errors import DataFormatError, InputError
from dlmeval.protocols.diffscore.meta_eval import SuiteOptions, run_suite
from dlmeval.store import RunStore
from tests.hub_data import cache_hub_dataset, save_dataset

DIMS = ("coherence", "consistency", "fluency", "relevance")
WORDS = "the cat sat on a mat dog ran to big red house".split()


def summeval_rows(n_docs=3, n_sys=3):
    """One row per judged output (BARTScore's SUM fields), human scores varying with system and document."""
    rows = []
    for d in range(n_docs):
        src = " ".join(WORDS[d : d + 8])
        for s in range(n_sys):
            rows.append(
                {
                    "doc_id": f"d{d}",
                    "sys_name": f"M{s}",
                    "src": src,
                    "ref_summs": [" ".join(WORDS[d : d + 4]), " ".join(WORDS[d + 1 : d + 5])],
                    "sys_summ": " ".join(WORDS[d + s : d + s + 3 + s]),
                    **{k: float((s * (i + 1) + d) % 5) + 0.5 * i for i, k in enumerate(DIMS)},
                }
            )
    return rows


def _error(err: str) -> str:
    """The one error line of a failed command (datasets' own progress lines may come before it)."""
    lines = err.strip().splitlines()
    assert lines and lines[-1].startswith("dlmeval: error:"), err
    assert sum("error" in line for line in lines) == 1, err
    return lines[-1]


def _cli(store, out, *extra):
    from dlmeval.cli.main import main

    return main(
        ["--store", str(store), "--no-progress", "--json", "meta-eval", "--limit", "6", "--bootstrap", "0",
         "--out", str(out), *extra]
    )  # fmt: skip


def test_summeval_from_a_dataset_dir_runs_and_one_changed_row_is_another_run(tmp_path, capsys):
    rows = summeval_rows()
    d1 = save_dataset(tmp_path / "se1", {"test": rows})
    args = ["--benchmarks", "SummEval", "--benchmark-source", f"SummEval={d1}", "--metrics", "lexical",
            "diffscore", "--model", "tiny-llada", "-K", "2", "-T", "2"]  # fmt: skip
    store = tmp_path / "s.sqlite"
    assert _cli(store, tmp_path / "o1", *args) == 0
    r1 = json.loads(capsys.readouterr().out)
    res = pd.DataFrame(r1["results"])
    # --limit 6 with whole documents: 2 documents x 3 systems; lexical and DiffScore rows per dimension
    assert set(res["benchmark"]) == {"SummEval"} and set(res["dimension"]) == set(DIMS)
    assert {"bleu", "diffscore:mapped"} <= set(res["metric"])
    assert res.loc[res["protocol"] == "doc_spearman", "value"].notna().any()
    assert (tmp_path / "o1" / "sum.md").is_file() and "SummEval" in (tmp_path / "o1" / "sum.md").read_text()
    st = RunStore(store)
    cfg = st.get_run(r1["run_id"]).signature.config["data"]["SummEval"]
    assert (cfg["kind"], cfg["split"], cfg["rows"]) == ("disk", "test", 9) and len(cfg["digest"]) == 16
    # the same data again: the same run; one human score changed (a row past --limit): another run
    assert _cli(store, tmp_path / "o1", *args) == 0
    assert json.loads(capsys.readouterr().out)["run_id"] == r1["run_id"]
    changed = [dict(r) for r in rows]
    changed[-1]["coherence"] += 1.0
    d2 = save_dataset(tmp_path / "se2", {"test": changed})
    args2 = [a.replace(d1, d2) for a in args]
    assert _cli(store, tmp_path / "o2", *args2) == 0
    r2 = json.loads(capsys.readouterr().out)
    assert r2["run_id"] != r1["run_id"]
    assert st.get_run(r2["run_id"]).signature.config["data"]["SummEval"]["digest"] != cfg["digest"]
    # the per-item component runs are shared: the texts did not change, so nothing is rescored
    assert r2["components"] == r1["components"]


def test_d2t_per_document_lists_and_wmt_pairs_from_jsonl_and_parquet(tmp_path, monkeypatch):
    import datasets.config

    # BAGEL in the mteb/summeval shape (one row per document, lists of outputs and scores), cached as a hub id
    docs = [
        {"text": f"inform(name={w})", "references": [f"the {w} is big", f"a {w}"],
         "machine_summaries": [f"the {w}", f"{w} is red", "big"],
         "scores": [{"informativeness": i + k, "naturalness": 2.0 * k, "quality": float(k == i)} for k in range(3)]}
        for i, w in enumerate(("cat", "dog", "mat"))
    ]  # fmt: skip
    cache = tmp_path / "hf-cache"
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", cache)
    cache_hub_dataset(cache, "toy/bagel", "default", {"test": docs})
    frame, prov = load_bartscore_source("BAGEL", "toy/bagel")
    assert len(frame) == 9 and list(frame["system"][:3]) == ["0", "1", "2"]
    assert list(frame["informativeness"][:3]) == [0.0, 1.0, 2.0] and frame["doc_id"].nunique() == 3
    assert (prov["kind"], prov["id"], prov["rows"]) == ("hub", "toy/bagel", 3)
    wmt = tmp_path / "gu.parquet"
    pairs = [{"src": f"x{i}", "ref": "the cat sat", "better": "the cat sat", "worse": WORDS[i],
              "better_system": "A", "worse_system": "B"} for i in range(4)]  # fmt: skip
    pd.DataFrame(pairs).to_parquet(wmt)
    opts = SuiteOptions(
        benchmarks=("BAGEL", "gu-en"),
        sources=(("BAGEL", "toy/bagel", None), ("gu-en", str(wmt), None)),
        families=("lexical",),
        bootstrap=0,
        progress=False,
    )
    rep = run_suite(opts, RunStore(tmp_path / "s.sqlite"), out_dir=tmp_path / "out")
    res = rep.results.set_index(["benchmark", "metric", "protocol"])["value"]
    # every better output equals its reference: BLEU ranks it first in each of the 4 pairs
    assert res[("gu-en", "bleu", "darr_tau")] == pytest.approx(1.0)
    bagel = rep.results[(rep.results["benchmark"] == "BAGEL") & (rep.results["protocol"] == "spearman")]
    assert set(bagel["dimension"]) == {"informativeness", "naturalness", "quality"}
    assert not any(math.isnan(v) for v in bagel.loc[bagel["metric"] == "bleu", "value"])
    assert (tmp_path / "out" / "mt.md").is_file() and (tmp_path / "out" / "d2t.md").is_file()
    cfg = rep.run.signature.config["data"]
    assert cfg["gu-en"]["kind"] == "parquet" and cfg["BAGEL"]["id"] == "toy/bagel"


@pytest.mark.parametrize(
    "field,value,expect",
    [
        (
            "fluency",
            float("nan"),
            r"row 4 \(doc 'd1', system 'M1'\): human score 'fluency' is nan, not a finite",
        ),
        ("relevance", float("inf"), r"row 4 .*human score 'relevance' is inf"),
        ("relevance", None, r"row 4 .*human score 'relevance' is missing or not a number"),
    ],
)
def test_bad_human_scores_fail_in_one_line_before_the_store(tmp_path, capsys, field, value, expect):
    rows = summeval_rows()
    rows[4][field] = value
    path = tmp_path / "se.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))  # json writes NaN / Infinity, as pandas does
    store = tmp_path / "s.sqlite"
    rc = _cli(store, tmp_path / "o", "--benchmarks", "SummEval", "--benchmark-source", f"SummEval={path}",
              "--metrics", "lexical")  # fmt: skip
    err = _error(capsys.readouterr().err)
    assert rc == 2 and not store.exists()
    assert str(path) in err and "--benchmark-source SummEval" in err
    import re

    assert re.search(expect, err), err


def test_wrong_types_and_missing_fields_are_named(tmp_path):
    rows = summeval_rows()
    p = tmp_path / "a.jsonl"
    p.write_text("".join(json.dumps({k: v for k, v in r.items() if k != "consistency"}) + "\n" for r in rows))
    with pytest.raises(DataFormatError, match="no human score for dimension 'consistency'"):
        load_bartscore_source("SummEval", str(p))
    p2 = tmp_path / "b.parquet"  # scores written as text: a string column
    pd.DataFrame(rows).astype({"coherence": str}).to_parquet(p2)
    with pytest.raises(
        DataFormatError, match=r"row 0 .*human score 'coherence' is missing or not a number \('0.0'\)"
    ):
        load_bartscore_source("SummEval", str(p2))
    p3 = tmp_path / "c.jsonl"
    p3.write_text("".join(json.dumps({k: v for k, v in r.items() if k != "sys_name"}) + "\n" for r in rows))
    with pytest.raises(DataFormatError, match="needs a system name"):
        load_bartscore_source("SummEval", str(p3))
    p5 = tmp_path / "e.jsonl"
    p5.write_text("".join(json.dumps({**r, "sys_summ": 7}) + "\n" for r in rows))
    with pytest.raises(DataFormatError, match=r"row 0: field 'sys_summ' is int, expected a string"):
        load_bartscore_source("SummEval", str(p5))
    dup = rows + [rows[0]]
    p4 = tmp_path / "d.jsonl"
    p4.write_text("".join(json.dumps(r) + "\n" for r in dup))
    with pytest.raises(DataFormatError, match="doc 'd0' system 'M0' repeats row 0"):
        load_bartscore_source("SummEval", str(p4))


def test_uncached_hub_id_and_bad_flags_fail_in_one_line_without_a_store(tmp_path, capsys, monkeypatch):
    import datasets.config

    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", tmp_path / "empty-cache")
    store = tmp_path / "s.sqlite"
    rc = _cli(store, tmp_path / "o", "--benchmarks", "SummEval", "--benchmark-source",
              "SummEval=nobody/absent-summeval", "--metrics", "lexical")  # fmt: skip
    err = capsys.readouterr().err.strip()
    assert rc == 2 and len(err.splitlines()) == 1 and not store.exists()  # nothing read: no datasets lines
    assert (
        "--allow-download" in err and "nobody/absent-summeval" in err and "--benchmark-source SummEval" in err
    )
    d = save_dataset(tmp_path / "se", {"test": summeval_rows()})
    for extra, msg in (
        (["--benchmarks", "Rank19", "--benchmark-source", f"SummEval={d}"], "not among the benchmarks run"),
        (["--benchmarks", "SummEval", "--benchmark-source", d], "write NAME=SOURCE"),
        (["--benchmarks", "SummEval", "--benchmark-source", f"SummEval:dev={d}"], "no split 'dev'"),
    ):
        assert _cli(store, tmp_path / "o", *extra, "--metrics", "lexical") == 2
        err = _error(capsys.readouterr().err)
        assert msg in err and not store.exists(), err
    with pytest.raises(InputError, match="more than once"):
        SuiteOptions(benchmarks=("SummEval",), sources=(("SummEval", d, None), ("summeval", d, None))).check()


def test_ranks_compare_the_dataset_a_benchmark_source_names(tmp_path):
    from dlmeval.parallel.inputs import compare, local_inputs

    d = save_dataset(tmp_path / "se", {"test": summeval_rows()})
    argv = ["meta-eval", "--benchmark-source", "SummEval=se", "--benchmarks", "SummEval"]
    got = local_inputs(argv, cwd=str(tmp_path))
    assert got["se"][0] == d and compare([got, dict(got)]) is None
    rows = summeval_rows()
    rows[0]["coherence"] = 4.0
    save_dataset(tmp_path / "se", {"test": rows})  # another copy of the dataset on "another rank"
    assert compare([got, local_inputs(argv, cwd=str(tmp_path))]).startswith("ranks read different inputs: se")


def test_diffscore_ft_trains_and_signs_on_the_sourced_rows(tmp_path, data_root):
    from dlmeval.protocols.diffscore.meta_eval import SuiteInputs
    from dlmeval.protocols.diffscore.meta_eval.families import METRIC_FAMILIES

    d = save_dataset(tmp_path / "se", {"test": summeval_rows()})
    opts = SuiteOptions(benchmarks=("SummEval",), sources=(("SummEval", d, None),), ft=True,
                        families=("lexical",), data_dir=str(data_root), progress=False)  # fmt: skip
    ft = METRIC_FAMILIES["ft"](SuiteInputs(opts))
    data = ft.configuration()["data"]
    assert data["SummEval"]["digest"] == load_bartscore_source("SummEval", d)[1]["digest"]
    assert isinstance(data["Newsroom"], str)  # the pool's other sets: their files' digests
    assert len(ft.context.frame_of("SummEval")) == 9  # the decontamination / training frame: the sourced rows
