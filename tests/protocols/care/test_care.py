"""The Care protocol: spec parsing, table arithmetic on synthetic stored results, sweeps on tiny models, resume."""

from __future__ import annotations

import gzip
import itertools
import json
import math
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from dlmeval.errors import InputError
from dlmeval.protocols import care
from dlmeval.protocols.care import load_spec, markdown, parse_spec
from dlmeval.protocols.care import tables as ct
from dlmeval.store import RunStore

# The paper's Table 13 (three-seed MAUVE, LLaDA-8B-Base, OWT) at 256 steps, t = 0.25: the headline cells.
NONE_256 = (0.979, 0.958, 0.907)
HENT_256 = (0.602, 0.682, 0.671)


def base_spec(**over):
    raw = {
        "name": "t",
        "seed": 0,
        "sweep": {
            "strategies": ["none", "high_entropy"],
            "steps": [128, 256],
            "temperatures": [0.0, 0.25],
            "seeds": [1, 2, 3],
        },
        "headline": {"steps": 256, "temperature": 0.25},
    }
    for k, v in over.items():
        raw[k] = v
    return parse_spec(raw)


def cell(strategy, steps, temperature, seed, mauve, *, model="m", source="webtext", nfe=None, ppl=10.0, **kw):
    row = {
        "model": model,
        "source": source,
        "strategy": strategy,
        "steps": steps,
        "nfe_budget": kw.pop("nfe_budget", None),
        "temperature": temperature,
        "fraction": kw.pop("fraction", 0.15),
        "seed": seed,
        "n": 100,
        "n_accepted": kw.pop("n_accepted", 100),
        "acceptance": kw.pop("acceptance", 1.0),
        "nfe": nfe if nfe is not None else (128.0 if strategy == "none" else 437.0),
        "nfe_min": nfe if nfe is not None else (128.0 if strategy == "none" else 437.0),
        "nfe_max": nfe if nfe is not None else (128.0 if strategy == "none" else 437.0),
        "remasks": 0.0 if strategy == "none" else 428.0,
        "ppl": ppl,
        "mauve": mauve,
        "self_bleu": 5.0,
        "distinct3": 0.8,
    }
    row.update(kw)
    return row


def headline_cells():
    rows = []
    for s, (a, b) in enumerate(zip(NONE_256, HENT_256), start=1):
        rows.append(cell("none", 256, 0.25, s, a))
        rows.append(cell("high_entropy", 256, 0.25, s, b))
    return rows


# ------------------------------------------------------------------------------------------------ spec
def test_shipped_specs_parse():
    demo = load_spec("care-demo")
    assert demo.sweep.strategies == ("none", "high_entropy")
    assert len(demo.sweep.temperatures) == 2 and len(demo.sweep.seeds) == 3
    assert len(demo.sweep.steps) + len(demo.compute_matched.nfe) == 2 or len(demo.sweep.steps) == 2
    paper = load_spec("care-paper")
    assert (paper.generation.prefix_tokens, paper.generation.gen_tokens) == (64, 128)
    assert paper.sweep.temperatures == (0.0, 0.1, 0.25, 0.5)
    assert paper.sweep.steps == (64, 128, 256)
    assert paper.headline_steps == 256 and paper.headline_temperature == 0.25
    assert paper.headline.bootstrap_resamples == 10_000
    tiny = load_spec("care-tiny")
    assert tiny.generation.prefix_tokens == 8


def test_spec_presets_and_overrides():
    s = parse_spec({"preset": "cpu", "sweep": {}, "generation": {"gen_tokens": 48}})
    assert (s.generation.prefix_tokens, s.generation.gen_tokens) == (32, 48)
    assert s.headline_steps == 128 and s.headline_temperature == 0.0


@pytest.mark.parametrize(
    "raw, match",
    [
        ({"sweep": {}, "bogus": 1}, "unknown key.*bogus"),
        ({"sweep": {"stepz": [1]}}, r"sweep\.stepz"),
        ({"sweep": {"steps": [0]}}, r"sweep\.steps\[0\] must be at least 1"),
        ({"sweep": {"temperatures": [-0.1]}}, "temperatures"),
        ({"sweep": {"seeds": [1, 1]}}, "repeats"),
        ({"sweep": {"strategies": ["none", "random"]}}, "headline.strategy"),
        ({"sweep": {}, "headline": {"steps": 999}}, "headline.steps = 999"),
        ({"sweep": {}, "generation": {"sources": ["owt"]}}, r"neither a built-in corpus \(webtext, lm1b"),
        ({"sweep": {}, "preset": "huge"}, "preset"),
        ({}, r"\[sweep\] table is required"),
        ({"sweep": {}, "metrics": {"english_filter": "yes"}}, "true or false"),
    ],
)
def test_spec_errors_name_the_key(raw, match):
    with pytest.raises(InputError, match=match):
        parse_spec(raw)


def test_spec_yaml_and_toml_agree(tmp_path):
    toml = tmp_path / "s.toml"
    toml.write_text('name = "x"\n[sweep]\nsteps = [8]\ntemperatures = [0.0, 0.5]\n')
    yml = tmp_path / "s.yaml"
    yml.write_text("name: x\nsweep:\n  steps: [8]\n  temperatures: [0.0, 0.5]\n")
    assert load_spec(toml) == load_spec(yml)
    with pytest.raises(InputError, match="no spec file"):
        load_spec(tmp_path / "missing.toml")


