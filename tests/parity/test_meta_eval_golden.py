"""Golden values of BARTScore's published analysis notebook (neulab/BARTScore ``analysis.ipynb``, cells 9, 21 and 26:
the ROUGE rows), reached on the shipped pickles with ``--rouge-impl rouge155 --protocol bartscore``.

REALSumm: Spearman per document against ``litepyramid_recall``, averaged, on the recall variants; QAGS_CNN: Pearson
against ``fact`` on F; Rank19: pairwise accuracy on F. The notebook prints 6 digits; each value here must lie within
0.002 of it (they agree to 1e-4: ROUGE-1.5.5 prints 5 decimals, as it did for BARTScore).
"""

from __future__ import annotations

import pandas as pd
import pytest

from dlmeval.baselines.rouge155 import rouge155_unavailable

# (benchmark, protocol, metric): the notebook's value
NOTEBOOK = {
    ("REALSumm", "doc_spearman", "rouge1_r"): 0.497526,
    ("REALSumm", "doc_spearman", "rouge2_r"): 0.4233,
    ("REALSumm", "doc_spearman", "rougeL_r"): 0.488254,
    ("QAGS_CNN", "pearson", "rouge1"): 0.337667,
    ("QAGS_CNN", "pearson", "rouge2"): 0.459141,
    ("QAGS_CNN", "pearson", "rougeL"): 0.356889,
    ("Rank19", "pairwise_acc", "rouge1"): 0.568365,
    ("Rank19", "pairwise_acc", "rouge2"): 0.630027,
    ("Rank19", "pairwise_acc", "rougeL"): 0.587131,
}
# also in the notebook (cell 9): Kendall per document on REALSumm
NOTEBOOK_KENDALL = {"rouge1_r": 0.407974, "rouge2_r": 0.353119, "rougeL_r": 0.402523}


@pytest.mark.slow  # ROUGE-1.5.5 on 3,381 summaries: about a minute on two busy cores
@pytest.mark.skipif(rouge155_unavailable() is not None, reason=f"ROUGE-1.5.5: {rouge155_unavailable()}")
def test_rouge155_bartscore_protocol_reaches_the_notebook(tmp_path, data_root):
    from dlmeval.cli.main import main

    out = tmp_path / "out"
    argv = ["--store", str(tmp_path / "s.sqlite"), "--no-progress", "meta-eval", "--data-dir", str(data_root),
            "--benchmarks", "REALSumm", "QAGS_CNN", "Rank19", "--metrics", "lexical", "--rouge-impl", "rouge155",
            "--protocol", "bartscore", "--bootstrap", "0", "--out", str(out)]  # fmt: skip
    assert main(argv) == 0
    res = pd.read_csv(out / "results.csv")
    # the paper protocol's REALSumm records follow, named and never primary (results.csv holds both)
    paper = res[res["suite_protocol"] == "paper"]
    assert set(paper["benchmark"]) == {"REALSumm"} and not paper["primary"].any()
    res = res[res["suite_protocol"] == "bartscore"]
    got = {(b, p, m): v for b, p, m, v in zip(res["benchmark"], res["protocol"], res["metric"], res["value"])}
    for key, want in NOTEBOOK.items():
        assert got[key] == pytest.approx(want, abs=0.002), key
    for m, want in NOTEBOOK_KENDALL.items():
        assert got[("REALSumm", "doc_kendall", m)] == pytest.approx(want, abs=0.002), m
    # REALSumm's headline is the per-document Spearman under this protocol; its F rows are not reported there
    real = res[res["benchmark"] == "REALSumm"]
    assert set(real.loc[real["primary"], "protocol"]) == {"doc_spearman"}
    assert "rouge1" not in set(real["metric"]) and "rouge1_r" in set(real["metric"])
    assert paper.loc[
        (paper["metric"] == "rouge1") & (paper["protocol"] == "sys_pearson"), "value"
    ].item() == (
        pytest.approx(0.5811, abs=0.002)  # the DiffScore paper's REALSumm protocol on ROUGE-1.5.5's F
    )
    labels = dict(zip(res["metric"], res["label"]))
    assert labels["rouge1_r"] == "ROUGE-1 R [ROUGE-1.5.5]" and labels["rouge2"] == "ROUGE-2 F1 [ROUGE-1.5.5]"
