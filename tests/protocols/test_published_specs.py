"""The paper specs as published (#34): the leaderboard's settings, the OpenWebText slice, the paper's numbers
carried by the specs and printed beside the measured ones."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pandas as pd
import pytest

from dlmeval.errors import InputError

PAPERS = Path(__file__).resolve().parents[2] / ".." / "shared" / "papers"


def _paper(prefix: str) -> str:
    for base in (PAPERS, Path("/work/shared/papers")):
        hits = sorted(base.glob(f"{prefix}_*.txt")) if base.is_dir() else []
        if hits:
            return hits[0].read_text(encoding="utf-8")
    pytest.skip(f"the paper {prefix} is not under ../shared/papers")


def _plan(capsys, *argv):
    from dlmeval.cli.main import main

    assert main(["--json", *argv, "--plan"]) == 0
    return json.loads(capsys.readouterr().out)


def test_leaderboard_plan_he_column_hub_ids_owt_and_published(capsys):
    out = _plan(capsys, "care", "care-leaderboard")
    by = {r["model"]: r for r in out["rows"]}
    he = by["LLaDA-8B-Base"]["humaneval"]
    assert he.startswith("none* at NFE 437") and "3 seeds (1,2,3)" in he and "gen 512 tokens" in he
    assert (
        by["Tiny-A2D (Qwen-0.5B)"]["spec"] == "a2d:dllm-hub/Qwen2.5-Coder-0.5B-Instruct-diffusion-mdlm-v0.1"
    )
    webtext = next(d for d in out["data"] if d["data"] == "corpus webtext")["from"]
    assert "Skylion007/openwebtext" in webtext and "held-out slice: 10000 documents" in webtext
    # every row carries the paper's values of its cells; the AR reference its two
    assert all(r["published"] for r in out["rows"])
    assert by["LLaDA-8B-Base"]["published"] == {
        "ppl_none": 23.4, "mauve_none": 0.948, "ppl_strategy": 20.6, "mauve_strategy": 0.652, "gap": 0.296,
        "humaneval_pass1": 0.32,
    }  # fmt: skip
    # Dream-7B-Base reproduces Table 15's cells: origin / entropy at t = 0, alg_temp 0, one seed
    d = by["Dream-7B-Base"]
    assert d["sampler"].startswith("origin / entropy") and "alg_temp 0" in d["sampler"]
    assert d["seeds"] == [1] and d["temperature"] == 0.0 and "Table 15" in d["reading"]
    assert d["alternative"]["temperature"] == 0.25


def test_leaderboard_plan_text_names_the_cells(capsys):
    from dlmeval.cli.main import main

    assert main(["care", "care-leaderboard", "--plan"]) == 0
    text = capsys.readouterr().out
    assert "HE p@1: none* at NFE 437 (compute-matched), t=0, 3 seeds" in text
    assert "published: ppl_none 23.4, mauve_none 0.948" in text
    assert "Skylion007/openwebtext split train, held-out slice" in text


def test_leaderboard_alternative_reading_runs_the_t025_row():
    from dlmeval.protocols.care.leaderboard import load_leaderboard, parse_leaderboard
    from dlmeval.protocols.spec_io import read_spec

    raw, p = read_spec("care-leaderboard", ("care-leaderboard",))
    paper = load_leaderboard("care-leaderboard")
    alt = parse_leaderboard(
        {**raw, "leaderboard": {**raw["leaderboard"], "reading": "alternative"}}, path=str(p)
    )
    r0 = next(r for r in paper.rows if r.label == "Dream-7B-Base")
    r1 = next(r for r in alt.rows if r.label == "Dream-7B-Base")
    c0, c1 = paper.care_spec(r0), alt.care_spec(r1)
    assert c0.sweep.strategies == ("origin", "entropy") and c0.sweep.seeds == (1,)
    assert c0.sweep.temperatures == (0.0,) and c0.override(r0.model).alg_temp == 0.0
    assert c1.sweep.strategies == ("none", "entropy") and c1.sweep.seeds == (1, 2, 3)
    assert c1.sweep.temperatures == (0.25,)
    assert r1.published is None  # the published cells belong to the paper's reading
    # the other rows are untouched, and their signatures do not carry the new keys
    assert paper.rows[0].signature() == alt.rows[0].signature()
    assert "baseline" not in paper.rows[0].signature() and "baseline" in r0.signature()
    with pytest.raises(InputError, match="leaderboard.reading"):
        parse_leaderboard({**raw, "leaderboard": {**raw["leaderboard"], "reading": "nope"}})
    with pytest.raises(InputError, match="alternative"):
        bad = [dict(r) for r in raw["rows"]]
        bad[0]["alternative"] = {"steps": 3}
        parse_leaderboard({**raw, "rows": bad})


def _table21(text: str) -> dict[str, list[str]]:
    start = text.index("Table 21: Full Care leaderboard")
    out = {}
    for line in text[start : start + 4000].splitlines():
        cells = line.split("\t")
        if len(cells) >= 7:
            out[cells[0].strip()] = cells
    return out


def _num(cell: str) -> float | None:
    m = re.match(r"\s*([0-9.]+)", cell)
    return float(m.group(1)) if m else None


def test_leaderboard_published_values_match_the_papers_table_21():
    from dlmeval.protocols.care.leaderboard import load_leaderboard

    t21 = _table21(_paper("001"))
    spec = load_leaderboard("care-leaderboard")
    cols = ["ppl_none", "mauve_none", "ppl_strategy", "mauve_strategy", "gap", "humaneval_pass1"]
    checked = 0
    for r in spec.rows:
        name = "GPT-2-XL ( $p{=}0.95$ )" if r.kind == "ar" else r.label
        cells = t21[name][2:]
        for col, cell in zip(cols, cells):
            paper = _num(cell)
            if paper is None:  # "—": the spec carries no value for it
                assert col not in (r.published or {}), (r.label, col)
                continue
            if col == "humaneval_pass1":
                paper /= 100
            assert r.published[col] == pytest.approx(paper, abs=1e-9), (r.label, col)
            checked += 1
    assert checked >= 60


def test_published_compare_prints_measured_beside_published_with_se():
    from dlmeval.protocols import published as P

    entries = P.parse_entries(
        [
            {"paper": "Table 6", "table": "mauve_temperature",
             "where": {"model": "LLaDA-8B-Base", "strategy": "none", "steps": 256, "temperature": 0.25},
             "values": {"mauve": 0.948}},
            {"paper": "Table 6", "table": "mauve_temperature", "where": {"strategy": "random"},
             "values": {"mauve": 0.5}},
            {"paper": "Table 4", "table": "compute_matched", "where": {}, "values": {"ppl": 7.6}},
        ]
    )  # fmt: skip
    frame = pd.DataFrame(
        {
            "model": ["llada:LLaDA-8B-Base", "llada:LLaDA-8B-Base"],
            "strategy": ["none", "none"],
            "steps": [256, 128],
            "temperature": [0.25, 0.25],
            "mauve": [0.90, 0.95],
            "mauve_se": [0.02, 0.01],
        }
    )
    cells = P.compare(entries, {"mauve_temperature": frame})
    assert cells[0].measured == pytest.approx(0.90) and cells[0].diff_se == pytest.approx(-2.4)
    assert math.isnan(cells[1].measured) and "no such row" in cells[1].note
    assert "no compute_matched table" in cells[2].note
    md = P.markdown(cells)
    assert (
        "| Table 6 | model=LLaDA-8B-Base, strategy=none, steps=256, temperature=0.25 | mauve | 0.948 | 0.900 |"
        in md
    )
    assert "-2.40" in md
    for bad, msg in (
        ([{"paper": "T", "table": "x", "values": {}}], "values"),
        ([{"paper": "T", "table": "x", "values": {"a": "b"}}], "values.a must be a number"),
        ([{"paper": "T", "values": {"a": 1}}], "table is required"),
        ([{"paper": "T", "table": "x", "values": {"a": 1}, "bogus": 1}], "bogus"),
    ):
        with pytest.raises(InputError, match=msg):
            P.parse_entries(bad)


def test_owt_slice_is_a_seeded_selection_by_index_recorded_in_the_provenance(tmp_path):
    from dlmeval.data.hub import load_rows, sample_indices

    a = sample_indices(1000, 10, 0)
    assert a == sample_indices(1000, 10, 0) and a != sample_indices(1000, 10, 1)
    assert a == sorted(a) and len(set(a)) == 10 and all(0 <= i < 1000 for i in a)
    assert sample_indices(5, 10, 0) == [0, 1, 2, 3, 4]
    f = tmp_path / "docs.jsonl"
    f.write_text("".join(json.dumps({"text": f"document {i}"}) + "\n" for i in range(50)))
    rows = load_rows(str(f), columns=["text"], sample=5, sample_seed=3)
    assert [r["text"] for r in rows.rows] == [f"document {i}" for i in sample_indices(50, 5, 3)]
    assert rows.provenance["sample"]["n"] == 5 and rows.provenance["sample"]["seed"] == 3
    assert rows.provenance["sample"]["of"] == 50
    other = load_rows(str(f), columns=["text"], sample=5, sample_seed=4)
    assert other.provenance["sample"]["indices"] != rows.provenance["sample"]["indices"]
    assert other.provenance["digest"] != rows.provenance["digest"]


def test_care_paper_plan_lists_the_published_cells(capsys):
    out = _plan(capsys, "care", "care-paper")
    pub = out["published"]
    papers = {e["paper"] for e in pub}
    assert {
        "Table 3",
        "Table 4",
        "Table 5",
        "Table 6",
        "Table 7",
        "Table 9",
        "Table 11",
        "Table 17",
    } <= papers
    star = [e for e in pub if e["paper"] == "Table 11" and e["where"].get("nfe_budget") == 437]
    assert [e["values"]["accuracy"] for e in star] == [0.32, 0.283]
    from dlmeval.cli.main import main

    assert main(["care", "care-paper", "--plan"]) == 0
    text = capsys.readouterr().out
    assert "published values (113 cells):" in text
    assert (
        "Table 6   mauve_temperature[model=LLaDA-8B-Base, strategy=none, steps=256, temperature=0.25]: mauve 0.948"
        in text
    )


def _grid(text: str, caption: str, rows: int) -> list[list[str]]:
    start = text.index(caption)
    out = []
    for line in text[start:].splitlines()[1:]:
        cells = [c.strip() for c in line.split("\t")]
        if len(cells) >= 3 and re.fullmatch(r"\d+", cells[1]) and re.match(r"[\d$.+]", cells[-1] or "x"):
            out.append(cells)
            if len(out) == rows:
                break
    assert len(out) == rows, caption
    return out


def test_care_paper_published_values_match_the_paper_text():
    from dlmeval.protocols.care import load_spec

    text = _paper("001")
    spec = load_spec("care-paper")

    def value(paper, table, col, **where):
        hits = [
            dict(e.values)[col]
            for e in spec.published
            if e.paper == paper
            and e.table == table
            and all(dict(e.where).get(k) == v for k, v in where.items())
        ]
        assert len(hits) == 1, (paper, where)
        return hits[0]

    def num(cell):
        return float(re.search(r"\.?\d[\d.]*", cell.replace("$", "")).group(0))

    # Table 6: MAUVE across temperatures (rows: strategy, steps, then t = 0, 0.1, 0.25, 0.5)
    names = {"none": "none", "random": "random", "high ent.": "high_entropy"}
    for cells in _grid(text, "Table 6: MAUVE across temperatures", 6):
        for t, cell in zip((0.0, 0.1, 0.25, 0.5), cells[2:6]):
            got = value("Table 6", "mauve_temperature", "mauve", strategy=names[cells[0]], steps=int(cells[1]),
                        temperature=t)  # fmt: skip
            assert got == pytest.approx(num(cell)), (cells, t)
    # Table 17: PPL across temperatures (t > 0; t = 0 is Table 5's)
    for cells in _grid(text, "Table 17: PPL across temperatures", 6):
        for t, cell in zip((0.1, 0.25, 0.5), cells[3:6]):
            got = value(
                "Table 17", "quality", "ppl", strategy=names[cells[0]], steps=int(cells[1]), temperature=t
            )
            assert got == pytest.approx(num(cell))
    # Table 11: HE pass@1 (%), the compute-matched none* at NFE 437
    assert value(
        "Table 11", "downstream", "accuracy", nfe_budget=437, temperature=0.0
    ) * 100 == pytest.approx(num(re.search(r"none\*\tadj\.\t437\t([^\t]+)", text).group(1)))


def test_care_tables_carry_measured_beside_published_from_table_13_cells(tmp_path):
    """The paper's three seeds of the headline cells (Table 13) reproduce Table 6's 0.948 +- 0.021 and Table 7's
    gap 0.296: the published table puts them beside the spec's values, the difference in seed SEs."""
    from dlmeval.protocols.care import markdown, parse_spec
    from dlmeval.protocols.care import tables as ct
    from dlmeval.store import RunStore

    none, hent = (0.979, 0.958, 0.907), (0.602, 0.682, 0.671)
    rows = []
    for s, (a, b) in enumerate(zip(none, hent), start=1):
        for strat, m in (("none", a), ("high_entropy", b)):
            rows.append(
                {"model": "llada:LLaDA-8B-Base", "source": "webtext", "strategy": strat, "steps": 256,
                 "nfe_budget": None, "temperature": 0.25, "fraction": 0.15, "seed": s, "n": 100, "n_accepted": 100,
                 "acceptance": 1.0, "nfe": 128.0, "nfe_min": 128.0, "nfe_max": 128.0, "remasks": 0.0, "ppl": 20.0,
                 "mauve": m, "self_bleu": 5.0, "distinct3": 0.8}
            )  # fmt: skip
    spec = parse_spec(
        {
            "name": "t",
            "models": {"diffusion": ["llada:GSAI-ML/LLaDA-8B-Base"]},
            "sweep": {
                "strategies": ["none", "high_entropy"],
                "steps": [256],
                "temperatures": [0.25],
                "seeds": [1, 2, 3],
            },
            "published": [
                {
                    "paper": "Table 6",
                    "table": "mauve_temperature",
                    "where": {
                        "model": "LLaDA-8B-Base",
                        "strategy": "none",
                        "steps": 256,
                        "temperature": 0.25,
                    },
                    "values": {"mauve": 0.948},
                },
                {
                    "paper": "Table 7",
                    "table": "gap",
                    "where": {"model": "LLaDA-8B-Base", "steps": 256, "temperature": 0.25},
                    "values": {"gap": 0.296},
                },
                {
                    "paper": "Table 4",
                    "table": "compute_matched",
                    "where": {"strategy": "none", "nfe_budget": 128},
                    "values": {"ppl": 7.6},
                },
            ],
        }  # fmt: skip
    )
    assert (
        spec.config()
        == parse_spec(
            {
                **{"name": "t"},
                "models": {"diffusion": ["llada:GSAI-ML/LLaDA-8B-Base"]},
                "sweep": {
                    "strategies": ["none", "high_entropy"],
                    "steps": [256],
                    "temperatures": [0.25],
                    "seeds": [1, 2, 3],
                },
            }
        ).config()
    )  # fmt: skip  (published values decide no number)
    tables = ct.all_tables(ct.cells_frame(rows), ct.down_frame([]), spec)
    pub = tables["published"].set_index("paper")
    assert pub.loc["Table 6", "measured"] == pytest.approx(0.948, abs=1e-9)
    assert pub.loc["Table 6", "se"] == pytest.approx(0.021378, abs=1e-5)
    assert abs(pub.loc["Table 6", "diff_se"]) < 1e-6
    assert pub.loc["Table 7", "measured"] == pytest.approx(0.296333, abs=1e-5)
    assert pub.loc["Table 7", "diff_se"] == pytest.approx(0.000333 / pub.loc["Table 7", "se"], rel=1e-2)
    assert (
        math.isnan(pub.loc["Table 4", "measured"])
        and "no compute_matched table" in pub.loc["Table 4", "note"]
    )
    assert pub.loc["Table 6", "data"] == "webtext: shipped stand-in"
    md = markdown("published", tables["published"])
    assert "| Table 6 |" in md and "| mauve | 0.948 | 0.948 | 0.000 | 0.00 |" in md
    assert "Data: webtext: shipped stand-in" in md
    with RunStore(tmp_path / "s.sqlite") as store:
        run = store.open_run("care-test", {"x": 1})
        run.put_table("published", tables["published"])
        pd.testing.assert_frame_equal(run.get_table("published"), tables["published"], check_dtype=False)


