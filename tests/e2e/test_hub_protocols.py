"""Care and robustness tiny specs on small 🤗 datasets built on disk with ``datasets`` itself: every corpus and
task read from a source, the rows' provenance in the run configuration, and one changed row a new run."""

from __future__ import annotations

import json

import numpy as np
import pytest

from dlmeval.errors import InputError
from dlmeval.store import RunStore
from tests.conftest import tiny_care_spec
from tests.hub_data import save_dataset


def _words():
    from dlmeval.models.tiny import TINY_WORDS

    return [w for w in TINY_WORDS if w.isalpha()]


def build_sets(root):
    """One save_to_disk dataset per corpus and task, in the hub layouts, in words the tiny tokenizer knows."""
    w = _words()
    rng = np.random.default_rng(0)
    docs = [{"text": " ".join(rng.choice(w, int(rng.integers(10, 20)))), "url": "x"} for _ in range(40)]
    sents = [{"text": " ".join(rng.choice(w, 5)) + " ."} for _ in range(60)]
    gsm = lambda q, a: {"question": q, "answer": f"<<x>>so {a}\n#### {a}"}  # noqa: E731
    sets = {
        "owt": {"train": docs},
        "lm1b": {"test": sents},
        "gsm8k": {"train": [gsm("one and two ?", "3"), gsm("two and two ?", "4")],
                  "test": [gsm("two and three ?", "5"), gsm("one and one ?", "2"), gsm("four and four ?", "8")]},
        "humaneval": {"test": [{"task_id": "HumanEval/0", "prompt": "def add(a, b):\n", "entry_point": "add",
                                "canonical_solution": "    return a + b\n",
                                "test": "def check(f):\n    assert f(2, 3) == 5\n"}]},
        "arc": {"test": [{"id": f"q{i}", "question": "the cat is ?",
                          "choices": {"text": ["big", "small", "red", "sad"], "label": ["A", "B", "C", "D"]},
                          "answerKey": k} for i, k in enumerate("AC")]},
        "triviaqa": {"validation": [{"question": "the cat is ?", "question_id": "t0",
                                     "answer": {"aliases": ["big", "large"], "value": "big"}},
                                    {"question": "the dog is ?", "question_id": "t1",
                                     "answer": {"aliases": ["small"], "value": "small"}}]},
        "hellaswag": {"validation": [{"ctx_a": "the cat", "ctx_b": "is", "activity_label": "cat",
                                      "endings": ["big", "small", "red", "sad"], "label": str(g)} for g in (1, 3)]},
        "bbh": {"test": [{"input": "the cat is big ?", "target": "True"},
                         {"input": "the cat is sad ?", "target": "False"}]},
    }  # fmt: skip
    return {k: save_dataset(root / k, v) for k, v in sets.items()}


@pytest.fixture(scope="module")
def sets(tmp_path_factory):
    return build_sets(tmp_path_factory.mktemp("hubsets"))


def _care(sets: dict, **changed) -> str:
    """The tiny Care spec over the datasets of ``sets`` (a name given None in ``changed`` has no source)."""
    s = {**sets, **changed}
    src = lambda k: {} if s[k] is None else {"source": s[k]}  # noqa: E731
    loglik = {"n": 2, "n_masks": 1, "n_rates": 2}
    return tiny_care_spec(
        "hub-tiny",
        n_prompts=4,
        sources=("owt", "lm1b"),
        corpora={"owt": src("owt"), "lm1b": {**src("lm1b"), "style": "sentences"}},
        steps=16,
        temperature=0.5,
        bootstrap_resamples=200,
        n_reference=6,
        reference_words=12,
        self_bleu_max=10,
        downstream_steps=8,
        tasks={
            "humaneval": {"n": 1, "gen_tokens": 8, "timeout_s": 5, **src("humaneval")},
            "gsm8k": {"n": 2, "shots": 1, "gen_tokens": 8, **src("gsm8k")},
            "arc": {**loglik, **src("arc")},
            "hellaswag": {**loglik, **src("hellaswag")},
            "bbh": {**loglik, **src("bbh"), "configs": ["boolean_expressions"]},
        },
    )


def test_care_tiny_on_local_datasets(sets, tmp_path):
    from dlmeval.protocols import care
    from dlmeval.protocols.care import load_spec
    from dlmeval.protocols.care.data import task_data
    from dlmeval.protocols.care.plan import data_identity

    p = tmp_path / "hub.toml"
    p.write_text(_care(sets))
    spec = load_spec(p)
    # GSM8K: the exemplar comes from the train split, and the whole test split is evaluated
    td = task_data(spec.downstream, "gsm8k")
    assert [s.question for s in td.shots] == ["one and two ?"] and len(td.items) == 2
    assert "train split" in td.shots_from
    ident = data_identity(spec)
    assert set(ident) == {"corpus:owt", "corpus:lm1b", "task:humaneval", "task:gsm8k", "task:arc",
                          "task:hellaswag", "task:bbh"}  # fmt: skip
    assert ident["corpus:owt"]["rows"] == 40 and ident["corpus:owt"]["fields"] == ["text"]
    assert ident["corpus:owt"]["split"] == "train" and ident["task:arc"]["split"] == "test"
    with RunStore(tmp_path / "s.sqlite") as store:
        res = care.run_care(spec, store, data_dir=tmp_path, progress=False)
        cfg = store.get_run(res.model_runs["tiny-llada"]).signature.config
        items = store.get_run(res.model_runs["tiny-llada"]).results()
    assert cfg["data"]["corpus:owt"]["digest"] == ident["corpus:owt"]["digest"]
    assert any("exemplars: the first 1 items of the train split" in w for w in res.warnings)
    assert {k.split("/")[1].split("|")[0] for k in items if k.startswith("gen/")} == {"owt", "lm1b"}
    loglik = res.tables["arc"].set_index("task")
    assert set(loglik.index) == {"arc", "hellaswag", "bbh"} and (loglik["n_items"] == 2).all()
    assert set(res.tables["downstream"]["task"]) == {"humaneval", "gsm8k"}
    # one row changed in the corpus: another data identity, so another run
    import datasets

    rows = datasets.load_from_disk(sets["owt"])["train"].to_list()
    rows[3]["text"] = rows[3]["text"] + " big"
    changed = save_dataset(tmp_path / "owt2", {"train": rows})
    spec2 = load_spec(p.write_text(_care(sets, owt=changed)) and p)
    ident2 = data_identity(spec2)
    assert ident2["corpus:owt"]["digest"] != ident["corpus:owt"]["digest"]
    assert ident2["corpus:lm1b"] == ident["corpus:lm1b"]


