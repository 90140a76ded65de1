"""`dlmeval demo`'s headline per pillar (#36): one number with its uncertainty and a plain verdict, from the
protocols' own rows; and the web-text cloze task its robustness stage runs."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps

from dlmeval.cli import demo
from dlmeval.errors import InputError


def _meta_rows(diffscore: tuple[float, float, float]) -> pd.DataFrame:
    rows = []
    for dim, shift in (("informativeness", 0.0), ("naturalness", -0.1)):
        for metric, label, (v, lo, hi) in (
            ("diffscore:mapped", "DiffScore (paper mapping) [default]", diffscore),
            ("rougeL", "ROUGE-L F1 [rouge-score]", (0.25, 0.02, 0.45)),
            ("bertscore_f", "BERTScore-F [all-MiniLM-L6-v2 L6]", (0.35, 0.16, 0.54)),
            ("bleu", "BLEU (sacrebleu)", (0.9, 0.8, 1.0)),  # not a headline row: ignored
        ):
            rows.append(dict(benchmark="SFHOT", dimension=dim, primary=True, protocol="spearman", metric=metric,
                             label=label, value=v + shift, ci_lo=lo + shift, ci_hi=hi + shift, n=200))  # fmt: skip
    rows.append(dict(rows[0], primary=False, value=5.0))  # a secondary protocol row: ignored
    return pd.DataFrame(rows)


def test_meta_headline_reports_the_ci_and_says_when_the_model_is_too_small():
    h = demo.meta_headline(_meta_rows((-0.19, -0.38, 0.001)))
    assert (h["dimension"], h["n"], h["diffscore"], h["ci_excludes_zero"]) == (
        "informativeness",
        200,
        -0.19,
        False,
    )
    text = "\n".join(h["lines"])
    assert "-0.190 [-0.380, +0.001]" in text and "+0.250 [+0.020, +0.450]" in text and "BLEU" not in text
    assert "includes zero" in h["verdict"] and "below BERTScore-F (+0.350)" in h["verdict"]
    assert "too small" in text and demo.PAPER_COMMANDS["meta-eval"] in text
    assert "naturalness -0.29 / +0.15 / +0.25" in text  # the other dimension in brief, headline order

    h = demo.meta_headline(_meta_rows((-0.3, -0.5, -0.1)))
    assert h["ci_excludes_zero"] and "negative (its 95% CI excludes zero" in h["verdict"]
    h = demo.meta_headline(_meta_rows((0.5, 0.3, 0.7)))
    assert h["ci_excludes_zero"] and "positive" in h["verdict"] and "above BERTScore-F" in h["verdict"]
    assert "too small" not in "\n".join(h["lines"])  # the paper's finding shown: no excuse sentence


def _care_items(nominal_gain: float, matched_gain: float) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    rows = [{"key": "gen/x/0", "text": "a generation record"}]
    for seed in (1, 2, 3, 4):
        base = 0.5 + 0.01 * seed
        jitter = rng.normal(0, 0.002, 2)
        rows += [
            dict(key=f"cell/none-16-{seed}", strategy="none", steps=16.0, nfe_budget=np.nan, temperature=0.25,
                 seed=seed, mauve=base, nfe=16.0),
            dict(key=f"cell/he-16-{seed}", strategy="high_entropy", steps=16.0, nfe_budget=np.nan,
                 temperature=0.25, seed=seed, mauve=base + nominal_gain + jitter[0], nfe=19.0),
            dict(key=f"cell/he-nfe16-{seed}", strategy="high_entropy", steps=np.nan, nfe_budget=16.0,
                 temperature=0.25, seed=seed, mauve=base + matched_gain + jitter[1], nfe=16.0),
        ]  # fmt: skip
    for r in rows[1:]:
        r["fraction"] = 0.15
    # a dose-response cell at the headline steps (another remask fraction): not a sweep cell, left out
    rows.append(dict(rows[2], key="cell/dose", fraction=0.3, mauve=0.0))
    return pd.DataFrame(rows)


def test_care_headline_pairs_seeds_at_nominal_steps_and_at_equal_actual_passes():
    from dlmeval.protocols.care import load_spec

    spec = load_spec("care-mini")
    items = _care_items(0.05, -0.05)
    h = demo.care_headline(items, spec, None)
    cells = items[items["key"].str.startswith("cell/")]
    he = cells[cells["nfe_budget"] == 16]["mauve"].to_numpy()
    none = cells[(cells["strategy"] == "none")]["mauve"].to_numpy()
    assert h["matched"]["p"] == pytest.approx(sps.ttest_rel(he, none).pvalue)
    assert h["matched"]["nfe_baseline"] == h["matched"]["nfe_strategy"] == 16.0
    assert h["nominal"]["nfe_strategy"] == 19.0 and h["nominal"]["n_seeds"] == 4
    assert h["verdict"].startswith("the compute-matched reversal is shown")
    assert "too few" not in "\n".join(h["lines"])

    # as the protocol stores it: the strategy's matched cell under the nominal steps that spend 16 passes (9),
    # found through the compute_matched table
    stored = items.copy()
    m = stored["key"].str.startswith("cell/he-nfe16")
    stored.loc[m, ["steps", "nfe_budget"]] = [9.0, np.nan]
    table = pd.DataFrame(
        [dict(strategy=s, nfe_budget=16, temperature=0.25, steps=st) for s, st in (("high_entropy", 9.0), ("none", 16.0))]
    )  # fmt: skip
    again = demo.care_headline(stored, spec, table)
    assert again["matched"] == h["matched"] and again["nominal"] == h["nominal"]
    assert demo.care_headline(stored, spec, table.iloc[1:])["matched"] is None  # no resolved cell: no test

    h = demo.care_headline(_care_items(0.0001, 0.0001), spec, None)
    assert (
        h["verdict"].startswith("no significant difference") and demo.PAPER_COMMANDS["care"] in h["lines"][-1]
    )
    # a spec without compute-matched cells, or no cells: said, not guessed
    assert demo.care_headline(None, spec, None)["verdict"] == "no compute-matched cells"


def test_robust_headline_reads_rdi_and_its_ci_and_refuses_a_run_at_chance():
    summary = pd.DataFrame(
        [dict(task="webtext_cloze", mode="likelihood", model="default", role="dlm", acc_clean=0.6, acc_r=0.5,
              mean_rdi=0.17, above_chance=True),
         dict(task="webtext_cloze", mode="likelihood", model="default-ar", role="ar", acc_clean=0.7, acc_r=0.5,
              mean_rdi=0.28, above_chance=True)]
    )  # fmt: skip
    guard = pd.DataFrame(
        [dict(task="webtext_cloze", mode="likelihood", model=m, n=40, chance=0.25, p_value=1e-4) for m in ("default", "default-ar")]
    )  # fmt: skip
    comp = pd.DataFrame(
        [dict(task="webtext_cloze", mode="likelihood", n_conditions=6, mean_adv=0.11, ci_lo=0.02, ci_hi=0.2,
              wilcoxon_p=0.03, meaningful=True, note="")]
    )  # fmt: skip
    h = demo.robust_headline({"summary": summary, "guard": guard, "comparison": comp})
    assert h["verdict"].startswith("the diffusion LM degrades less") and h["acc_clean_ar"] == 0.7
    assert "+0.110 [+0.020, +0.200]" in "\n".join(h["lines"]) and "too small" not in "\n".join(h["lines"])
    comp.loc[0, "wilcoxon_p"] = (
        0.31  # the bootstrap CI alone: weak evidence, said so, and the paper's command
    )
    h = demo.robust_headline({"summary": summary, "guard": guard, "comparison": comp})
    assert h["verdict"].startswith("weak evidence") and "(p = 0.31)" in h["verdict"]
    assert demo.PAPER_COMMANDS["robust"] in h["lines"][-1]
    comp.loc[0, ["meaningful", "note"]] = [False, "not meaningful: default not above chance on clean input"]
    h = demo.robust_headline({"summary": summary, "guard": guard, "comparison": comp})
    assert "not meaningful" in h["verdict"] and demo.PAPER_COMMANDS["robust"] in h["lines"][-1]


def test_cloze_items_are_a_function_of_the_texts():
    from dlmeval.tasks import get_task
    from dlmeval.tasks.cloze import CONTEXT_WORDS, CONTINUATION_WORDS, cloze_items

    n = CONTEXT_WORDS + CONTINUATION_WORDS
    texts = [" ".join(f"w{i}x{j}" for j in range(n + 3)) for i in range(5)] + ["too short"]
    items = cloze_items(texts)
    assert len(items) == 5 and [it.gold for it in items] == [0, 1, 2, 3, 0]
    for i, it in enumerate(items):
        assert it.query.split() == texts[i].split()[:CONTEXT_WORDS]
        assert it.choices[it.gold].split() == texts[i].split()[CONTEXT_WORDS:n]
        others = {c.split()[0].split("x")[0] for k, c in enumerate(it.choices) if k != it.gold}
        assert others == {f"w{(i + k) % 5}" for k in (1, 2, 3)}
    assert cloze_items(texts) == items
    with pytest.raises(InputError, match="at least 4 texts"):
        cloze_items(texts[:3])
    task = get_task("cloze")
    msg, conts = task.choice_request(items[1])
    assert msg.text == items[1].query and conts == [" " + c for c in items[1].choices]
    assert task.chance == 0.25 and "A) " in task.prompt(items[1]).text


def test_longest_run_counts_back_to_back_repeats():
    assert [demo.longest_run(x) for x in ([], [5], [1, 2, 2, 2, 3, 3], [7, 7, 7, 7])] == [0, 1, 3, 4]