def test_every_care_spec_default_is_written_once():
    """A key left out takes its dataclass field's default (the field carries default and check; the parser repeats
    neither), except the fields that follow [sweep], which take the sweep's value; a bad value of any key is
    refused with a message naming it."""
    import dataclasses
    import re

    from dlmeval.protocols.care import spec as cs

    def default(f):
        return f.default_factory() if f.default is dataclasses.MISSING else f.default

    tables = {"generation": cs.GenerationSpec, "sweep": cs.SweepSpec, "compute_matched": cs.MatchedSpec,
              "dose_response": cs.DoseSpec, "headline": cs.HeadlineSpec, "metrics": cs.MetricsSpec,
              "downstream": cs.DownstreamSpec}  # fmt: skip
    nested = {"humaneval": cs.HumanEvalSpec, "gsm8k": cs.GSM8KSpec, "arc": cs.ARCSpec,
              "hellaswag": cs.HellaSwagSpec, "bbh": cs.BBHSpec}  # fmt: skip
    plain = parse_spec({"sweep": {}})
    assert (plain.name, plain.models, plain.evaluator) == (
        "care",
        cs.ModelsSpec().diffusion,
        cs.ModelsSpec().evaluator,
    )
    for f in dataclasses.fields(cs.CareSpec):
        if f.name not in ("name", "path", *tables):
            assert getattr(plain, f.name) == f.default, f.name
    for name, cls in tables.items():  # the default sweep: every follower's value is its dataclass default too
        assert getattr(plain, name) == cls(), name
    # a sweep unlike the defaults: the followers follow it, every other field keeps its dataclass default
    sw = {"strategies": ["none", "random", "high_entropy"], "steps": [16, 32], "temperatures": [0.0, 0.5],
          "seeds": [4, 5]}  # fmt: skip
    got = parse_spec({"sweep": sw, "preset": "tiny"})
    follows = {
        ("compute_matched", "strategies"): ("none", "random", "high_entropy"),
        ("compute_matched", "seeds"): (4,),
        ("dose_response", "steps"): 32,
        ("dose_response", "temperature"): 0.5,
        ("dose_response", "seeds"): (4,),
        ("downstream", "strategies"): ("none", "random", "high_entropy"),
        ("downstream", "steps"): (32,),
        ("downstream", "seeds"): (4,),
        ("generation", "prefix_tokens"): cs.PRESETS["tiny"]["prefix_tokens"],
        ("generation", "gen_tokens"): cs.PRESETS["tiny"]["gen_tokens"],
    }
    for name, cls in tables.items():
        for f in dataclasses.fields(cls):
            want = follows.get((name, f.name), default(f)) if name != "sweep" else getattr(got.sweep, f.name)
            assert getattr(getattr(got, name), f.name) == want, (name, f.name)
    assert cs.GenerationSpec() == cs.GenerationSpec(**cs.PRESETS["paper"])  # the paper preset is the default
    # every key is checked, and a bad value names it (a table where a value belongs fails every check)
    bad = {"x": 1}
    cases = [({"sweep": {}, k: bad}, k) for k in ("name", "seed", "preset")]
    cases += [({"sweep": {}, "models": {k: bad}}, f"models.{k}") for k in ("diffusion", "evaluator")]
    for name, cls in tables.items():
        for f in dataclasses.fields(cls):
            if "table" in f.metadata:
                continue
            assert "check" in f.metadata, (name, f.name)
            cases.append(({"sweep": {}, name: {f.name: bad}}, f"{name}.{f.name}"))
    for sub, cls in nested.items():
        for f in dataclasses.fields(cls):
            assert "check" in f.metadata, (sub, f.name)
            cases.append(({"sweep": {}, "downstream": {sub: {f.name: bad}}}, f"downstream.{sub}.{f.name}"))
    for raw, key in cases:
        with pytest.raises(InputError, match=rf"spec: {re.escape(key)}\b"):
            parse_spec(raw)
    n_plain = sum(1 for c in tables.values() for f in dataclasses.fields(c) if "table" not in f.metadata)
    assert len(cases) == 5 + n_plain + sum(len(dataclasses.fields(c)) for c in nested.values())


def test_config_holds_batch_size_and_splits_models():
    a = base_spec(generation={"batch_size": 4})
    b = base_spec(generation={"batch_size": 32})
    # which rows share a forward pass can move a padded row's last bits: another batch size is another run
    assert a.config("m") != b.config("m") and a.config() != b.config()
    assert a.config("m")["generation"]["batch_size"] == 4
    assert a.config("m")["model"] == "m" and "models" not in a.config("m")


# ------------------------------------------------------------------------------------------------ tables
def test_gap_golden_from_paper_table_13():
    spec = base_spec()
    cells = ct.cells_frame(headline_cells())
    gap = ct.table_gap(cells, spec)
    assert len(gap) == 1
    r = gap.iloc[0]
    diffs = np.array(NONE_256) - np.array(HENT_256)  # 0.377, 0.276, 0.236
    assert r["gap"] == pytest.approx(diffs.mean(), abs=1e-12)
    assert r["gap"] == pytest.approx(0.29633, abs=1e-5)  # paper: 0.296
    assert r["gap_se"] == pytest.approx(0.041952, abs=1e-5)  # paper: 0.042 (paired SE)
    assert r["t"] == pytest.approx(7.0636, abs=1e-3)  # paper: t(2) = 7.06
    # df = 2: the t CDF has the closed form 1/2 + t / (2 sqrt(2 + t^2)), so p = 1 - t / sqrt(2 + t^2)
    assert r["p"] == pytest.approx(1 - r["t"] / math.sqrt(2 + r["t"] ** 2), rel=1e-9)
    assert r["p"] == pytest.approx(0.0195, abs=5e-4)  # paper: p = 0.020
    assert (r["df"], r["n_seeds"]) == (2, 3)


def test_mauve_temperature_mean_se_golden():
    cells = ct.cells_frame(headline_cells())
    t6 = ct.table_mauve_temperature(cells, base_spec()).set_index("strategy")
    # paper Table 13: none@256 t=0.25 0.948 +- 0.021, h_ent 0.652 +- 0.025
    assert t6.loc["none", "mauve"] == pytest.approx(0.948, abs=1e-3)
    assert t6.loc["none", "mauve_se"] == pytest.approx(0.021378, abs=1e-5)
    assert t6.loc["high_entropy", "mauve"] == pytest.approx(0.651667, abs=1e-5)
    assert t6.loc["high_entropy", "mauve_se"] == pytest.approx(0.025036, abs=1e-5)  # paper: .025
    md = markdown("mauve_temperature", ct.table_mauve_temperature(cells, base_spec()))
    assert "0.948 ± 0.021" in md and "t=0.25" in md