def test_care_sources_are_checked(sets, tmp_path):
    from dlmeval.protocols.care import load_spec
    from dlmeval.protocols.care.plan import data_identity

    p = tmp_path / "bad.toml"
    p.write_text(_care(sets, hellaswag=str(tmp_path / "absent")))
    with pytest.raises(InputError, match="downstream.hellaswag.source.*does not exist"):
        data_identity(load_spec(p))
    p.write_text(_care(sets, bbh=None))
    with pytest.raises(InputError, match="downstream.bbh ships no stand-in"):
        load_spec(p)
    p.write_text(_care(sets, owt="nobody/absent-corpus"))
    with pytest.raises(InputError, match="corpora.owt.*--allow-download"):
        data_identity(load_spec(p))


def test_robust_tiny_on_local_datasets(sets, tmp_path):
    from dlmeval.protocols import robust as rb
    from dlmeval.protocols.robust import parse_spec

    raw = {
        "name": "hub-robust",
        "pairs": [{"dlm": "tiny-bert", "ar": "tiny-causal"}],
        "conditions": {"keys": ["char.keyboard@0.20"]},
        "tasks": {
            "triviaqa": {"n": 2, "modes": ["generation"], "gen_tokens": 4, "source": sets["triviaqa"]},
            "arc_challenge": {"n": 2, "modes": ["likelihood"], "source": sets["arc"]},
            "hellaswag": {"n": 2, "modes": ["likelihood"], "source": sets["hellaswag"]},
        },
        "dlm": {"batch_size": 2}, "ar": {"batch_size": 2},
        "likelihood": {"n_masks": 1, "n_rates": 2},
        "stats": {"bootstrap_resamples": 100}, "calibration": {"plots": False},
    }  # fmt: skip
    spec = parse_spec(raw)
    with RunStore(tmp_path / "r.sqlite") as store:
        res = rb.run_robust(spec, store, progress=False)
        runs = [store.get_run(r) for r in res.model_runs.values()]
        cfg = runs[0].signature.config
        keys = set(runs[0].results())
    tq = cfg["tasks"]["triviaqa"]["data"]
    assert tq["n_items"] == 2 and tq["source"]["kind"] == "disk" and tq["source"]["split"] == "validation"
    assert any(k.startswith("hellaswag/likelihood/clean/") for k in keys)
    # one changed row: another data identity
    import datasets

    rows = datasets.load_from_disk(sets["triviaqa"])["validation"].to_list()
    rows[1]["answer"]["aliases"] = ["tiny"]
    raw["tasks"]["triviaqa"]["source"] = save_dataset(tmp_path / "tq2", {"validation": rows})
    from dlmeval.protocols.robust.evaluate import Data

    spec2 = parse_spec(raw)
    d1 = Data(sources={t.name: t.data_source() for t in spec.tasks}).identity(spec)
    d2 = Data(sources={t.name: t.data_source() for t in spec2.tasks}).identity(spec2)
    assert d1["triviaqa"]["sha256"] != d2["triviaqa"]["sha256"] and d1["arc_challenge"] == d2["arc_challenge"]
    with pytest.raises(InputError, match="path .* or source, not both"):
        parse_spec({**raw, "tasks": {"triviaqa": {"path": "x.tsv", "source": sets["triviaqa"]}}})
    assert json.dumps(cfg)  # the identity is plain JSON


def test_cli_refuses_an_uncached_hub_source_before_the_store_opens(sets, tmp_path, capsys):
    from dlmeval.cli.main import main

    p = tmp_path / "hub.toml"
    p.write_text(_care(sets, gsm8k="nobody/absent-gsm8k"))
    store = tmp_path / "runs.sqlite"
    assert main(["--store", str(store), "care", str(p)]) == 2
    err = capsys.readouterr().err.strip()
    assert "downstream.gsm8k.source" in err and "--allow-download" in err and len(err.splitlines()) == 1
    assert not store.exists()
    r = tmp_path / "r.toml"
    r.write_text('[tasks.triviaqa]\nn = 2\nsource = "nobody/absent-tq"\n')
    assert main(["--store", str(store), "robust", str(r)]) == 2
    assert "--allow-download" in capsys.readouterr().err and not store.exists()