def test_dllm_block_count_gives_every_block_ceil_steps_over_blocks():
    """dllm's samplers give each block ceil(steps / blocks) steps and one KV-cache prefix pass; with 3 blocks of
    8 and 8 steps that is 3 + 1 passes per block (12), not dlmeval's 3 + 3 + 2 decode passes plus 3 (11)."""
    from dlmeval.sampling import SamplerConfig, predict_nfe
    from dlmeval.sampling.block import block_nfe_dllm, dllm_transfer_counts

    cfg = SamplerConfig(length=24, steps=8, block_length=8, strategy="none", stop_at_eos=False)
    assert predict_nfe(24, 8, block_length=8) == 8
    assert block_nfe_dllm(cfg) == 12
    divisible = SamplerConfig(length=24, steps=24, block_length=8, strategy="none", stop_at_eos=False)
    assert block_nfe_dllm(divisible) == predict_nfe(24, 24, block_length=8) + 3
    # dllm's linear schedule: round(remaining * (1 - s/t)) half to even, steps transferring nothing dropped
    assert dllm_transfer_counts(8, 3) == [3, 2, 3]
    assert dllm_transfer_counts(8, 16) == [1] * 8  # 16 steps on 8 tokens: only 8 steps decode (a pass each)
    assert sum(dllm_transfer_counts(32, 7)) == 32 and len(dllm_transfer_counts(32, 7)) == 7