def test_headline_bootstrap_ci_with_three_pairs():
    spec = base_spec()
    cells = ct.cells_frame(headline_cells())
    h = ct.table_headline(cells, spec)
    r = h.iloc[0]
    diffs = np.array(NONE_256) - np.array(HENT_256)
    # 3 pairs: each extreme resample (all three the same pair) has mass 1/27 = 3.7% > 2.5%, so the 95% percentile
    # interval runs exactly from the smallest to the largest paired difference
    assert r["ci_lo"] == pytest.approx(diffs.min(), abs=1e-12)
    assert r["ci_hi"] == pytest.approx(diffs.max(), abs=1e-12)
    assert r["n_resamples"] == 10_000 and r["seeds"] == "1,2,3"
    assert r["gap"] == pytest.approx(0.29633, abs=1e-5)
    again = ct.table_headline(cells, spec)
    pd.testing.assert_frame_equal(h, again)


def test_headline_bootstrap_ci_many_seeds_is_seeded_percentile():
    from dlmeval.stats import paired_bootstrap_ci

    rng = np.random.default_rng(5)
    a, b = rng.uniform(0.8, 1.0, 8), rng.uniform(0.5, 0.8, 8)
    spec = base_spec(sweep={"strategies": ["none", "high_entropy"], "steps": [256], "temperatures": [0.25],
                            "seeds": list(range(1, 9))})  # fmt: skip
    rows = [cell("none", 256, 0.25, s + 1, a[s]) for s in range(8)]
    rows += [cell("high_entropy", 256, 0.25, s + 1, b[s]) for s in range(8)]
    r = ct.table_headline(ct.cells_frame(rows), spec).iloc[0]
    ci = paired_bootstrap_ci(a, b, n_resamples=10_000, seed=int(r["bootstrap_seed"]))
    assert (r["ci_lo"], r["ci_hi"]) == (ci.lo, ci.hi)
    assert r["ci_lo"] < (a - b).mean() < r["ci_hi"]


def full_factorial(seed=0):
    """2 strategies x 4 temperatures x 3 steps x 3 seeds = 72 cells (the paper's Table 8 design) with a strong
    temperature effect, a strategy effect and a strategy x temperature interaction, plus seeded noise."""
    rng = np.random.default_rng(seed)
    temps, steps, seeds = [0.0, 0.1, 0.25, 0.5], [64, 128, 256], [1, 2, 3]
    rows = []
    for strat, t, st, sd in itertools.product(["none", "high_entropy"], temps, steps, seeds):
        m = 0.6 + 0.6 * t - (0.1 + 0.4 * t if strat == "high_entropy" else 0.0) + 0.0002 * st
        rows.append(cell(strat, st, t, sd, m + rng.normal(0, 0.03)))
    spec = base_spec(
        sweep={"strategies": ["none", "high_entropy"], "steps": steps, "temperatures": temps, "seeds": seeds}
    )
    return spec, ct.cells_frame(rows)


def test_anova_wiring_matches_hand_computed_balanced_anova():
    spec, cells = full_factorial()
    tab = ct.table_anova(cells, spec).set_index("factor")
    expected_df = {
        "temperature": 3,
        "strategy": 1,
        "steps": 2,
        "temperature x strategy": 3,
        "temperature x steps": 6,
        "strategy x steps": 2,
        "temperature x strategy x steps": 6,
        "Residual": 48,
    }
    assert {k: int(v) for k, v in tab["df"].items()} == expected_df  # the paper's Table 8 layout
    # balanced design: Type II sums of squares are the classical ones, computable by hand
    y = cells["mauve"].to_numpy()
    grand = y.mean()
    cell_mean = cells.groupby(["strategy", "temperature", "steps"])["mauve"].transform("mean").to_numpy()
    ss_res = float(((y - cell_mean) ** 2).sum())
    for f in ("temperature", "strategy", "steps"):
        means = cells.groupby(f)["mauve"].transform("mean").to_numpy()
        ss = float(((means - grand) ** 2).sum())
        assert tab.loc[f, "sum_sq"] == pytest.approx(ss, rel=1e-9)
        assert tab.loc[f, "partial_eta_sq"] == pytest.approx(ss / (ss + ss_res), rel=1e-9)
    assert tab.loc["Residual", "sum_sq"] == pytest.approx(ss_res, rel=1e-9)
    # the built-in effects are found: temperature and the strategy x temperature interaction are significant
    assert tab.loc["temperature", "p"] < 1e-6 and tab.loc["temperature x strategy", "p"] < 1e-3
    assert tab.loc["temperature", "partial_eta_sq"] > 0.9


def test_anova_one_seed_falls_back_to_main_effects_and_notes_it():
    spec, cells = full_factorial()
    one = cells[cells["seed"] == 1]
    tab = ct.table_anova(one, spec)
    assert set(tab["factor"]) == {"temperature", "strategy", "steps", "Residual"}
    assert tab["note"].str.contains("main effects only").all()


def test_anova_drops_single_level_factor():
    spec, cells = full_factorial()
    sub = cells[cells["steps"] == 128]
    tab = ct.table_anova(sub, spec)
    assert "steps" not in set(tab["factor"])
    assert tab["note"].str.contains("steps has one level").all()
    assert int(tab.set_index("factor").loc["Residual", "df"]) == 16  # 24 cells - 8 parameters


def test_nfe_table_ratio_and_quality_means():
    spec = base_spec()
    rows = [cell("none", 256, t, s, 0.9) for t in (0.0, 0.25) for s in (1, 2, 3)]
    rows += [cell("high_entropy", 256, t, s, 0.6, nfe=437.0 + s) for t in (0.0, 0.25) for s in (1, 2, 3)]
    t3 = ct.table_nfe(ct.cells_frame(rows), spec).set_index("strategy")
    assert t3.loc["none", "nfe"] == 128 and t3.loc["none", "ratio_vs_none"] == 1
    assert t3.loc["high_entropy", "nfe"] == pytest.approx(439.0)
    assert t3.loc["high_entropy", "ratio_vs_none"] == pytest.approx(439 / 128)
    assert (t3.loc["high_entropy", "nfe_min"], t3.loc["high_entropy", "nfe_max"]) == (438, 440)
    assert t3["steps"].dtype == np.int64


