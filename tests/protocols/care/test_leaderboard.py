"""dlmeval.protocols.care.leaderboard: the ``care-leaderboard`` run's configuration carries the identity of the
data its AR rows read, so two corpora never share a run id."""

from __future__ import annotations

import shutil

from dlmeval.protocols.care.leaderboard import (
    leaderboard_config,
    parse_leaderboard,
    resolve_leaderboard,
    run_leaderboard,
)
from dlmeval.protocols.care.plan import CareOptions
from dlmeval.store import RunStore
from tests.protocols.care.test_care import make_data

WEBTEXT = "reference-text/webtext_test.jsonl"


def _spec():
    return parse_leaderboard(
        {
            "name": "t-lb-data",
            "kind": "care-leaderboard",
            "seed": 0,
            "preset": "tiny",
            "models": {"evaluator": "tiny-causal"},
            "generation": {"n_prompts": 2, "batch_size": 2, "sources": ["webtext"]},
            "metrics": {"featurizer": "ar", "n_reference": 4, "reference_words": 8, "self_bleu_max": 4},
            "leaderboard": {"steps": 4, "temperature": 0.5, "seeds": [1]},
            "rows": [
                {"label": "tiny-llada", "model": "tiny-llada", "tier": 1, "scale": "tiny"},
                {"label": "ar", "model": "tiny-causal", "tier": "reference", "kind": "ar", "top_p": 0.95},
            ],
        }
    )


def _two_corpora(tmp_path):
    """Two data directories whose webtext files differ in one line (the same file name and item ids)."""
    a = make_data(tmp_path / "a")
    b = tmp_path / "b"
    shutil.copytree(a, b)
    lines = (b / WEBTEXT).read_text().splitlines()
    lines[0] = lines[1]
    (b / WEBTEXT).write_text("\n".join(lines) + "\n")
    return a, b


def test_the_leaderboard_config_carries_the_corpus_digest(tmp_path):
    a, b = _two_corpora(tmp_path)
    spec = _spec()
    ca, cb = (leaderboard_config(resolve_leaderboard(spec, CareOptions(d))) for d in (a, b))
    assert set(ca["data"]) == {WEBTEXT} and ca["data"][WEBTEXT] != cb["data"][WEBTEXT]
    assert (
        {k: v for k, v in ca.items() if k != "data"}
        == spec.config()
        == {k: v for k, v in cb.items() if k != "data"}
    )
    assert (
        leaderboard_config(resolve_leaderboard(spec, CareOptions(a))) == ca
    )  # the same data: the same config


def test_two_corpora_make_two_leaderboard_runs(tmp_path):
    a, b = _two_corpora(tmp_path)
    spec = _spec()
    with RunStore(tmp_path / "s.sqlite") as store:
        ids = []
        for d in (a, b):
            plan = resolve_leaderboard(spec, CareOptions(d))
            rid, table = run_leaderboard(plan, store, device="cpu", progress=False)
            assert store.get_run(rid).signature.config["data"] == plan.base.data_identity()
            assert list(table["model"]) == ["tiny-llada", "ar"]
            ids.append(rid)
        assert ids[0] != ids[1]
        assert len(store.list_runs("care-leaderboard")) == 2
