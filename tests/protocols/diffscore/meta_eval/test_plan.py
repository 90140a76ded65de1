"""``dlmeval meta-eval --plan``: the paper tables and cells each row fills, the protocols, the data and the
checkpoints, without loading a model or importing torch."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time


def _plan(data_root, *extra):
    code = (
        "import sys, json; from dlmeval.cli.main import main; "
        f"rc = main({['--json', 'meta-eval', '--plan', '--data-dir', str(data_root), *extra]!r}); "
        "print(json.dumps({'rc': rc, 'torch': 'torch' in sys.modules}))"
    )
    t = time.perf_counter()
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env={**os.environ})
    took = time.perf_counter() - t
    assert r.returncode == 0, r.stderr[-2000:]
    lines = r.stdout.strip().splitlines()
    return json.loads("\n".join(lines[:-1])), json.loads(lines[-1]), took


def test_plan_names_tables_cells_and_checkpoints_without_torch(data_root):
    tables, status, took = _plan(
        data_root, "--benchmarks", "REALSumm", "Rank19", "gu-en", "--metrics", "lexical", "embedding",
        "bartscore", "--protocol", "bartscore",
    )  # fmt: skip
    assert status == {"rc": 0, "torch": False}
    assert took < 30  # the target is 5 s on an idle machine; shared CI cores are slower
    cells = {(c["cell"], c["family"]): c for c in tables["cells"]}
    settings = {c["option"]: c["value"] for c in tables["settings"]}
    assert settings["--detokenizer"] == "moses (the default under --protocol bartscore)"
    assert settings["--rouge-wordnet"] == "empty" and settings["--unieval-refs"] == "first"
    real = cells[("REALSumm COV (rho doc-avg)", "lexical")]
    assert real["table"].startswith("Table 2") and real["protocol"] == "doc_spearman"
    assert real["rows"].split() == ["bleu", "rouge1_r", "rouge2_r", "rougeL_r", "meteor"]
    assert real["data_here"] == "yes" and real["data"].endswith("SUM/REALSumm/data.pkl")
    assert cells[("REALSumm COV (rho doc-avg)", "embedding")]["rows"].split() == ["bertscore_r", "moverscore"]
    assert cells[("Rank19 FAC (acc)", "lexical")]["rows"].split()[1] == "rouge1"
    assert cells[("gu-en (DARR tau)", "lexical")]["table"].startswith("Table 1")
    ck = {(c["family"], c["option"]): c for c in tables["checkpoints"]}
    assert ck[("bartscore", "--bartscore-model")]["uses"] == "facebook/bart-large-cnn"
    assert ck[("embedding", "--bertscore-model")]["uses"] in ("FacebookAI/roberta-large", "roberta-large")
    assert ck[("bartscore", "--bartscore-model")]["present"].startswith(("yes", "no"))


def test_plan_under_the_paper_protocol_keeps_the_system_level_headline(data_root):
    tables, _, _ = _plan(data_root, "--benchmarks", "REALSumm", "--metrics", "lexical")
    (cell,) = tables["cells"]
    assert cell["cell"] == "REALSumm COV (r sys)" and cell["protocol"] == "sys_pearson"
    assert cell["rows"].split()[1:4] == ["rouge1", "rouge2", "rougeL"] and cell["suite_protocol"] == "paper"


def test_plan_rejects_an_unknown_protocol_in_one_line(capsys, data_root):
    from dlmeval.cli.main import main

    assert main(["meta-eval", "--plan", "--data-dir", str(data_root), "--protocol", "nope"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--protocol 'nope'" in err[0] and "paper, bartscore" in err[0]


def test_both_suite_protocols_in_results_where_they_differ(tmp_path, data_root):
    """REALSumm under --protocol bartscore: the per-document Spearman on the recall variants is the headline, and
    the paper protocol's records (system-level, F) follow, named by suite_protocol and never primary; each
    (metric, protocol) pair once. Rank19, where the two agree, has only the run's own records."""
    import pandas as pd

    from dlmeval.cli.main import main

    out = tmp_path / "out"
    argv = ["--store", str(tmp_path / "s.sqlite"), "--no-progress", "meta-eval", "--data-dir", str(data_root),
            "--benchmarks", "REALSumm", "Rank19", "--limit", "48", "--metrics", "lexical", "--protocol", "bartscore",
            "--bootstrap", "0", "--out", str(out)]  # fmt: skip
    assert main(argv) == 0
    res = pd.read_csv(out / "results.csv")
    real = res[res["benchmark"] == "REALSumm"]
    prim = real[real["primary"]]
    assert set(prim["protocol"]) == {"doc_spearman"} and set(prim["suite_protocol"]) == {"bartscore"}
    assert {"rouge1_r", "rouge2_r", "rougeL_r"} <= set(prim["metric"]) and "rouge1" not in set(prim["metric"])
    paper = real[real["suite_protocol"] == "paper"]
    assert not paper["primary"].any()
    assert {("rouge1", "sys_pearson"), ("rouge1", "doc_spearman")} <= set(
        zip(paper["metric"], paper["protocol"])
    )
    assert ("bleu", "sys_pearson") not in set(
        zip(paper["metric"], paper["protocol"])
    )  # recorded once, as bartscore
    assert not real.duplicated(["metric", "protocol"]).any()
    assert set(res.loc[res["benchmark"] == "Rank19", "suite_protocol"]) == {"bartscore"}


def test_the_two_suite_protocols_are_two_summary_runs(tmp_path, data_root):
    """--protocol paper and --protocol bartscore on the same selection share their component (score) runs but
    not the summary run: the second must not overwrite the first's results and tables in the store. The same
    texts are needed for that: bartscore's default detokenizer (Moses) makes BLEU / METEOR read other texts, so
    there the component run is another one too."""
    from dlmeval.cli.main import main
    from dlmeval.store import RunStore

    store = tmp_path / "s.sqlite"
    base = ["--store", str(store), "--no-progress", "meta-eval", "--data-dir", str(data_root), "--benchmarks",
            "REALSumm", "--limit", "48", "--metrics", "lexical", "--bootstrap", "0"]  # fmt: skip
    for proto in ("paper", "bartscore"):
        argv = [*base, "--protocol", proto, "--detokenizer", "treebank", "--out", str(tmp_path / proto)]
        assert main(argv) == 0
    with RunStore(store, must_exist=True) as s:
        summaries = [r for r in s.list_runs() if r["kind"] == "meta-eval"]
        lexical = [r for r in s.list_runs() if r["kind"] != "meta-eval"]
    assert len(summaries) == 2 and len(lexical) == 1
    assert (
        main([*base, "--protocol", "bartscore", "--out", str(tmp_path / "moses")]) == 0
    )  # Moses: other texts
    with RunStore(store, must_exist=True) as s:
        assert sum(r["kind"] == "meta-eval" for r in s.list_runs()) == 3
        assert sum(r["kind"] != "meta-eval" for r in s.list_runs()) == 2