def test_compute_matched_delta_and_dose_response_selection():
    spec = base_spec(
        compute_matched={"nfe": [128, 256], "strategies": ["none", "high_entropy"], "seeds": [1, 2]},
        dose_response={
            "strategy": "high_entropy",
            "steps": 256,
            "temperature": 0.25,
            "fractions": [0.05, 0.3],
        },
    )
    rows = [
        cell("none", None, 0.0, 1, 0.60, nfe_budget=128, nfe=128.0),
        cell("none", None, 0.0, 2, 0.64, nfe_budget=128, nfe=128.0),
        cell("high_entropy", None, 0.0, 1, 0.589, nfe_budget=128, nfe=128.0),
        cell("high_entropy", 256, 0.25, 1, 0.896, fraction=0.05, remasks=289.0),
        cell("high_entropy", 256, 0.25, 1, 0.482, fraction=0.3, remasks=531.0),
        cell("high_entropy", 256, 0.25, 1, 0.602),  # the sweep's fraction: not in this dose table
        cell("high_entropy", 128, 0.25, 1, 0.1, fraction=0.05),  # other steps: not in it either
    ]
    cells = ct.cells_frame(rows)
    t4 = ct.table_compute_matched(cells, spec).set_index("strategy")
    assert t4.loc["none", "mauve"] == pytest.approx(0.62) and t4.loc["none", "n_seeds"] == 2
    assert t4.loc["high_entropy", "delta_mauve_vs_none"] == pytest.approx(0.589 - 0.62)
    t9 = ct.table_dose_response(cells, spec)
    assert list(t9["fraction"]) == [0.05, 0.3]
    assert list(t9["mauve"]) == [0.896, 0.482] and list(t9["remasks_per_sample"]) == [289.0, 531.0]
    # the sweep tables do not see the compute-matched or dose cells
    assert len(ct.sweep_cells(cells, spec)) == 1


def test_single_seed_gap_has_no_se_and_markdown_says_so():
    spec = base_spec()
    cells = ct.cells_frame([cell("none", 128, 0.0, 1, 0.663), cell("high_entropy", 128, 0.0, 1, 0.316)])
    g = ct.table_gap(cells, spec).iloc[0]
    assert g["gap"] == pytest.approx(0.347) and math.isnan(g["gap_se"]) and math.isnan(g["p"])
    md = markdown("gap", ct.table_gap(cells, spec))
    assert "+0.347" in md and "±" not in md


def test_acceptance_and_leaderboard():
    spec = base_spec()
    rows = headline_cells()
    rows.append(cell("none", 256, 0.0, 1, 0.65, acceptance=0.996, n_accepted=249, n=250))
    rows += [dict(r, model="other") for r in headline_cells()]
    cells = ct.cells_frame(rows)
    acc = ct.table_acceptance(cells, spec)
    r = acc[(acc["model"] == "m") & (acc["strategy"] == "none") & (acc["temperature"] == 0.0)].iloc[0]
    assert r["acceptance_pct"] == pytest.approx(99.6) and r["n_accepted"] == 249
    down = ct.down_frame(
        [
            {"model": "m", "task": "humaneval", "strategy": "none", "steps": 256, "nfe_budget": None,
             "temperature": 0.0, "seed": 1, "n": 100, "accuracy": 0.283, "nfe": 128},
            {"model": "m", "task": "humaneval", "strategy": "none", "steps": None, "nfe_budget": 437,
             "temperature": 0.0, "seed": 1, "n": 100, "accuracy": 0.32, "nfe": 437},
            {"model": "m", "task": "humaneval", "strategy": "none", "steps": None, "nfe_budget": 437,
             "temperature": 0.1, "seed": 1, "n": 100, "accuracy": 0.283, "nfe": 437},
            {"model": "m", "task": "arc", "strategy": None, "steps": None, "nfe_budget": None,
             "temperature": None, "seed": None, "n": 50, "accuracy": 0.5, "nfe": 200},
        ]
    )  # fmt: skip
    lb = ct.table_leaderboard(cells, down, base_spec(models={"diffusion": ["other", "m"]})).set_index("model")
    assert list(lb.index) == ["other", "m"]  # spec order
    assert lb.loc["m", "gap"] == pytest.approx(0.29633, abs=1e-5)
    # Table 12's HE column is the compute-matched none* (NFE 437, t = 0) of Table 11, not the nominal cell
    assert lb.loc["m", "humaneval_pass1"] == pytest.approx(0.32) and lb.loc["m", "arc_acc"] == 0.5
    assert lb.loc["m", "humaneval_cell"] == "none@nfe437 t=0"
    assert math.isnan(lb.loc["other", "humaneval_pass1"])
    t11 = ct.table_downstream(down)
    r11 = t11[t11["nfe_budget"] == 437].iloc[0]
    assert r11["binomial_se"] == pytest.approx(math.sqrt(0.32 * 0.68 / 100))


def test_all_tables_round_trip_through_the_store(tmp_path):
    from dlmeval.store import RunStore

    spec, cells = full_factorial()
    tables = ct.all_tables(cells, ct.down_frame([]), spec)
    assert {"nfe", "quality", "mauve_temperature", "gap", "anova", "headline", "acceptance"} <= set(tables)
    with RunStore(tmp_path / "s.sqlite") as store:
        run = store.open_run("care-test", {"x": 1})
        for name, df in tables.items():
            run.put_table(name, df)
            pd.testing.assert_frame_equal(run.get_table(name), df, check_dtype=False)
    for name, df in tables.items():
        assert markdown(name, df).startswith("### ")


# ------------------------------------------------------------------------------------------------ tiny sweeps


SRC = Path(__file__).resolve().parents[3] / "src"


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """Tiny matrices: one thread is fastest (and avoids oversubscribing a shared CPU)."""
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(old)


