"""The data layer: restricted unpickler, line-numbered readers, BARTScore sets and task loaders on the real files."""

from __future__ import annotations

import ast
import gzip
import os
import pickle
from collections import Counter
from pathlib import Path

import pytest

from dlmeval.data import tasks
from dlmeval.data.bartscore import (
    BARTSCORE_BENCHMARKS,
    TEXT_COLUMNS,
    WMT_COLUMNS,
    detokenize,
    load_bartscore,
    resolve_bartscore_name,
)
from dlmeval.data.formats import read_jsonl, read_tsv
from dlmeval.data.safepickle import safe_load_pickle, safe_loads_pickle
from dlmeval.errors import DataFormatError, InputError

# ------------------------------------------------------------------------------------------------ safe pickles


class _ShellPayload:
    """Unpickling this with plain pickle runs ``touch <marker>`` through os.system."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


class _ExecPayload:
    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (exec, (f"open({str(self.marker)!r}, 'w').write('pwned')",))


def test_malicious_payload_is_live_under_plain_pickle(tmp_path):
    # guards the tests below: the payload really runs code when loaded the unsafe way
    marker = tmp_path / "plain_marker"
    pickle.loads(pickle.dumps({"x": _ShellPayload(marker)}))
    assert marker.exists()


@pytest.mark.parametrize("protocol", [0, 2, 4, 5])
@pytest.mark.parametrize("payload", [_ShellPayload, _ExecPayload])
def test_safe_load_pickle_refuses_code(tmp_path, protocol, payload):
    marker = tmp_path / "marker"
    bad = tmp_path / "evil.pkl"
    # the payload hides inside ordinary-looking data, as it would in a tampered data.pkl
    bad.write_bytes(pickle.dumps({"doc": {"src": "text", "scores": [payload(marker)]}}, protocol=protocol))
    with pytest.raises(DataFormatError) as e:
        safe_load_pickle(bad)
    msg = str(e.value)
    assert str(bad) in msg
    assert ("system" in msg) if payload is _ShellPayload else ("exec" in msg)
    assert not marker.exists()


def test_safe_load_pickle_refuses_any_class_even_harmless(tmp_path):
    from collections import OrderedDict

    p = tmp_path / "od.pkl"
    p.write_bytes(pickle.dumps(OrderedDict(a=1)))
    with pytest.raises(DataFormatError, match=r"collections\.OrderedDict"):
        safe_load_pickle(p)


def test_safe_load_pickle_plain_data_roundtrip(tmp_path):
    # what the BARTScore files hold loads under every protocol
    data = {"a": [1, 2.5, "x", None, True], 3: ("t", "u"), "d": {"k": [[]]}, "n": -(10**30)}
    for protocol in range(pickle.HIGHEST_PROTOCOL + 1):
        p = tmp_path / f"ok{protocol}.pkl"
        p.write_bytes(pickle.dumps(data, protocol=protocol))
        assert safe_load_pickle(p) == data
    # bytes and sets have their own opcodes only from protocol 3 / 4 on (before, they go through a global)
    extra = {"b": b"raw", "s": {1, 2}, "f": frozenset({"z"})}
    assert safe_loads_pickle(pickle.dumps(extra, protocol=4)) == extra
    with pytest.raises(DataFormatError, match=r"__builtin__\.set;"):
        safe_loads_pickle(pickle.dumps({1, 2}, protocol=2), source="old.pkl")
    assert safe_loads_pickle(pickle.dumps([1, "a"])) == [1, "a"]


def test_safe_load_pickle_corrupt_and_missing(tmp_path):
    p = tmp_path / "trunc.pkl"
    p.write_bytes(pickle.dumps({"a": list(range(100))})[:-7])
    with pytest.raises(DataFormatError, match="trunc.pkl: not a valid pickle"):
        safe_load_pickle(p)
    with pytest.raises(InputError, match="does not exist"):
        safe_load_pickle(tmp_path / "nope.pkl")


def test_every_real_bartscore_pickle_loads_safely(data_root):
    files = sorted((data_root / "meta-eval" / "bartscore").glob("*/*/data.pkl"))
    assert len(files) == 12
    for f in files:
        data = safe_load_pickle(f)
        assert isinstance(data, dict) and data, f


# ------------------------------------------------------------------------------------------------ file formats


def test_read_jsonl_plain_and_gz(tmp_path):
    text = '{"a": 1}\n\n   \n{"a": 2}\r\n{"a": "\\u00e9"}\n'
    plain = tmp_path / "x.jsonl"
    plain.write_text(text, encoding="utf-8")
    gz = tmp_path / "x.jsonl.gz"
    gz.write_bytes(gzip.compress(text.encode()))
    assert read_jsonl(plain) == read_jsonl(gz) == [{"a": 1}, {"a": 2}, {"a": "é"}]


def test_read_jsonl_errors_name_file_and_line(tmp_path):
    p = tmp_path / "bad.jsonl"
    p.write_text('{"a": 1}\n\n{"a": 2,}\n', encoding="utf-8")
    with pytest.raises(DataFormatError, match=r"bad\.jsonl:3: invalid JSON"):
        read_jsonl(p)
    p.write_text('{"a": 1}\n[1, 2]\n', encoding="utf-8")
    with pytest.raises(DataFormatError, match=r"bad\.jsonl:2: expected a JSON object, found list"):
        read_jsonl(p)
    assert read_jsonl(p, require_object=False) == [{"a": 1}, [1, 2]]
    p.write_bytes(b'{"a": 1}\n{"a": "\xff"}\n')
    with pytest.raises(DataFormatError, match=r"bad\.jsonl:2: not valid UTF-8"):
        read_jsonl(p)
    gz = tmp_path / "bad.jsonl.gz"
    gz.write_bytes(gzip.compress(b'{"a": 1}\n' * 1000)[:-20])
    with pytest.raises(DataFormatError, match="corrupt or truncated gzip"):
        read_jsonl(gz)
    with pytest.raises(InputError, match="not found"):
        read_jsonl(tmp_path / "missing.jsonl")


def test_read_tsv_fields_quoting_and_errors(tmp_path):
    p = tmp_path / "t.tsv"
    p.write_text('a\tb\n\n"q ""x"""\t[\'y\']\r\n', encoding="utf-8")
    assert read_tsv(p) == [["a", "b"], ['"q ""x"""', "['y']"]]
    assert read_tsv(p, quoting=True, n_fields=2) == [["a", "b"], ['q "x"', "['y']"]]
    p.write_text("a\tb\nc\td\n\ne\tf\tg\n", encoding="utf-8")
    with pytest.raises(DataFormatError, match=r"t\.tsv:4: expected 2 tab-separated fields, found 3"):
        read_tsv(p, n_fields=2)
    p.write_text('a\tb\n"unterminated\tb\n', encoding="utf-8")
    with pytest.raises(DataFormatError, match=r"t\.tsv:2: malformed quoted field"):
        read_tsv(p, quoting=True)