def test_robust_paper_plan_names_the_papers_tables_and_the_probe_default_has_no_scaler(capsys):
    from dlmeval.protocols.robust.probe_linear import SCALER

    out = _plan(capsys, "robust", "robust-paper")
    by = {r["table"]: r["paper"] for r in out["paper_tables"]}
    assert by["summary"].startswith("Table 1") and by["calibration"].startswith("Table 2")
    assert by["dgcg"].startswith("Table 3") and by["probes"].startswith("Table 4")
    assert by["ipm"].startswith("Tables 5 and 10") and by["recipe"].startswith("Table 6")
    assert by["comparison"].startswith("Table 11") and by["aurdi"].startswith("Table 9")
    assert SCALER is False and out["readings"]["probe_scaler"].startswith("StandardScaler off")
    assert len(out["published"]) == 24
    from dlmeval.cli.main import main

    assert main(["robust", "robust-paper", "--plan"]) == 0
    text = capsys.readouterr().out
    assert "the paper's tables each part fills:" in text and "Table 4, Fig. 7" in text
    assert "published values (78 cells):" in text


def test_robust_paper_published_values_match_the_papers_tables_1_and_2():
    from dlmeval.protocols.robust import load_spec

    text = _paper("002")
    spec = load_spec("robust-paper")
    names = {"LLaDA-8B": "LLaDA-8B-Instruct", "LLaMA-3-8B": "Meta-Llama-3-8B-Instruct",
             "Dream-7B": "Dream-v0-Instruct-7B", "Qwen2.5-7B": "Qwen2.5-7B-Instruct"}  # fmt: skip
    tasks = {"TriviaQA": "triviaqa", "GSM8K": "gsm8k", "ARC-Chall.": "arc_challenge"}
    pub = {(e.paper, dict(e.where)["task"], dict(e.where)["model"]): dict(e.values) for e in spec.published}
    for caption, paper, cols in (
        ("Table 1: Clean accuracy", "Table 1", ("acc_clean", "acc_r", "mean_rdi", "adv_rate")),
        ("Table 2: Clean-baseline calibration", "Table 2", ("ece", "mean_confidence", "auroc")),
    ):
        start = text.index(caption)
        task, seen = None, 0
        for line in text[start : start + 3000].splitlines()[2:16]:
            cells = line.split("\t")
            if cells[0]:
                task = tasks.get(cells[0], task)
            if len(cells) < 3 or cells[1] not in names:
                continue
            vals = pub[(paper, task, names[cells[1]])]
            for col, cell in zip(cols, cells[2:]):
                want = float(cell.rstrip("%")) / (100 if cell.endswith("%") else 1)
                assert vals[col] == pytest.approx(want), (paper, task, cells[1], col)
            seen += 1
        assert seen == 12, paper
    # the published values decide no number: the signature is the spec's without them
    assert "published" not in spec.config()