def make_data(root: Path) -> Path:
    """A small data directory in the real formats, written in words the tiny tokenizer knows."""
    from dlmeval.models.tiny import TINY_WORDS

    words = [w for w in TINY_WORDS if w.isalpha()]
    rng = np.random.default_rng(0)
    (root / "reference-text").mkdir(parents=True)
    (root / "tasks").mkdir()
    with open(root / "reference-text" / "webtext_test.jsonl", "w") as f:
        for _ in range(40):
            f.write(json.dumps({"text": " ".join(rng.choice(words, int(rng.integers(10, 20))))}) + "\n")
    with open(root / "reference-text" / "lm1b_heldout-00000.txt", "w") as f:
        for _ in range(60):
            f.write(" ".join(rng.choice(words, 5)) + " .\n")
    he = [
        {"task_id": "HumanEval/0", "prompt": "def add(a, b):\n", "entry_point": "add",
         "canonical_solution": "    return a + b\n", "test": "def check(f):\n    assert f(2, 3) == 5\n"},
        {"task_id": "HumanEval/1", "prompt": "def one():\n", "entry_point": "one",
         "canonical_solution": "    return 1\n", "test": "def check(f):\n    assert f() == 1\n"},
    ]  # fmt: skip
    with gzip.open(root / "tasks" / "HumanEval.jsonl.gz", "wt") as f:
        f.writelines(json.dumps(x) + "\n" for x in he)
    with open(root / "tasks" / "gsm8k_test.jsonl", "w") as f:
        for q, a in (("two and three ?", "5"), ("one and one ?", "2"), ("four and four ?", "8")):
            f.write(json.dumps({"question": q, "answer": f"<<x>>so {a}\n#### {a}"}) + "\n")
    with open(root / "tasks" / "arc_challenge_test.jsonl", "w") as f:
        for g in (0, 2):
            f.write(json.dumps({"query": "Question: the cat is ?", "choices": ["big", "small", "red", "sad"],
                                "gold": g}) + "\n")  # fmt: skip
    return root


TINY_SPEC = """\
name = "t-tiny"
seed = 0
preset = "tiny"

[models]
diffusion = ["tiny-llada"]
evaluator = "tiny-causal"

[generation]
n_prompts = 4
batch_size = 2

[sweep]
strategies = ["none", "high_entropy"]
steps = [16]
temperatures = [0.0, 0.5]
seeds = [1, 2]

[compute_matched]
nfe = [12]
strategies = ["none", "high_entropy"]
seeds = [1]

[dose_response]
strategy = "high_entropy"
steps = 16
temperature = 0.5
fractions = [0.3]

[headline]
steps = 16
temperature = 0.5
bootstrap_resamples = 200

[metrics]
featurizer = "ar"
n_reference = 8
reference_words = 12
self_bleu_max = 10
"""

DOWNSTREAM = """
[downstream]
strategies = ["none"]
steps = [8]
temperatures = [0.0]
seeds = [1]
humaneval = { n = 2, gen_tokens = 8, timeout_s = 5 }
gsm8k = { n = 2, shots = 1, gen_tokens = 8 }
arc = { n = 2, n_masks = 1, n_rates = 2 }
"""


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    root = tmp_path_factory.mktemp("care")
    data = make_data(root / "data")
    spec_path = root / "t.toml"
    spec_path.write_text(TINY_SPEC)
    spec = load_spec(spec_path)
    with RunStore(root / "ref.sqlite") as store:
        res = care.run_care(spec, store, out_dir=root / "out", data_dir=data, progress=False)
        gens = {k: v for k, v in store.get_run(res.model_runs["tiny-llada"]).results().items()}
    return {"root": root, "data": data, "spec_path": spec_path, "spec": spec, "res": res, "items": gens}


def test_plan_cells_counts_and_dedup():
    spec = load_spec("care-paper")
    cells = care.plan_cells(spec)
    keys = [c.key for c in cells]
    assert len(keys) == len(set(keys))
    # sweep (none, random, high_entropy: the random rows of Tables 5/17/19/20) + compute-matched + dose (0.15 is a
    # sweep cell)
    per_source = 3 * 3 * 4 * 3 + 3 * 3 * 1 * 3 + (3 - 1) * 1
    assert len(cells) == 2 * per_source
    assert sum(c.strategy == "random" and c.steps is not None for c in cells) == 2 * 3 * 4 * 3
    assert cells[0].key == "webtext|none|s64|t0|f0.15|seed1"


def test_build_prompts_and_references_on_real_data(data_root):
    from dlmeval.models import tiny_model
    from dlmeval.protocols.care.prompts import special_prefix

    m = tiny_model("bert")
    for src in ("webtext", "lm1b"):
        ps = care.build_prompts(m, src, 5, 8, data_root)
        assert len({p.item_id for p in ps}) == 5 and all(p.item_id.startswith(src + "/") for p in ps)
        special = special_prefix(m)
        assert all(len(p.ids) == len(special) + 8 and p.ids[: len(special)] == special for p in ps)
    refs = care.build_references("webtext", 7, 30, data_root)
    assert len(refs) == 7 and all(len(r.split()) == 30 for r in refs)
    with pytest.raises(InputError, match="n_prompts"):
        care.build_prompts(m, "webtext", 10**6, 8, data_root)


def test_continuation_text_keeps_the_join():
    from dlmeval.models import tiny_model

    m = tiny_model("bert")
    pre = m.encode("the cat", add_special_tokens=False)
    gen = m.encode("sat on the mat", add_special_tokens=False)
    text = care.continuation_text(m, pre, gen, "x")
    assert m.decode(pre) + text == m.decode(pre + gen)
    assert text.startswith(" ")


def test_gsm8k_prompt_and_stops():
    from dlmeval.data.tasks import GSM8KItem

    it = GSM8KItem("gsm8k/0", "What is 2+3?", "2+3=<<2+3=5>>5\n#### 5", "5")
    shot = GSM8KItem("gsm8k/9", "What is 1+1?", "1+1=<<1+1=2>>2\n#### 2", "2")
    # lm-evaluation-harness gsm8k: "Question: ...\nAnswer: <the full answer>" exemplars, blank-line separated
    p = care.gsm8k_prompt(it, [shot])
    assert p == "Question: What is 1+1?\nAnswer: 1+1=<<1+1=2>>2\n#### 2\n\nQuestion: What is 2+3?\nAnswer:"
    assert care.gsm8k_prompt(it, []) == "Question: What is 2+3?\nAnswer:"
    # lm-eval's stops and strict-match filter (commas, $ and a final period ignored)
    gen = " 2+3=5\n#### 1,005.\n\nQuestion: next"
    assert care.cut_at(gen, care.GSM8K_STOP) == " 2+3=5\n#### 1,005.\n\n"
    assert care.gsm8k_strict_match(care.cut_at(gen, care.GSM8K_STOP)) == "1005"
    assert care.gsm8k_strict_match("the answer is 5") is None
    assert care.cut_at("    return 1\ndef g():\n", care.HUMANEVAL_STOP) == "    return 1"
    assert care.cut_at("abc", ("x",)) == "abc"