# ------------------------------------------------------------------------------------------------ BARTScore


_EXPECTED_ROWS = {
    "SummEval": 1600, "Newsroom": 420, "REALSumm": 2400, "Rank19": 746, "QAGS_CNN": 235, "QAGS_XSUM": 239,
    "BAGEL": 404, "SFHOT": 875, "SFRES": 1181, "gu-en": 20110, "kk-en": 9728, "lt-en": 21862,
}  # fmt: skip


def test_bartscore_registry_lists_the_twelve_sets():
    shipped = {n for n, b in BARTSCORE_BENCHMARKS.items() if b.shipped}
    assert shipped == set(_EXPECTED_ROWS)
    assert Counter(b.task for b in BARTSCORE_BENCHMARKS.values()) == {"SUM": 6, "D2T": 3, "WMT": 7}
    # the four WMT19 pairs the shared data does not ship come from `dlmeval data import`
    assert set(BARTSCORE_BENCHMARKS) - shipped == {"de-en", "fi-en", "ru-en", "zh-en"}


@pytest.mark.parametrize("name", list(_EXPECTED_ROWS))
def test_bartscore_counts_match_the_readme(data_root, name):
    b = BARTSCORE_BENCHMARKS[name]
    df = load_bartscore(name, data_root)
    assert len(df) == _EXPECTED_ROWS[name] == b.n_rows
    assert df["item_id"].is_unique
    if b.task == "WMT":
        assert list(df.columns) == list(WMT_COLUMNS)
        return
    assert list(df.columns) == list(TEXT_COLUMNS) + list(b.dimensions)
    assert df["doc_id"].nunique() == b.n_docs
    for dim in b.dimensions:
        assert df[dim].dtype == "float64" and df[dim].notna().all()
    if b.task == "SUM":
        assert df.groupby("doc_id")["system"].nunique().eq(b.n_systems).all()


