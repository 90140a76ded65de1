"""DiffScore-FT's cross-benchmark scheme: the training set of a benchmark never holds its texts, adapters are shared
by benchmarks with equal training sets and reused across runs, and the FT model is the base plus its adapter."""

from __future__ import annotations

import re

import pandas as pd
import pytest

from dlmeval.errors import InputError
from dlmeval.models import load_diffusion, tiny_model
from dlmeval.protocols.diffscore.ft import (
    FTContext,
    FTOptions,
    benchmark_pairs,
    decontaminate,
    score_ft,
    text_index,
    training_pairs,
)

POOL = ("SummEval", "Newsroom", "REALSumm")


def _words(t: str) -> list[str]:
    return re.findall(r"\w+", t.lower())


def _windows(text: str) -> set[str]:
    """A second implementation, on strings: the 13-word windows of a text joined by spaces (a shorter text: all
    of it)."""
    w = _words(text)
    if len(w) < 13:
        return {" ".join(w)} if w else set()
    return {" ".join(w[i : i + 13]) for i in range(len(w) - 12)}


def test_decontaminate_by_hand():
    long = "one two three four five six seven eight nine ten eleven twelve thirteen fourteen"
    frame = pd.DataFrame(
        {
            "source": ["x " + long],
            "cond_source": ["x " + long],
            "targets": [("short one",)],
            "candidate": ["a b c"],
        }
    )
    idx = text_index(frame)
    pairs = [
        {"source": long[: long.index(" fourteen")], "target": "fine"},  # the 13-word window one..thirteen
        {
            "source": "two three four five six seven eight nine ten eleven twelve thirteen",
            "target": "ok",
        },  # 12
        {"source": "unrelated words", "target": "Short, one!"},  # a short text equal to a short target
        {"source": "unrelated words", "target": "a b"},  # a short text inside a longer one: kept
    ]
    assert decontaminate(pairs, idx) == pairs[1:2] + pairs[3:]


@pytest.mark.parametrize("name", ["SummEval", "REALSumm", "BAGEL", "QAGS_CNN"])
def test_the_training_set_of_a_benchmark_holds_none_of_its_texts(data_root, name):
    from dlmeval.protocols.diffscore.meta_eval import scoring_frame

    frames = {}

    def frame_of(b):
        if b not in frames:
            frames[b] = scoring_frame(b, str(data_root))
        return frames[b]

    ctx = FTContext(FTOptions(), lambda: None, lambda d: None, frame_of, POOL)
    kept = training_pairs(ctx, name)
    others = [b for b in POOL if b != name]
    every = [p for b in others for p in benchmark_pairs(frame_of(b))]
    f = frame_of(name)
    texts = set(f["source"]) | set(f["candidate"]) | {t for ts in f["targets"] for t in ts}
    seen = set().union(*(_windows(t) for t in texts))
    want = [p for p in every if not (_windows(p["source"]) | _windows(p["target"])) & seen]
    assert kept == want
    assert {p["source"] for p in kept}.isdisjoint(set(f["cond_source"]))
    if name in POOL:
        assert len(every) > len(kept) or name == "Newsroom"
    # REALSumm and SummEval share CNN/DM articles (re-formatted): the brute force finds them too
    if name == "SummEval":
        assert len(every) - len(kept) >= 2


def _frame(pairs, cands):
    return pd.DataFrame(
        {
            "source": [s for s, _ in pairs],
            "cond_source": [s for s, _ in pairs],
            "targets": [(t,) for _, t in pairs],
            "candidate": cands,
        }
    )


def test_score_ft_trains_once_per_training_set_and_reuses_adapters(tmp_path):
    pool = {
        "A": _frame([("the cat sat on the big red house .", "a cat sat .")], ["a cat ran ."]),
        "B": _frame([("a dog runs to the river and eats food .", "the dog eats .")], ["a dog eats ."]),
    }
    frames = {**pool, "C": _frame([("paris is the capital of france .", "paris .")], ["paris is big ."])}
    frames["D"] = frames["C"]
    loads = []

    def load_base():
        loads.append("base")
        return tiny_model("llada")

    def load(d):
        loads.append(d)
        return load_diffusion("tiny-llada", adapter=d)

    opts = FTOptions(steps=2, batch_size=1, lr=5e-2, rank=2, alpha=4)
    seen = {}

    def ctx():
        return FTContext(opts, load_base, load, frames.__getitem__, ("A", "B"), work_dir=tmp_path)

    def run(c, name):
        def score_with(model, layout):
            ids, attn = model.pad([model.encode("a cat sat .")])
            seen[name] = (model.adapter.path, layout, float(model.logits(ids, attn)[0, 1, 5]))
            return 1

        return score_ft(c, name, score_with)

    c = ctx()
    for name in ("A", "C", "D"):
        assert run(c, name) == 1
    dirs = sorted(p.name for p in tmp_path.iterdir())
    assert len(dirs) == 2  # A trains on B; C and D (outside the pool) share the adapter trained on A + B
    assert seen["C"][0] == seen["D"][0] != seen["A"][0]
    assert seen["A"][1] == {
        "chat": True,
        "prompt": "{source}",
    }  # the stand-in has a chat template: the paper's
    base = tiny_model("llada")
    ids, attn = base.pad([base.encode("a cat sat .")])
    assert float(base.logits(ids, attn)[0, 1, 5]) != pytest.approx(seen["C"][2], abs=1e-6)
    # a new run (another estimator, say) reuses the stored adapters: no training, the same model
    before = dict(seen)
    loads.clear()
    c2 = ctx()
    run(c2, "D")
    assert loads == ["base", seen["D"][0]]  # the base once for its identity, then base + adapter
    assert seen["D"][2] == pytest.approx(before["D"][2], abs=1e-6)
    # the FT model never trains the zero-shot model: it is loaded fresh (load_base), never handed in
    with pytest.raises(InputError, match="no benchmark outside"):
        training_pairs(FTContext(opts, load_base, load, frames.__getitem__, ("A",)), "A")


def test_ft_options_check():
    with pytest.raises(InputError, match="exclude each other"):
        FTOptions(adapter="x", train_data="y").check()
    with pytest.raises(InputError, match="dropout"):
        FTOptions(dropout=-0.1).check()
    assert FTOptions().describe()["scheme"] == "cross-benchmark pool"
    d = FTOptions().describe()
    assert (d["rank"], d["alpha"], d["dropout"]) == (16, 32, 0.05) and "work_dir" not in d


def test_ft_rows_for_every_benchmark_of_the_table():
    from dlmeval.protocols.diffscore.meta_eval import SuiteInputs, SuiteOptions
    from dlmeval.protocols.diffscore.meta_eval.benchmarks import BENCHMARKS
    from dlmeval.protocols.diffscore.meta_eval.families import get_family

    suite = SuiteInputs(SuiteOptions(dlm="tiny-bert", ft=True, progress=False))
    fam = get_family("ft")(suite)
    assert "ft" in suite.families()
    assert [b for b in BENCHMARKS.values() if b.suite == "bartscore" and not fam.applies(b)] == []
    assert fam.pool() == POOL  # what stands in for CNN/DM
    assert len([b for b in BENCHMARKS.values() if b.suite == "bartscore" and not b.optional]) == 12