def test_tiny_sweep_stores_every_cell_and_item(tiny):
    spec, items = tiny["spec"], tiny["items"]
    cells = care.plan_cells(spec)
    assert len(cells) == 8 + 2 + 1  # sweep + compute-matched + dose
    canon = {c.key: care.canonical_cell(spec, c) for c in cells}
    # provably identical cells run once: the generations are stored under the canonical cell only
    distinct = {c.key for c in canon.values()}
    gen_keys = [k for k in items if k.startswith("gen/")]
    assert len(gen_keys) == len(distinct) * 4
    assert {k for k in items if k.startswith("cell/")} == {f"cell/{k}" for k in distinct}
    for c in cells:
        rec = items[f"cell/{canon[c.key].key}"]
        gens = [items[k] for k in gen_keys if k.startswith(f"gen/{canon[c.key].key}/")]
        assert len(gens) == 4
        assert rec["nfe"] == pytest.approx(np.mean([g["nfe"] for g in gens]))
        assert rec["n"] == 4 and 0 <= rec["acceptance"] <= 1
        assert math.isfinite(rec["ppl"]) and 0 < rec["mauve"] <= 1
    # the compute-matched cells spend (at most) their budget
    for c in cells:
        if c.nfe is not None:
            assert items[f"cell/{canon[c.key].key}"]["nfe_max"] <= c.nfe
    # none with 16 nominal steps over 16 tokens: exactly one pass per token (no EOS stop on a random model)
    none16 = items["cell/webtext|none|s16|t0|f0.15|seed1"]
    assert none16["nfe_max"] <= 16


def test_identical_cells_are_marked_in_the_tables(tiny):
    spec = tiny["spec"]
    # a compute-matched none at 12 passes is the nominal none@12; none at 32 steps of 16 tokens is none@16
    c = care.Cell("webtext", "none", None, 12, 0.0, 0.15, 1)
    assert care.canonical_cell(spec, c).key == "webtext|none|s12|t0|f0.15|seed1"
    c32 = care.Cell("webtext", "none", 32, None, 0.0, 0.15, 1)
    assert care.canonical_cell(spec, c32).key == "webtext|none|s16|t0|f0.15|seed1"
    he = care.Cell("webtext", "high_entropy", 32, None, 0.0, 0.15, 1)
    assert care.canonical_cell(spec, he) == he
    rows = [
        dict(cell("none", 64, t, seed, 0.5), same_as=f"webtext|none|s32|t{t:g}|f0.15|seed{seed}")
        for t in (0.0, 0.25)
        for seed in (1, 2)
    ]
    sweep = {
        "strategies": ["none", "high_entropy"],
        "steps": [64],
        "temperatures": [0.0, 0.25],
        "seeds": [1, 2],
    }
    marked = ct.table_nfe(ct.cells_frame(rows), base_spec(sweep=sweep, headline={"steps": 64}))
    assert marked["same_as"].tolist() == ["none@32"]  # one label over temperatures and seeds
    cm = tiny["res"].tables["compute_matched"]
    assert cm["same_as"].notna().all() and "accounting" in cm and cm["reached"].dtype == bool
    nfe = tiny["res"].tables["nfe"]
    assert set(nfe["accounting"]) == {"paper"}
    mech = tiny["res"].tables["mechanism"]
    assert {"replaced_per_step_pct", "remasks_per_sample", "stable_cells"} <= set(mech.columns)
    assert (mech.loc[mech["strategy"] == "none", "remasks_per_sample"] == 0).all()
    assert (mech.loc[mech["strategy"] != "none", "remasks_per_sample"] > 0).all()


def test_tiny_sweep_tables_in_store_and_files(tiny):
    res, root = tiny["res"], tiny["root"]
    assert {"nfe", "compute_matched", "quality", "mauve_temperature", "gap", "anova", "headline"} <= set(
        res.tables
    )
    assert {"dose_response", "acceptance", "leaderboard"} <= set(res.tables)
    with RunStore(root / "ref.sqlite") as store:
        stored = care.load_tables(store, res.sweep_run)
        for name, df in res.tables.items():
            pd.testing.assert_frame_equal(stored[name], df, check_dtype=False)
        assert store.get_run(res.sweep_run).status == "done"
    for name, df in res.tables.items():
        csv = pd.read_csv(root / "out" / f"{name}.csv")
        assert len(csv) == len(df)
        md = (root / "out" / f"{name}.md").read_text()
        assert md.startswith("### ")
        # every table read alone names its corpus (here the shipped stand-in; a dataset with its held-out slice)
        if name != "published":
            assert "\n\nData: webtext: shipped stand-in" in md, name
    assert "Headline interaction gap" in (root / "out" / "tables.md").read_text()
    h = res.tables["headline"].iloc[0]
    assert h["n_seeds"] == 2 and h["seeds"] == "1,2"


def test_rerun_reads_everything_back(tiny, monkeypatch):
    from dlmeval.sampling import RemaskingSampler

    def boom(*a, **k):
        raise AssertionError("a finished sweep must not sample again")

    monkeypatch.setattr(RemaskingSampler, "sample", boom)
    with RunStore(tiny["root"] / "ref.sqlite") as store:
        again = care.run_care(tiny["spec"], store, data_dir=tiny["data"], progress=False)
    assert again.sweep_run == tiny["res"].sweep_run
    for name, df in tiny["res"].tables.items():
        pd.testing.assert_frame_equal(again.tables[name], df)


def test_another_batch_size_is_another_run(tiny, tmp_path):
    """A store written with batch_size 2 is not resumed with 3: every run is new, the old ones are left as they
    were. (On the CPU the tiny sweep's generations are the same bits at both sizes: its prompts all have the
    prefix length, so no row is padded, and every draw is seeded per item.)"""
    import dataclasses
    import shutil

    shutil.copy(tiny["root"] / "ref.sqlite", tmp_path / "s.sqlite")
    spec = tiny["spec"].replace(generation=dataclasses.replace(tiny["spec"].generation, batch_size=3))
    old = tiny["res"]
    with RunStore(tmp_path / "s.sqlite") as store:
        before = {r["run_id"]: r["n_items"] for r in store.list_runs()}
        res = care.run_care(spec, store, data_dir=tiny["data"], progress=False)
        after = {r["run_id"]: r["n_items"] for r in store.list_runs()}
        items = store.get_run(res.model_runs["tiny-llada"]).results()
    assert set(res.model_runs.values()).isdisjoint(old.model_runs.values()) and res.sweep_run != old.sweep_run
    assert {k: after[k] for k in before} == before and len(after) == 2 * len(before)
    assert items.keys() == tiny["items"].keys()
    gens = [k for k in items if k.startswith("gen/")]
    assert gens and all(_no_clock(items[k]) == _no_clock(tiny["items"][k]) for k in gens)