def test_summeval_structure_and_golden_values(data_root):
    df = load_bartscore("SummEval", data_root)
    assert df["doc_id"].nunique() == 100 and df["system"].nunique() == 16
    assert df.groupby("doc_id").size().eq(16).all()
    assert df["references"].map(len).eq(11).all()
    assert (df["reference_raw"] == df["references_raw"].map(lambda r: r[0])).all()
    row = df.set_index("item_id").loc["SummEval/dm-test-8764fb95bfad8ee849274873a92fb8d6b400eee2/M11"]
    assert row["coherence"] == pytest.approx(4 / 3)
    assert (row["consistency"], row["fluency"]) == (1.0, 3.0)
    assert row["relevance"] == pytest.approx(5 / 3)
    # raw text is the tokenized pickle text; the main column is detokenized, casing untouched
    assert row["candidate_raw"].startswith(
        "Paul merson was brought on with only seven minutes remaining in his team 's 0-0"
    )
    assert row["candidate"].startswith(
        "Paul merson was brought on with only seven minutes remaining in his team's 0-0"
    )
    assert row["candidate"].split(". ")[0].endswith("draw with burnley")
    # mean human scores of the dimension columns over all 1600 outputs (pinned from the file)
    assert df[["coherence", "consistency", "fluency", "relevance"]].mean().round(4).tolist() == pytest.approx(
        [3.4125, 4.6604, 4.6729, 3.7771], abs=1e-4
    )


def test_detokenize_inverts_treebank_tokens():
    assert detokenize("his team 's 0-0 draw , did n't he ?") == "his team's 0-0 draw, didn't he?"
    assert detokenize("he said `` fine '' ( really ) .") == 'he said "fine" (really).'


def test_moses_detokenizer_is_bartscores():
    """--detokenizer moses: BARTScore's SUM/utils.py MosesDetokenizer('en') (sacremoses): it rejoins possessives and
    punctuation but, unlike Treebank, leaves ``n't`` as it is and reads the Treebank quotes as plain tokens."""
    assert detokenize("his team 's 0-0 draw , did n't he ?", "moses") == "his team's 0-0 draw, did n't he?"
    assert detokenize("he said `` fine '' ( really ) .", "moses") == "he said ``fine ''(really)."
    with pytest.raises(InputError, match="unknown detokenizer 'perl'; choose one of treebank, moses"):
        detokenize("a .", "perl")


def test_detokenizer_switch_reaches_the_frame(data_root):
    tb = load_bartscore("QAGS_CNN", data_root)
    mo = load_bartscore("QAGS_CNN", data_root, detokenizer="moses")
    assert (tb["candidate_raw"] == mo["candidate_raw"]).all()
    # pinned from the file: 63 of the 235 summaries read differently under the two detokenizers
    assert int((tb["candidate"] != mo["candidate"]).sum()) == 63
    assert mo["candidate"].iat[0] == detokenize(mo["candidate_raw"].iat[0], "moses")
    with pytest.raises(InputError, match="unknown detokenizer"):
        load_bartscore("QAGS_CNN", data_root, detokenizer="perl")


def test_bartscore_raw_text_kept_and_detokenize_switch(data_root):
    raw = load_bartscore("Newsroom", data_root, detokenize=False)
    det = load_bartscore("Newsroom", data_root)
    for col in ("source", "reference", "candidate"):
        assert (raw[col] == raw[f"{col}_raw"]).all()
        assert (det[f"{col}_raw"] == raw[f"{col}_raw"]).all()
    assert (det["candidate"] != det["candidate_raw"]).sum() > 300  # tokenized text changed
    assert not det["source"].str.contains(" 's ").any() and raw["source"].str.contains(" 's ").any()


def test_factuality_sets_have_source_as_reference(data_root):
    for name in ("Rank19", "QAGS_CNN", "QAGS_XSUM"):
        df = load_bartscore(name, data_root)
        assert BARTSCORE_BENCHMARKS[name].reference_is_source
        assert (df["reference_raw"] == df["source_raw"]).all()
    rank19 = load_bartscore("Rank19", data_root)
    assert sorted(rank19["system"].unique()) == ["correct", "incorrect"]
    assert rank19.groupby("system")["fact"].mean().to_dict() == {"correct": 1.0, "incorrect": 0.0}


def test_d2t_groups_by_meaning_representation(data_root):
    df = load_bartscore("BAGEL", data_root)
    assert df["system"].isna().all()
    assert (df["source"] == df["source_raw"]).all()  # meaning representations are not detokenized
    assert df.groupby("doc_id")["source"].nunique().eq(1).all()
    assert df.groupby("doc_id")["references"].apply(lambda s: len(set(s))).eq(1).all()
    first = df.iloc[0]
    assert first["source"] == "inform(name=none,area=citycentre,near='X')"
    assert first["candidate"] == "There is sorry no information matching constraints near X."
    assert first[["informativeness", "naturalness", "quality"]].tolist() == [6.0, 4.0, 5.0]
    assert set(df["informativeness"]) <= {x / 2 for x in range(2, 13)}


