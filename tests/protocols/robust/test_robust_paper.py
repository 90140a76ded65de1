"""`robust-paper` against the paper beyond Table 6 (tests/protocols/robust/test_robust_recipe.py): the IPM variants are the rows of
Table 10 and the calibration settings Table 8's, written out here from the paper; docs/robustness.md names a
command and an output file for every table and figure of the paper, and every file it names is one the protocol
writes; changing a GCG setting in a spec computes new D-GCG records next to the old ones."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from dlmeval.protocols import robust as rb
from dlmeval.store import RunStore

DOCS = Path(__file__).resolve().parents[3] / "docs" / "robustness.md"

# Table 10 (App. G), the full IPM ablation, one row per variant: TopK K = 1, 2, 3, 5, 10; Uniform rho = 0.10;
# Threshold tau = 0.10, 0.20, 0.30, 0.50; Iterative (x 3); EditDistance (external); Hybrid (spell-checker).
# (Table 7 lists another grid, tau in {0.05, 0.10, 0.20, 0.40}, K in {1, 2, 4, 8}; the results the paper reports
# are Table 10's, so the spec runs those.)
TABLE_10 = {
    ("topk", 1.0), ("topk", 2.0), ("topk", 3.0), ("topk", 5.0), ("topk", 10.0), ("uniform", 0.1),
    ("threshold", 0.1), ("threshold", 0.2), ("threshold", 0.3), ("threshold", 0.5), ("iterative", None),
    ("editdist", None), ("hybrid", None),
}  # fmt: skip


def _variant(key: str) -> tuple[str, float | None]:
    kind, _, arg = key.partition(":")
    return kind, (float(arg) if arg and kind in ("topk", "uniform", "threshold") else None)


def test_ipm_variants_and_calibration_settings_are_the_papers():
    spec = rb.load_spec("robust-paper")
    o = spec.ipm.kwargs()
    assert {_variant(v) for v in o["variants"]} == TABLE_10 and len(o["variants"]) == len(TABLE_10)
    assert (
        spec.ipm.conditions[0] == "char.keyboard@0.15"
    )  # Table 10's condition: keyboard adjacency, r = 0.15
    # Table 7: T_d = 16, l_min = 3 characters, 3 iterations
    assert (o["steps"], o["min_chars"], o["max_iter"]) == (16, 3, 3)
    # Table 8: 15 equal-width ECE bins, geometric-mean DLM confidence, 10 ELBO samples for scoring
    assert spec.calibration.n_bins == 15 and spec.likelihood.n_masks == 10
    from dlmeval.robustness.calibration import TokenProbs

    tp = TokenProbs(max=np.log([0.5, 0.8]), chosen=np.log([0.5, 0.8]))
    assert tp.confidence() == pytest.approx(
        np.sqrt(0.5 * 0.8)
    )  # the default aggregation is the geometric mean


def _docs_rows() -> list[list[str]]:
    text = DOCS.read_text(encoding="utf-8")
    part = text[text.index("### Every table and figure of the paper") :]
    rows = []
    for line in part.splitlines()[1:]:
        if line.startswith("#"):
            break
        if line.startswith("| ") and not line.startswith("| paper") and not line.startswith("|---"):
            rows.append([c.strip() for c in line.strip("|").split("|")])
    return rows


def test_docs_name_a_command_and_a_file_for_every_paper_table_and_figure():
    from dlmeval.protocols.robust.output import TABLE_ORDER

    rows = _docs_rows()
    tables, figures = set(), set()
    for paper, *_ in rows:
        nums = [int(n) for n in re.findall(r"\d+", paper)]
        (figures if paper.startswith("Fig") else tables).update(nums)
    assert tables == set(range(1, 15)) and figures == set(
        range(1, 18)
    )  # the paper's Tables 1-14, Figures 1-17
    figs_src = (Path(rb.__file__).parent / "figures.py").read_text() + (
        Path(rb.__file__).parent / "output.py"
    ).read_text()
    for paper, command, files, _ in rows:
        if paper == "Fig. 1":  # a diagram
            continue
        assert command.strip("`").startswith(("dlmeval ", "robust-paper", "robust-question")), paper
        for f in re.findall(r"`([^`]+)`", files):
            stem = f.split(".")[0]
            if f.endswith(".csv"):
                assert stem in TABLE_ORDER, (paper, f)
            elif f.endswith(".png"):  # drawn by figures.py (or output.py's reliability diagrams)
                assert stem.split("<")[0] in figs_src, (paper, f)
            elif f.endswith(".toml"):
                assert (Path(rb.__file__).parents[2] / "specs" / f).is_file(), (paper, f)


@pytest.fixture(scope="module")
def models():
    from dlmeval.models import tiny_model

    return {"tiny-bert": tiny_model("bert", seed=0), "tiny-causal": tiny_model("causal", seed=0)}


ARC = [  # ARC-style items in the tiny models' vocabulary (a small file: no TriviaQA parse per run)
    {"query": "Question: which city is the capital of france?", "choices": ["paris", "london", "river", "house"],
     "gold": 0},
    {"query": "Question: what does a cat eat?", "choices": ["car", "food", "book", "king"], "gold": 1},
]  # fmt: skip


def _spec(arc: Path, **gcg):
    return rb.parse_spec(
        {
            "name": "gcg",
            "pairs": [{"dlm": "tiny-bert", "ar": "tiny-causal"}],
            "conditions": {"keys": ["char.keyboard@0.20"]},
            "tasks": {"arc_challenge": {"n": 2, "modes": ["generation"], "gen_tokens": 2, "path": str(arc)}},
            "dgcg": {"task": "arc_challenge", "n": 2, "suffix_lengths": [1], "steps": 1, "top_k": 2,
                     "search_width": 2, "eval_samples": 1, **gcg},
            "calibration": {"plots": False},
            "stats": {"bootstrap_resamples": 100},
        }
    )  # fmt: skip


def test_a_changed_gcg_setting_computes_new_records(tmp_path, models):
    import json

    db = tmp_path / "g.sqlite"
    arc = tmp_path / "arc.jsonl"
    arc.write_text("".join(json.dumps(r) + "\n" for r in ARC))

    def attack_keys(res):
        with RunStore(db) as store:
            return {lab: {k for k in store.get_run(rid).results() if k.startswith("dgcg/")}
                    for lab, rid in res.model_runs.items()}  # fmt: skip

    with RunStore(db) as store:
        first = rb.run_robust(_spec(arc), store, progress=False, models=models)
    k1 = attack_keys(first)
    # the settings the key once left out (eval_batch_size: it moves a candidate's loss in its last bits)
    for change in (
        {"retokenize_filter": False},
        {"eval_samples": 2},
        {"eval_samples": 2, "eval_batch_size": 1},
    ):
        with RunStore(db) as store:
            res = rb.run_robust(_spec(arc, **change), store, progress=False, models=models)
        assert res.model_runs == first.model_runs  # GCG settings key the records, not the model runs
        k2 = attack_keys(res)
        for lab in k1:
            new = k2[lab] - k1[lab]
            assert len(new) == 2 and k1[lab] <= k2[lab], (change, lab)  # two new items, the old ones kept
        k1 = k2