def _no_clock(rec: dict) -> dict:
    return {k: v for k, v in rec.items() if k not in ("seconds", "cpu_seconds")}


def test_preloaded_models_are_used_instead_of_loading_them(tiny, tmp_path, monkeypatch):
    # the demo hands its loaded DLM and AR model to the sweep; nothing is loaded a second time, and the sweep is
    # the same as one that loaded them from their spec strings
    import dlmeval.models as models_pkg

    loaded = {s: models_pkg.load_diffusion(s) for s in tiny["spec"].models}
    loaded[tiny["spec"].evaluator] = models_pkg.load_causal_lm(tiny["spec"].evaluator)

    def no_load(spec, **kw):
        raise AssertionError(f"{spec} was loaded again")

    monkeypatch.setattr(models_pkg, "load_diffusion", no_load)
    monkeypatch.setattr(models_pkg, "load_causal_lm", no_load)
    with RunStore(tmp_path / "pre.sqlite") as store:
        res = care.run_care(tiny["spec"], store, data_dir=tiny["data"], progress=False, models=loaded)
    assert res.model_runs == tiny["res"].model_runs
    for name, df in tiny["res"].tables.items():
        pd.testing.assert_frame_equal(res.tables[name], df)


def test_resume_after_sigkill_gives_identical_tables(tiny, tmp_path):
    store_path = tmp_path / "killed.sqlite"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(SRC)}
    cmd = [sys.executable, "-m", "dlmeval", "--store", str(store_path), "--no-progress", "care",
           str(tiny["spec_path"]), "--data-dir", str(tiny["data"]), "--out", str(tmp_path / "o")]  # fmt: skip
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    n_gen, deadline = 0, time.monotonic() + 300
    try:
        while time.monotonic() < deadline and proc.poll() is None:
            if store_path.exists():
                try:
                    con = sqlite3.connect(f"file:{store_path}?mode=ro", uri=True, timeout=1)
                    n_gen = con.execute("SELECT COUNT(*) FROM items WHERE key LIKE 'gen/%'").fetchone()[0]
                    con.close()
                except sqlite3.Error:
                    n_gen = 0
                if n_gen >= 6:  # mid-way through the second cell: 11 cells x 4 items in all
                    break
            time.sleep(0.02)
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.wait()
    assert proc.returncode == -signal.SIGKILL, "the sweep finished before it could be killed"
    assert 6 <= n_gen < 44
    with RunStore(store_path) as store:
        runs = store.list_runs(kind="care")
        assert len(runs) == 1 and runs[0]["status"] == "interrupted"  # its process is gone
        assert 0 < runs[0]["n_items"] < len(tiny["items"])
        res = care.run_care(load_spec(tiny["spec_path"]), store, data_dir=tiny["data"], progress=False)
        resumed = store.get_run(res.model_runs["tiny-llada"]).results()
    assert res.model_runs == tiny["res"].model_runs  # same command, same run
    for name, df in tiny["res"].tables.items():
        pd.testing.assert_frame_equal(res.tables[name], df)
    # and every stored generation is identical (text, NFE, churn), not only the summaries
    for k, v in tiny["items"].items():
        if k.startswith("gen/"):
            assert resumed[k] == v, k


def test_downstream_tasks_on_a_tiny_model(tiny, tmp_path, monkeypatch):
    spec_path = tmp_path / "d.toml"
    spec_path.write_text(TINY_SPEC.replace("seeds = [1, 2]", "seeds = [1]") + DOWNSTREAM)
    spec = load_spec(spec_path)
    spec = spec.replace(
        sweep=spec.sweep.__class__(
            strategies=("none", "high_entropy"), steps=(16,), temperatures=(0.5,), seeds=(1,)
        ),
        compute_matched=spec.compute_matched.__class__(),
        dose_response=spec.dose_response.__class__(),
    )
    with RunStore(tmp_path / "d.sqlite") as store:
        res = care.run_care(spec, store, data_dir=tiny["data"], progress=False)
        items = store.get_run(res.model_runs["tiny-llada"]).results()
    he = [v for k, v in items.items() if k.startswith("humaneval/")]
    assert len(he) == 2 and all(r["status"] in ("failed", "passed", "timeout") for r in he)
    assert all("netns" in r["isolation"] or "audit" in r["isolation"] for r in he)
    down = res.tables["downstream"].set_index("task")
    assert set(down.index) == {"humaneval", "gsm8k"}
    assert (down["n_items"] == 2).all() and (down["nfe"] > 0).all()
    arc = res.tables["arc"].iloc[0]
    assert arc["n_items"] == 2 and 0 <= arc["accuracy"] <= 1


def test_downstream_scoring_wiring(tiny, tmp_path, monkeypatch):
    """With the sampler's text replaced by correct answers, pass@1 and exact match are 1 (the sandbox really ran
    the program); with wrong answers they are 0."""
    from dlmeval.models import tiny_model

    spec_path = tmp_path / "d.toml"
    spec_path.write_text(TINY_SPEC + DOWNSTREAM.replace("arc = { n = 2, n_masks = 1, n_rates = 2 }", ""))
    spec = load_spec(spec_path)
    # generation order: HumanEval/0 (add), HumanEval/1 (one), then GSM8K items 0 (gold 5) and 1 (gold 2)
    right_answers = [
        "    return a + b\n\ndef other():\n    pass",
        "    return 1\n",
        " so #### 5\nProblem: x",
        " #### 2",
    ]
    wrong_answers = ["    return a - b\n", "    return None\n", " so #### 7", " the answer is 3"]

    def answers(texts):
        it = iter(texts)
        return lambda model, prefix_ids, gen_ids, fallback: next(it)

    from dlmeval.protocols.care import downstream
    from dlmeval.protocols.care.loop import run_units
    from dlmeval.protocols.care.plan import CareOptions, resolve

    for right, expect in ((True, 1.0), (False, 0.0)):
        monkeypatch.setattr(
            downstream, "continuation_text", answers(right_answers if right else wrong_answers)
        )
        with RunStore(tmp_path / f"w{right}.sqlite") as store:
            model = tiny_model("llada")
            run = store.open_run("care-test", {"right": right})
            units = downstream.downstream_units(resolve(spec, CareOptions(tiny["data"])), "tiny-llada", model)
            out = run_units(run, units, say=lambda s: None)["down"]
        acc = {r["task"]: r["accuracy"] for r in out}
        assert acc == {"humaneval": expect, "gsm8k": expect}