def test_dllm_transfer_counts_match_values_recorded_from_dllms_code():
    """Parity (#34): the schedule dllm's MDLM / BD3LM samplers run, recorded from dllm's own
    get_num_transfer_tokens (tests/parity/dllm_transfer_counts.json says how)."""
    from dlmeval.sampling.block import dllm_transfer_counts

    rec = json.loads((Path(__file__).parents[1] / "parity" / "dllm_transfer_counts.json").read_text())
    assert rec["source"].startswith("ZHZisZZ/dllm @ ") and len(rec["cases"]) == 60
    for c in rec["cases"]:
        assert dllm_transfer_counts(c["masked"], c["steps"]) == c["counts"], c


def test_a_stored_published_table_prints_as_its_cells_do():
    """Care's and robustness' Markdown read the stored comparison table back through one function."""
    from dlmeval.protocols.published import Cell, frame, markdown, markdown_of_frame

    cells = [
        Cell("Care", "Table 3", "none", "MAUVE", 0.601, 0.55, 0.02, "seed 1 only"),
        Cell("R", "1", "a", "b", 2.0),
    ]
    assert markdown_of_frame(frame(cells)) == markdown(cells)
    assert "-2.55 (seed 1 only)" in markdown(cells)


def test_the_dream_rows_baseline_columns_read_its_own_baseline():
    """Dream-7B-Base's Care run compares origin (its baseline) with entropy: the leaderboard row's baseline
    columns read the origin cells, not a `none` that run never had."""
    from dlmeval.protocols.care.leaderboard import _diffusion_row, load_leaderboard

    spec = load_leaderboard("care-leaderboard")
    r = next(r for r in spec.rows if r.label == "Dream-7B-Base")
    lb = pd.DataFrame(
        [{"ppl_origin": 11.0, "mauve_origin": 0.95, "ppl_entropy": 12.0, "mauve_entropy": 0.92}]
    )
    cells = pd.DataFrame({"strategy": ["origin", "entropy"], "nfe": [256.0, 300.0]})
    row = _diffusion_row(spec, r, lb, cells)
    assert (row["mauve_none"], row["ppl_none"], row["nfe_none"]) == (0.95, 11.0, 256.0)
    assert (row["mauve_strategy"], row["nfe_strategy"]) == (0.92, 300.0)