def test_wmt_pairs(data_root):
    df = load_bartscore("WMT/gu-en", data_root)
    assert (df["lang_pair"] == "gu-en").all() and df["pair_id"].tolist() == list(range(20110))
    assert (df["better"] != df["worse"]).all()
    assert df["src"].nunique() == 1016
    r = df.iloc[0]
    assert (
        r["ref"]
        == "India and Russia have already started seeking an alternative solution for this deal since then."
    )
    assert (r["better_system"], r["worse_system"]) == ("CUNI-T2T-transfer-guen.6431", "UEDIN.6534")


def test_bartscore_loader_is_cached_and_returns_copies(data_root):
    a = load_bartscore("Rank19", data_root)
    a.loc[0, "fact"] = 99.0
    b = load_bartscore("Rank19", data_root)
    assert b.loc[0, "fact"] != 99.0
    assert b.equals(load_bartscore("rank19", data_root))


def test_bartscore_name_resolution():
    assert resolve_bartscore_name("summeval").name == "SummEval"
    assert resolve_bartscore_name("SUM/QAGS_XSUM").name == "QAGS_XSUM"
    assert resolve_bartscore_name("wmt/kk-en").lang_pair == "kk-en"
    with pytest.raises(InputError, match="SummEval is a SUM set"):
        resolve_bartscore_name("WMT/SummEval")
    with pytest.raises(InputError, match="unknown BARTScore benchmark 'xx-en'.*gu-en"):
        resolve_bartscore_name("xx-en")


def _write_benchmark(root: Path, task: str, name: str, data) -> Path:
    p = root / "meta-eval" / "bartscore" / task / name / "data.pkl"
    p.parent.mkdir(parents=True)
    p.write_bytes(pickle.dumps(data))
    return p


def test_bartscore_malformed_pickles(tmp_path):
    doc = {"src": "s .", "ref_summ": "r .", "sys_summs": {"A": {"sys_summ": "c .", "scores": {"fact": 1}}}}
    _write_benchmark(tmp_path, "SUM", "Rank19", {0: doc, 1: {"src": "s", "ref_summ": "r"}})
    with pytest.raises(DataFormatError, match=r"Rank19/data.pkl: doc 1: missing field 'sys_summs'"):
        load_bartscore("Rank19", tmp_path)
    bad_score = {
        "src": "s",
        "ref_summ": "r",
        "sys_summs": {"A": {"sys_summ": "c", "scores": {"fact": "yes"}}},
    }
    _write_benchmark(tmp_path, "SUM", "QAGS_CNN", {0: bad_score})
    with pytest.raises(
        DataFormatError, match=r"doc 0 system 'A': human score 'fact' is missing or not a number"
    ):
        load_bartscore("QAGS_CNN", tmp_path)
    _write_benchmark(
        tmp_path, "SUM", "QAGS_XSUM", {0: {**doc, "sys_summs": {"A": _ShellPayload(tmp_path / "m")}}}
    )
    with pytest.raises(DataFormatError, match="refused to load the pickle global"):
        load_bartscore("QAGS_XSUM", tmp_path)
    assert not (tmp_path / "m").exists()
    ok = _write_benchmark(tmp_path, "SUM", "Newsroom", {"d": {**doc, "sys_summs": {}}})
    ok.unlink()
    with pytest.raises(InputError, match="BARTScore file for Newsroom not found"):
        load_bartscore("Newsroom", tmp_path)


# ------------------------------------------------------------------------------------------------ tasks


def test_gsm8k(data_root):
    items = tasks.load_gsm8k(data_root)
    assert len(items) == 1319
    assert items[0].gold == "18" and items[0].item_id == "gsm8k/0"
    golds = {i.gold for i in items}
    assert "2125" in golds and not any("," in g for g in golds)  # "#### 2,125" normalized
    assert all(tasks.normalize_number(g) == g for g in golds)
    assert len({i.item_id for i in items}) == 1319


@pytest.mark.parametrize(
    ("text", "expected"),
    [("1,000", "1000"), (" $5.50 ", "5.5"), ("18.00", "18"), ("-3", "-3"), ("7.", "7"), ("0.25", "0.25"),
     ("12 apples", None), ("", None), ("1/2", None)],
)  # fmt: skip
def test_normalize_number(text, expected):
    assert tasks.normalize_number(text) == expected