def test_cli_plan_and_bad_spec(tmp_path, capsys):
    from dlmeval.cli.main import main

    assert main(["--json", "care", "care-demo", "--plan"]) == 0
    payload = json.loads(capsys.readouterr().out)
    assert payload["cells_per_model"] == 24 and payload["prompts_per_cell"] == 32
    none32 = next(c for c in payload["cells"] if c["cell"].startswith("webtext|none|s32|"))
    assert none32["nfe_per_sample"] == 32
    bad = tmp_path / "bad.toml"
    bad.write_text("[sweep]\nstrategies = ['none', 'nonsense']\n")
    assert main(["care", str(bad)]) == 2
    assert "not one of" in capsys.readouterr().err


def test_model_label():
    assert care.model_label("llada:/models/LLaDA-8B-Base/") == "llada:LLaDA-8B-Base"
    assert care.model_label("default") == "default" and care.model_label("tiny-bert") == "tiny-bert"
    assert care.model_label("causal:meta-llama/Meta-Llama-3-8B") == "causal:Meta-Llama-3-8B"


def test_a_spec_whose_fraction_would_never_remask_is_refused_before_running(tmp_path):
    # 5 % of 16 generated tokens is int(0.8) = 0 positions: refused at load time, naming the setting
    p = tmp_path / "bad.toml"
    p.write_text(
        'name = "bad"\npreset = "tiny"\n[sweep]\nstrategies = ["none", "high_entropy"]\nsteps = [16]\n'
        '[dose_response]\nstrategy = "high_entropy"\nsteps = 16\nfractions = [0.05]\n'
    )
    with pytest.raises(InputError, match="high_entropy at remask fraction 0.05.*never re-mask"):
        load_spec(p)


LLADA_ARC = """
[downstream]
strategies = ["none"]
steps = [8]
temperatures = [0.0]
seeds = [1]
arc = { n = 2, likelihood = "llada", mc_num = 4, mc_batch = 2 }
"""


def test_a_loglik_check_read_as_lladas_harness_scores_each_option_with_its_estimator(tiny, tmp_path):
    """``likelihood = "llada"``: each option is LLaDA's Monte Carlo ELBO of lm-eval's token split (mc_num rows in
    passes of mc_batch: one forward pass each), its draws seeded by (check seed, item id, option); the argmax of
    the sums is the accuracy. The DiffScore reading (the default) keeps the signature it had."""
    from dlmeval.models import tiny_model
    from dlmeval.protocols.care import downstream
    from dlmeval.protocols.care.loop import run_units
    from dlmeval.protocols.care.plan import CareOptions, resolve
    from dlmeval.scoring.llada_ll import llada_encode_pair, llada_log_likelihood
    from dlmeval.seeding import derive_seed, torch_generator
    from dlmeval.tasks import argmax_choice, get_task

    spec_path = tmp_path / "l.toml"
    spec_path.write_text(TINY_SPEC + LLADA_ARC)
    spec = load_spec(spec_path)
    plain = load_spec(tiny["spec_path"])
    assert "likelihood" not in plain.config()["downstream"]["arc"]  # the default reading: the old signature
    arc = spec.config()["downstream"]["arc"]
    assert {k: arc[k] for k in ("likelihood", "mc_num", "mc_batch", "cfg")} == {
        "likelihood": "llada",
        "mc_num": 4,
        "mc_batch": 2,
        "cfg": 0.0,
    }
    plan = resolve(spec, CareOptions(tiny["data"]))
    model = tiny_model("llada")
    with RunStore(tmp_path / "l.sqlite") as store:
        run = store.open_run("care-test", {"llada": 1})
        units = [u for u in downstream.downstream_units(plan, "tiny-llada", model) if u.key == "down/arc"]
        assert len(units) == 1
        run_units(run, units, say=lambda s: None)
        rec = run.results()["down/arc"]
    assert (rec["likelihood"], rec["mc_num"], rec["mc_batch"], rec["cfg"]) == ("llada", 4, 2, 0.0)
    assert rec["vocab_rows"] == "all"  # tiny-llada: LLaDA's rule, every row of its padded head
    task, items = get_task("arc_challenge"), plan.task("arc").items
    requests = [task.choice_request(it) for it in items]
    assert rec["n"] == len(items) == 2 and rec["nfe"] == sum(len(opts) for _, opts in requests) * (4 // 2)
    seed, right = derive_seed(spec.seed, "arc"), []
    for it, (msg, opts) in zip(items, requests):
        scores = []
        for j, opt in enumerate(opts):
            p, x = llada_encode_pair(model, msg.text, opt)
            gen = torch_generator(derive_seed(seed, it.item_id, j))
            scores.append(
                llada_log_likelihood(
                    model, p + x, (len(p), len(p + x)), mc_num=4, batch_size=2, generator=gen
                )
            )
        right.append(argmax_choice(scores) == it.gold)
    assert rec["accuracy"] == float(np.mean(right))


@pytest.mark.parametrize(
    ("arc", "msg"),
    [
        (
            '{ n = 2, likelihood = "llada", mc_num = 6, mc_batch = 4 }',
            "mc_num (6) must be a multiple of mc_batch (4)",
        ),
        ('{ n = 2, likelihood = "lm-eval" }', "diffscore"),
    ],
)
def test_a_bad_loglik_reading_is_refused_in_one_line(tmp_path, arc, msg):
    p = tmp_path / "b.toml"
    p.write_text(
        TINY_SPEC + LLADA_ARC.replace('{ n = 2, likelihood = "llada", mc_num = 4, mc_batch = 2 }', arc)
    )
    with pytest.raises(InputError, match=msg.replace("(", r"\(").replace(")", r"\)")) as e:
        load_spec(p)
    assert "\n" not in str(e.value)
