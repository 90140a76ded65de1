"""The bad-input battery, data-field part (issue 32): an identifier or label of the wrong type in a user's data file
(``--benchmark-source`` rows, ``--candidates`` ids, task rows, ``--ft-train`` pairs) is refused before any store opens,
in one line naming the file, the row and the field; it used to be ``str()``-ed or cut to an integer and quietly
regroup the outputs (and change the tables)."""

from __future__ import annotations

import json
import re

import pandas as pd
import pytest

from dlmeval.data.bartscore_hub import load_bartscore_source
from dlmeval.data.rows import arc_items, hellaswag_items
from dlmeval.errors import DataFormatError
from tests.protocols.diffscore.meta_eval.test_meta_eval_hub import _cli, _error, summeval_rows


def _jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@pytest.mark.parametrize(
    "value,named",
    [(1.5, r"float \(1\.5\)"), (["d1"], r"list \(\['d1'\]\)"), (True, r"bool \(True\)"), (None, "NoneType"),
     ({"id": 1}, "dict"), ("  ", "an empty string")],
    ids=["float", "list", "bool", "null", "object", "blank"],
)  # fmt: skip
def test_benchmark_source_doc_id_of_a_wrong_type_fails_before_the_store(tmp_path, capsys, value, named):
    rows = summeval_rows()
    rows[4]["doc_id"] = value
    path = _jsonl(tmp_path / "se.jsonl", rows)
    store = tmp_path / "s.sqlite"
    rc = _cli(store, tmp_path / "o", "--benchmarks", "SummEval", "--benchmark-source", f"SummEval={path}",
              "--metrics", "lexical")  # fmt: skip
    err = _error(capsys.readouterr().err)
    assert rc == 2 and not store.exists()
    assert str(path) in err and "--benchmark-source SummEval" in err and "row 4: field 'doc_id' is" in err
    assert re.search(named, err), err


def test_benchmark_source_doc_ids_of_two_types_fail():
    # the rows as a reader that keeps each value's type gives them (the datasets JSON reader casts a column to
    # one type itself; a save_to_disk dataset of Python objects or another reader need not)
    from dlmeval.data.bartscore import resolve_bartscore_name
    from dlmeval.data.bartscore_hub import _text_frame, _Where

    b = resolve_bartscore_name("SummEval")
    rows = summeval_rows()
    for r in rows:  # integers 0, 1, 2 ...
        r["doc_id"] = int(r["doc_id"][1:])
    rows[5]["doc_id"] = "1"  # ... and one "1": the same document as 1, or another?
    with pytest.raises(DataFormatError, match=r"row 5: field 'doc_id' is str \('1'\) but int in row 0"):
        _text_frame(b, rows, _Where(b, "--benchmark-source SummEval (toy)"))


def test_benchmark_source_integer_doc_ids_group_as_their_strings(tmp_path):
    rows = summeval_rows()
    as_text = load_bartscore_source("SummEval", str(_jsonl(tmp_path / "s.jsonl", rows)))[0]
    for r in rows:
        r["doc_id"] = int(r["doc_id"][1:])
    p = tmp_path / "i.parquet"
    pd.DataFrame(rows).to_parquet(p)  # an int64 column
    as_int = load_bartscore_source("SummEval", str(p))[0]
    assert list(as_int["doc_id"]) == [str(int(d[1:])) for d in as_text["doc_id"]]
    assert as_int["doc_id"].nunique() == as_text["doc_id"].nunique() == 3


def test_benchmark_source_system_of_a_wrong_type_or_missing_fails(tmp_path):
    rows = summeval_rows()
    rows[2]["sys_name"] = 3.0
    with pytest.raises(
        DataFormatError, match=r"row 2: field 'sys_name' is float \(3\.0\), expected a string"
    ):
        load_bartscore_source("SummEval", str(_jsonl(tmp_path / "a.jsonl", rows)))
    rows[2]["sys_name"] = None
    with pytest.raises(DataFormatError, match=r"row 2: field 'sys_name' is missing \(None\)"):
        load_bartscore_source("SummEval", str(_jsonl(tmp_path / "b.jsonl", rows)))


def test_benchmark_source_wmt_pair_id_of_a_wrong_type_fails(tmp_path):
    rows = [
        {"src": f"s {i}", "ref": "r", "better": "b", "worse": "w", "better_system": "A", "worse_system": "B",
         "pair_id": i}
        for i in range(4)
    ]  # fmt: skip
    rows[3]["pair_id"] = (
        2.5  # the reader makes the whole column floats: 0.0, 1.0, ... (keys "0.0", ... before)
    )
    with pytest.raises(DataFormatError, match=r"row 0: field 'pair_id' is float \(0\.0\), expected a string"):
        load_bartscore_source("gu-en", str(_jsonl(tmp_path / "w.jsonl", rows)))


def test_candidates_id_of_a_wrong_type_fails_before_the_store(tmp_path, capsys):
    from dlmeval.cli.main import main

    path = _jsonl(
        tmp_path / "c.jsonl", [{"text": "the cat sat", "id": "a"}, {"text": "a dog ran", "id": [2]}]
    )
    store = tmp_path / "s.sqlite"
    rc = main(["--store", str(store), "score", "--model", "tiny-llada", "--candidates", str(path)])
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert rc == 2 and not store.exists()
    assert f"{path}:2: field 'id' is list ([2]), expected a string or an integer" in err


def test_task_rows_labels_of_a_wrong_type_fail():
    ok = {"ctx_a": "A man", "ctx_b": "walks", "activity_label": "Walking", "endings": ["a", "b", "c", "d"]}
    assert hellaswag_items([{**ok, "label": "2"}])[0].gold == 2  # the hub's string label
    # "²" and "٣" pass str.isdigit but are no index of a hub label: a clear error, not int()'s ValueError
    for bad in (2.7, True, None, "two", "²", "٣"):
        with pytest.raises(DataFormatError, match=r"hellaswag row 0: field 'label' is"):
            hellaswag_items([{**ok, "label": bad}])
    arc = {"question": "Q?", "choices": {"text": ["x", "y"], "label": ["A", "B"]}, "answerKey": "B"}
    assert arc_items([arc])[0].gold == 1
    with pytest.raises(DataFormatError, match="field 'answerKey' is int"):
        arc_items([{**arc, "answerKey": 1}])
    with pytest.raises(DataFormatError, match="'choices.label' must be a list of strings"):
        arc_items([{**arc, "choices": {"text": ["x", "y"], "label": [1, 2]}}])


def test_ft_train_pairs_of_a_wrong_type_fail(tmp_path):
    from dlmeval.protocols.diffscore.ft_data import _pairs

    rows = [{"document": "a text", "summary": "short"}, {"document": 7, "summary": "x"}]
    with pytest.raises(DataFormatError, match=r"row 1: field 'document' is int, expected a string"):
        _pairs(rows, "toy")
    rows[1] = {"document": "b", "summary": None}
    with pytest.raises(DataFormatError, match=r"row 1: field 'summary' is NoneType"):
        _pairs(rows, "toy")
    assert _pairs([{"document": "a", "summary": "s"}, {"document": "b", "summary": " "}], "toy") == [
        {"source": "a", "target": "s"}
    ]
