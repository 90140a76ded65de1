"""Every exported table names its data source (#34): a tiny Care run on the shipped stand-in and one on an
OpenWebText-style dataset read through a seeded held-out slice; the CSV files (a ``data_source`` column), the
Markdown files, the tables stored on the run, the re-rendered HTML report and the leaderboard exports each name
the source the run used."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from dlmeval.store import RunStore
from tests.conftest import tiny_care_spec
from tests.hub_data import save_dataset


def _spec(source: str, corpora: dict | None = None) -> str:
    return tiny_care_spec("ds-tiny", tasks=None, sources=(source,), corpora=corpora, n_prompts=4, temperature=0.5,
                          n_reference=6, reference_words=12, self_bleu_max=10)  # fmt: skip


SLICE = (
    "held-out slice: 20 documents drawn by index with seed 3 (sorted numpy default_rng(seed).choice(rows, n, "
    "replace=False))"
)


def _owt(root) -> str:
    """An OpenWebText-shaped dataset (a train split only, ``text`` and ``url``) in words the tiny tokenizer knows."""
    from dlmeval.models.tiny import TINY_WORDS

    w = [t for t in TINY_WORDS if t.isalpha()]
    rng = np.random.default_rng(0)
    docs = [{"text": " ".join(rng.choice(w, int(rng.integers(10, 20)))), "url": "x"} for _ in range(40)]
    return save_dataset(root / "owt", {"train": docs})


@pytest.fixture(scope="module", params=["stand-in", "owt-slice"])
def run(request, tmp_path_factory):
    from dlmeval.protocols import care
    from dlmeval.protocols.care import load_spec

    root = tmp_path_factory.mktemp("ds")
    if request.param == "stand-in":
        text, want = _spec("webtext"), "webtext: shipped stand-in"
    else:
        owt = _owt(root)
        corpora = {"owt": {"source": owt, "sample": 20, "sample_seed": 3}}
        text, want = _spec("owt", corpora), f"owt: {owt}, {SLICE}"
    (root / "s.toml").write_text(text)
    with RunStore(root / "s.sqlite") as store:
        res = care.run_care(load_spec(root / "s.toml"), store, out_dir=root / "out", progress=False)
    return {"root": root, "res": res, "want": want}


def test_csv_and_markdown_files_name_the_source(run):
    res, out, want = run["res"], run["root"] / "out", run["want"]
    assert {"nfe", "headline", "leaderboard"} <= set(res.tables)
    for name, df in res.tables.items():
        csv = pd.read_csv(out / f"{name}.csv")  # a plain pandas read: the source is a column, no comment line
        assert len(csv) == len(df) and list(csv.columns)[-1] == "data_source", name
        assert set(csv["data_source"]) == {want}, name
        md = (out / f"{name}.md").read_text()
        assert md.rstrip().endswith(f"Data: {want}") and "data_source" not in md, name
    with RunStore(run["root"] / "s.sqlite") as store:  # the source is stored with each table
        for rid in (res.sweep_run, res.model_runs["tiny-llada"]):
            tables = store.get_run(rid).tables()
            assert tables and all(
                set(store.get_run(rid).get_table(n)["data_source"]) == {want} for n in tables
            )


def test_the_re_rendered_report_and_leaderboard_name_the_source(run):
    from dlmeval.protocols import care
    from dlmeval.report import build_report
    from dlmeval.report.leaderboard import write_leaderboard

    root, want = run["root"], run["want"]
    with RunStore(root / "s.sqlite") as store:
        page = build_report(store, None, root / "r.html").read_text()
        lb = write_leaderboard(store, root / "lb")
        tables = care.load_tables(store, run["res"].sweep_run)
        again = care.write_tables(tables, root / "again")  # a stored run written out again
    import html

    assert f"Data: {html.escape(want)}" in page and "data_source" not in page
    assert set(pd.read_csv(lb["csv"])["data_source"]) == {want}
    assert f"Data: {want}" in lb["md"].read_text() and f"Data: {html.escape(want)}" in lb["html"].read_text()
    assert set(pd.read_csv(again / "headline.csv")["data_source"]) == {want}
    assert (again / "headline.md").read_text().rstrip().endswith(f"Data: {want}")


def test_a_table_stored_without_the_column_takes_the_note():
    """A run stored before the tables named their data: the CSV and Markdown take the run's note instead; the
    column is never written twice."""
    from dlmeval.protocols import common
    from dlmeval.report.fmt import split_data_source, with_data_source

    df = pd.DataFrame({"model": ["a", "b"], "mauve": [0.5, 0.25]})
    noted = with_data_source(df, "webtext: shipped stand-in")
    assert list(noted.columns) == ["model", "mauve", "data_source"]
    assert with_data_source(noted, "other") is noted and with_data_source(df, "") is df
    body, src = split_data_source(noted)
    assert list(body.columns) == ["model", "mauve"] and src == "webtext: shipped stand-in"
    mixed = pd.concat([noted, with_data_source(df, "owt: X")])
    assert split_data_source(mixed)[1] == "webtext: shipped stand-in; owt: X"
    render = common.with_data_note(
        lambda name, d: f"### {name}\n\n{len(d.columns)} columns\n", "from the run"
    )
    assert render("t", df).endswith("2 columns\n\nData: from the run\n")
    assert render("t", noted).endswith("2 columns\n\nData: webtext: shipped stand-in\n")
