"""`dlmeval data import`: BARTScore-layout files from a local checkout into a data directory (restricted unpickler),
and the suite then has all seven WMT19 pairs."""

import os
import pickle

import pytest

from dlmeval.store import RunStore

PAIRS = ("de-en", "fi-en", "gu-en", "kk-en", "lt-en", "ru-en", "zh-en")


def _wmt(n, lp):
    return {
        i: {
            "src": f"source {lp} {i}",
            "ref": f"the cat sat on the mat {i} .",
            "better": {"sys_name": "A", "sys": f"the cat sat on a mat {i} .", "scores": {}},
            "worse": {"sys_name": "B", "sys": f"a dog ran {i} .", "scores": {}},
        }
        for i in range(n)
    }


@pytest.fixture()
def checkout(tmp_path):
    root = tmp_path / "BARTScore"
    for lp in PAIRS:
        (root / "WMT" / lp).mkdir(parents=True)
        with open(root / "WMT" / lp / "data.pkl", "wb") as f:  # the test writes its own plain-data pickles
            pickle.dump(_wmt(4, lp), f)
    d2t = {
        i: {"src": f"inform(name=x{i % 2})", "sys_summ": f"x {i} is good .", "ref_summs": ["x is good ."],
            "sys_name": f"sys{i % 3}", "scores": {"informativeness": 1.0 + i, "naturalness": 2.0, "quality": 3.0 - i}}
        for i in range(6)
    }  # fmt: skip
    (root / "D2T" / "BAGEL").mkdir(parents=True)
    with open(root / "D2T" / "BAGEL" / "data.pkl", "wb") as f:
        pickle.dump(d2t, f)
    (root / "SUM" / "MySet").mkdir(parents=True)
    with open(root / "SUM" / "MySet" / "data.pkl", "wb") as f:
        pickle.dump({"d1": {"src": "a doc .", "sys_summs": {"s1": {"sys_summ": "a .", "scores": {}}}}}, f)
    return root


def test_import_then_seven_wmt_pairs(tmp_path, checkout, capsys):
    from dlmeval.cli.main import main
    from dlmeval.data.bartscore import load_bartscore
    from dlmeval.protocols.diffscore.meta_eval import SuiteOptions, run_suite

    data = tmp_path / "data"
    assert main(["data", "import", str(checkout), "--data-dir", str(data)]) == 0
    out = capsys.readouterr().out
    assert "WMT/de-en: 4 rows, copied" in out and "SUM/MySet: 1 rows, copied" in out and "not a set" in out
    assert (data / "meta-eval/bartscore/WMT/zh-en/data.pkl").is_file()
    # a second import changes nothing
    assert main(["data", "import", str(checkout), "--data-dir", str(data), "--sets", "de-en"]) == 0
    assert "unchanged" in capsys.readouterr().out
    # the D2T importer keeps the system names
    bagel = load_bartscore("BAGEL", data)
    assert list(bagel["system"]) == ["sys0", "sys1", "sys2"] * 2
    opts = SuiteOptions(
        families=("lexical",), benchmarks=("WMT",), limit=2, bootstrap=0, progress=False, data_dir=str(data)
    )
    assert set(opts.resolved_benchmarks()) == set(PAIRS)
    rep = run_suite(opts, RunStore(tmp_path / "s.sqlite"))
    assert set(rep.results["benchmark"]) == set(PAIRS)
    assert sum(c.endswith("(DARR tau)") for c in rep.tables["mt"].columns) == 7


def test_shared_data_has_three_pairs_and_a_named_missing_pair_says_what_to_do(data_root):
    from dlmeval.errors import InputError
    from dlmeval.protocols.diffscore.meta_eval import SuiteOptions, scoring_frame

    if (data_root / "meta-eval/bartscore/WMT/de-en/data.pkl").exists():
        pytest.skip("this data directory already has the imported pairs")
    assert SuiteOptions(benchmarks=("WMT",), data_dir=str(data_root)).resolved_benchmarks() == (
        "gu-en",
        "kk-en",
        "lt-en",
    )
    with pytest.raises(InputError, match="dlmeval data import"):
        scoring_frame("de-en", str(data_root))


def test_import_refuses_code_and_bad_layout(tmp_path, checkout):
    from dlmeval.data.importer import import_bartscore
    from dlmeval.errors import DataFormatError, InputError

    class Evil:
        def __reduce__(self):
            return (os.system, ("echo pwned",))

    bad = checkout / "WMT" / "xx-en"
    bad.mkdir()
    with open(bad / "data.pkl", "wb") as f:
        pickle.dump({0: Evil()}, f)
    data = tmp_path / "data"
    with pytest.raises(DataFormatError, match="refused to load the pickle global"):
        import_bartscore(checkout, data)
    assert not (data / "meta-eval").exists()  # every file is checked before any is copied
    with open(bad / "data.pkl", "wb") as f:
        pickle.dump({0: {"src": "x"}}, f)
    with pytest.raises(DataFormatError, match=r"lacks \['ref', 'better', 'worse'\]"):
        import_bartscore(checkout, data)
    with pytest.raises(InputError, match="no set"):
        import_bartscore(checkout, data, names=["nope"])