def test_gsm8k_malformed(tmp_path):
    p = tmp_path / "g.jsonl"
    p.write_text('{"question": "q", "answer": "a\\n#### 3"}\n{"question": "q", "answer": "no marker"}\n')
    with pytest.raises(DataFormatError, match=r"g\.jsonl:2: answer has no '#### <number>'"):
        tasks.load_gsm8k(path=p)
    p.write_text('{"question": "q", "answer": "#### three"}\n')
    with pytest.raises(DataFormatError, match=r"g\.jsonl:1: the text after '####' is not a number"):
        tasks.load_gsm8k(path=p)
    p.write_text('{"answer": "#### 3"}\n')
    with pytest.raises(DataFormatError, match=r"g\.jsonl:1: field 'question' is missing"):
        tasks.load_gsm8k(path=p)


def test_arc_challenge(data_root, tmp_path):
    items = tasks.load_arc_challenge(data_root)
    assert len(items) == 1172
    assert all(len(i.choices) == 4 and i.query.startswith("Question: ") for i in items)
    assert Counter(i.gold for i in items) == {2: 311, 1: 306, 3: 294, 0: 261}
    assert items[0].gold == 2 and items[0].choices[2] == "Planetary days will become shorter."
    p = tmp_path / "a.jsonl"
    p.write_text('{"query": "Q", "choices": ["a", "b", "c", "d"], "gold": 4}\n')
    with pytest.raises(DataFormatError, match=r"a\.jsonl:1: 'gold' must be an index 0\.\.3"):
        tasks.load_arc_challenge(path=p)


def test_triviaqa_csv_quoting(data_root):
    path = data_root / tasks.TRIVIAQA_FILE
    # what a naive "split on tab + literal_eval" reader would do with this file
    rejected = evaluates_to_string = 0
    for line in path.read_bytes().decode("utf-8").rstrip("\r\n").split("\r\n"):
        try:
            value = ast.literal_eval(line.split("\t")[1])
        except (ValueError, SyntaxError):
            rejected += 1
            continue
        evaluates_to_string += isinstance(value, str)
    assert (rejected, evaluates_to_string) == (15, 1786)

    items = tasks.load_triviaqa(data_root)
    assert len(items) == 11313
    assert all(i.answers and all(isinstance(a, str) and a for a in i.answers) for i in items)
    assert items[1].answers == ("Scorpio", "Skorpio", "Scorpio (disambiguation)")
    # a line that literal_eval rejects when read naively
    assert items[4511].question == "What was the first book to be printed in England, in 1477?"
    assert items[4511].answers == ('"Dictes or Sayenges of Phylosophers"',)
    # a line whose answer field naively evaluates to one long string
    hitler = next(i for i in items if i.question == 'Who was the target of the failed "Bomb Plot" of 1944?')
    assert "Hitler's medical health" in hitler.answers and len(hitler.answers) > 10


def test_triviaqa_malformed(tmp_path):
    p = tmp_path / "t.tsv"
    p.write_text("Q1?\t['a']\nQ2?\t'just a string'\n")
    with pytest.raises(DataFormatError, match=r"t\.tsv:2: the answers must be a non-empty list of strings"):
        tasks.load_triviaqa(path=p)
    p.write_text("Q1?\t['a'\n")
    with pytest.raises(DataFormatError, match=r"t\.tsv:1: the answers are not a python list literal"):
        tasks.load_triviaqa(path=p)
    p.write_text("Q1?\t['a']\n\nQ3 has no answers\n")
    with pytest.raises(DataFormatError, match=r"t\.tsv:3: expected 2 tab-separated fields, found 1"):
        tasks.load_triviaqa(path=p)


def test_humaneval(data_root):
    items = tasks.load_humaneval(data_root)
    assert [i.item_id for i in items] == [f"HumanEval/{k}" for k in range(164)]
    assert items[0].entry_point == "has_close_elements" and items[0].prompt.startswith(
        "from typing import List"
    )
    assert all(f"def {i.entry_point}" in i.prompt for i in items)


def test_reference_texts(data_root):
    web = tasks.load_webtext_reference(data_root)
    assert len(web) == 4723 and max(len(r.text.split()) for r in web) == 61
    lm1b = tasks.load_lm1b_reference(data_root)
    assert len(lm1b) == 6075
    assert lm1b[0].text == (
        "Having a little flexibility on that issue would go a long way to putting together a final package ."
    )
    assert len({r.item_id for r in web + lm1b}) == 4723 + 6075


def test_task_loaders_missing_file(tmp_path):
    with pytest.raises(InputError, match="not found"):
        tasks.load_humaneval(tmp_path)
