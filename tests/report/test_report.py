"""Reports: the HTML report and the Care leaderboard from a run store filled by small real runs of the tiny models
(Care sweep, meta-evaluation suite and analyses, DiffScore with token scores, robustness protocol), plus the tables
no protocol stores yet, put as clearly named SYNTHETIC runs; the rendered page is checked in headless Chromium
(sections, tables, figures, no network request) and a screenshot is kept under artifacts/."""

from __future__ import annotations

import html.parser
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dlmeval.errors import InputError
from dlmeval.report import build_report, collect, leaderboard_frame, write_leaderboard
from dlmeval.report import figures as F
from dlmeval.report.fmt import TableView, display_frame, fmt_value, table_html
from dlmeval.report.registry import ITEMS, renderers
from dlmeval.seeding import numpy_rng
from dlmeval.store import RunStore

REPO = Path(__file__).resolve().parents[2]
SYNTHETIC = {
    "synthetic": "test fixture: realistic numbers made up by tests/report/test_report.py, not a measurement"
}


# ================================================================================================ synthetic runs
def synthetic_profile_run(store):
    """SYNTHETIC meta-eval run: per-timestep correlation profiles (no protocol stores them yet)."""
    run = store.open_run("meta-eval", {**SYNTHETIC, "table": "profile_correlation"})
    rows = []
    rates = [0.1, 0.3, 0.5, 0.7, 0.9]
    for dim, peak in (("coherence", 0.7), ("consistency", 0.3), ("fluency", 0.1), ("relevance", 0.5)):
        for t in rates:
            rows.append(
                {"benchmark": "SummEval", "dimension": dim, "rate": t, "value": 0.35 - 0.4 * (t - peak) ** 2}
            )
    run.put_table("profile_correlation", pd.DataFrame(rows))
    run.finish()
    return run


def synthetic_robust_run(store):
    """SYNTHETIC robust-spec run: accuracy with defined RDI, AURDI, reliability bins, IPM, D-GCG and probes, from
    made-up per-item correctness passed through the real robustness arithmetic."""
    from dlmeval.metrics.calibration import reliability_bins
    from dlmeval.robustness.metrics import summarize

    run = store.open_run("robust-spec", {**SYNTHETIC, "tables": "robustness"})
    acc_rows, au_rows, rel_rows, cal_rows = [], [], [], []
    conds = [f"char.keyboard@{r:.2f}" for r in (0.05, 0.1, 0.2, 0.3)] + [
        f"word.shuffle@{r:.2f}" for r in (0.1, 0.2, 0.3)
    ]
    for model, role, base, slope in (("dlm-A", "dlm", 0.62, 0.9), ("ar-B", "ar", 0.66, 1.4)):
        rng = numpy_rng(0, "report-test", model)
        clean = rng.random(200) < base
        pert = {c: rng.random(200) < base * (1 - slope * float(c.split("@")[1])) for c in conds}
        s = summarize(clean, pert, chance=0.25)
        common = {"task": "arc_challenge", "mode": "generation", "model": model, "role": role}
        acc_rows.append(
            {
                **common,
                "condition": "clean",
                "type": "clean",
                "rate": 0.0,
                "n": 200,
                "accuracy": s.clean_accuracy,
                "rdi": 0.0,
                "meaningful": True,
            }
        )
        for c in s.conditions:
            acc_rows.append(
                {
                    **common,
                    "condition": c.key,
                    "type": c.type_key,
                    "rate": c.rate,
                    "n": c.n,
                    "accuracy": c.accuracy,
                    "rdi": c.rdi,
                    "meaningful": True,
                }
            )
        for t, v in s.aurdi.items():
            au_rows.append({**common, "type": t, "aurdi": v, "meaningful": True})
        for split, ok in (("clean", clean), ("noisy", np.concatenate(list(pert.values())))):
            conf = np.clip(ok * 0.35 + rng.random(len(ok)) * 0.6 + 0.05, 0, 1)
            b = reliability_bins(conf, ok, n_bins=15)
            for i in range(15):
                rel_rows.append(
                    {
                        **common,
                        "split": split,
                        "bin": i,
                        "lower": b.lower[i],
                        "upper": b.upper[i],
                        "confidence": b.confidence[i],
                        "accuracy": b.accuracy[i],
                        "count": int(b.count[i]),
                    }
                )
            cal_rows.append(
                {
                    **common,
                    "split": split,
                    "n": len(ok),
                    "accuracy": float(ok.mean()),
                    "mean_confidence": float(conf.mean()),
                    "ece": b.ece,
                    "auroc": 0.71,
                }
            )
    run.put_table("accuracy", pd.DataFrame(acc_rows))
    run.put_table("aurdi", pd.DataFrame(au_rows))
    run.put_table("calibration", pd.DataFrame(cal_rows))
    run.put_table("reliability", pd.DataFrame(rel_rows))
    ipm = []
    for cond, noisy in (("char.keyboard@0.20", 0.495), ("word.shuffle@0.30", 0.33)):
        ipm.append({"model": "dlm-A", "condition": cond, "variant": "noisy", "accuracy": noisy, "delta": 0.0})
        for var, d in (("topk", 0.005), ("threshold", -0.17), ("editdist", -0.02), ("hybrid", -0.07)):
            ipm.append(
                {"model": "dlm-A", "condition": cond, "variant": var, "accuracy": noisy + d, "delta": d}
            )
    run.put_table("ipm", pd.DataFrame(ipm))
    steps = np.arange(20)
    run.put_table(
        "dgcg",
        pd.DataFrame(
            [
                {
                    "model": "dlm-A",
                    "suffix_length": 8,
                    "degradation": -0.02,
                    "mean_grad_norm": 3.1,
                    "loss_trajectory": list(2.0 + 0.3 * np.sin(steps * 1.7)),
                },
                {
                    "model": "ar-B",
                    "suffix_length": 8,
                    "degradation": 0.44,
                    "mean_grad_norm": 1.2,
                    "loss_trajectory": list(1.0 + 0.08 * steps),
                },
            ]
        ),
    )
    layers = list(range(0, 9))
    run.put_table(
        "probes",
        pd.DataFrame(
            [
                {
                    "model": m,
                    "condition": "char.keyboard@0.20",
                    "layers": layers,
                    "accuracy": [0.6 + 0.04 * i * k for i in layers],
                    "auroc": [0.62 + 0.04 * i * k for i in layers],
                    "best_layer": 8,
                }
                for m, k in (("dlm-A", 1.0), ("ar-B", 0.9))
            ]
        ),
    )
    run.finish()
    return run


# ================================================================================================ real runs
ARC_ITEMS = [  # ARC-style items in the tiny models' vocabulary (as in tests/protocols/robust/test_robust_protocol.py)
    ("Question: which city is the capital of france?", ["paris", "london", "river", "house"], 0),
    ("Question: what does a cat eat?", ["car", "food", "book", "king"], 1),
    ("Question: who wrote the book?", ["the river", "the night", "a woman", "the water"], 2),
    ("Question: what is big and old?", ["a child", "a day", "the time", "the city"], 3),
    ("Question: where is london?", ["england", "france", "paris", "the house"], 0),
]


def real_runs(store, data_root, tmp: Path) -> dict[str, str]:
    """Small real runs of every protocol on the tiny models; returns {what: run id}."""
    from dataclasses import replace

    from dlmeval.models import tiny_model
    from dlmeval.protocols import robust as rb
    from dlmeval.protocols.care import load_spec, run_care
    from dlmeval.protocols.diffscore.analyses import run_analysis
    from dlmeval.protocols.diffscore.meta_eval import Suite, SuiteOptions, run_suite
    from dlmeval.scoring import DiffScorer

    ids: dict[str, str] = {}
    spec = load_spec("care-tiny")
    spec = spec.replace(generation=replace(spec.generation, n_prompts=4))
    care = run_care(spec, store, device="cpu", dtype="float32", progress=False, data_dir=data_root)
    ids["care-sweep"] = care.sweep_run
    ids.update({f"care:{m}": r for m, r in care.model_runs.items()})

    opts = SuiteOptions(
        dlm="tiny-bert",
        ar="tiny-causal",
        benchmarks=("SummEval", "gu-en"),
        families=("lexical", "ar", "diffscore"),
        n_masks=2,
        n_rates=2,
        bootstrap=20,
        limit=4,
        progress=False,
        data_dir=str(data_root),
    )
    ids["meta-eval"] = run_suite(opts, store).run.run_id
    suite = Suite(replace(opts, limit=20, chunk_size=8), store)
    run_analysis("positional", suite, min_count=3)
    run_analysis("directional", suite, n_pairs=6)
    run_analysis("adversarial", suite)

    from dlmeval.protocols import score as score_protocol

    bert = tiny_model("bert", seed=0)
    scorer = DiffScorer(bert, n_masks=4, n_rates=4, seed=0)
    run = score_protocol.open_run(store, scorer, "cond")
    score_protocol.score_run(
        scorer,
        run,
        ["the cat sat on the big red house", "a woman wrote the book in the city"],
        ["the cat sat", "who wrote the book"],
        config="cond",
        item_ids=["item-1", "item-2"],
        token_scores=True,
    )
    run.finish()
    ids["diffscore"] = run.run_id

    arc = tmp / "arc.jsonl"
    arc.write_text(
        "\n".join(json.dumps({"query": q, "choices": c, "gold": g}) for q, c, g in ARC_ITEMS) + "\n"
    )
    raw = {
        "name": "report-test",
        "seed": 0,
        "perturbation_seeds": [0],
        "pairs": [{"dlm": "tiny-bert", "ar": "tiny-causal"}],
        "conditions": {"keys": ["char.keyboard@0.20", "word.shuffle@0.30"]},
        "tasks": {"arc_challenge": {"n": 5, "modes": ["likelihood"], "path": str(arc)}},
        "likelihood": {"n_masks": 2, "n_rates": 2},
        "stats": {"bootstrap_resamples": 200},
        "calibration": {"plots": False},
    }
    models = {"tiny-bert": bert, "tiny-causal": tiny_model("causal", seed=0)}
    res = rb.run_robust(rb.parse_spec(raw), store, progress=False, models=models)
    ids["robust-spec"] = res.spec_run
    ids["profiles (synthetic)"] = synthetic_profile_run(store).run_id
    ids["robust (synthetic)"] = synthetic_robust_run(store).run_id
    return ids


@pytest.fixture(scope="module")
def filled_store(tmp_path_factory, data_root):
    d = tmp_path_factory.mktemp("report-store")
    path = d / "runs.sqlite"
    with RunStore(path) as store:
        ids = real_runs(store, data_root, d)
    return path, ids


# ================================================================================================ chromium
def chromium_exe() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


def run_chromium(url: str, work: Path, *args: str, timeout: int = 600) -> tuple[str, Path]:
    """Open ``url`` in headless Chromium with a fresh profile and a network log; returns (stdout, log path)."""
    work.mkdir(parents=True, exist_ok=True)
    netlog = work / "netlog.json"
    cmd = [
        chromium_exe(),
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        "--disable-dev-shm-usage",
        f"--user-data-dir={work / 'profile'}",
        f"--log-net-log={netlog}",
        *args,
        url,
    ]
    p = subprocess.run(
        cmd, capture_output=True, text=True, timeout=timeout, env={**os.environ, "HOME": str(work)}
    )
    assert p.returncode == 0, f"chromium failed ({p.returncode}): {p.stderr[-2000:]}"
    assert netlog.exists(), "chromium wrote no network log"
    return p.stdout, netlog


def page_requests(netlog: Path) -> list[str]:
    """Every URL the page asked for, from Chromium's network log: URL_REQUEST_START_JOB events whose initiator is
    a document (a file:// page's is the opaque origin "null"). The browser's own background requests (initiator
    "not an origin": sign-in, network time) are not the page's and are left out."""
    text = netlog.read_text(encoding="utf-8", errors="replace")
    try:
        log = json.loads(text)
    except json.JSONDecodeError:  # a log cut short at exit: close the event list
        log = json.loads(text.rstrip().rstrip(",") + "]}")
    start = log["constants"]["logEventTypes"]["URL_REQUEST_START_JOB"]
    assert log["events"], "the network log recorded nothing"
    out = []
    for e in log["events"]:
        p = e.get("params") or {}
        if e["type"] != start or "url" not in p:
            continue
        if p.get("initiator") != "not an origin" or "file://" in str(p.get("network_isolation_key")):
            out.append(p["url"])
    return out


def network_urls(urls: list[str]) -> list[str]:
    """The URLs that leave the machine (anything but file:, data:, about:, chrome:, blob:)."""
    local = ("file:", "data:", "about:", "chrome:", "chrome-error:", "blob:")
    return [u for u in urls if u and not u.startswith(local)]


class DomSections(html.parser.HTMLParser):
    """Per ``<section data-renderer>`` of the rendered DOM: its renderer, run, and the tables and figures inside."""

    def __init__(self):
        super().__init__()
        self.sections: list[dict] = []
        self.stack: list[dict | None] = []
        self.omitted: list[str] = []
        self._in_omitted = 0
        self.external: list[str] = []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        for k in ("src", "href", "xlink:href", "action", "poster"):
            v = a.get(k)
            if v and not v.startswith(("#", "data:")):
                self.external.append(v)
        if tag == "section":
            rec = None
            if "data-renderer" in a:
                rec = {
                    "renderer": a["data-renderer"],
                    "run": a["data-run"],
                    "tables": 0,
                    "figures": 0,
                    "svg": 0,
                }
                self.sections.append(rec)
            self.stack.append(rec)
        cur = next((s for s in reversed(self.stack) if s is not None), None)
        if cur is not None:
            if tag == "table":
                cur["tables"] += 1
            elif tag == "figure":
                cur["figures"] += 1
            elif tag == "svg":
                cur["svg"] += 1
        if tag == "p" and "omitted" in (a.get("class") or ""):
            self._in_omitted += 1
            self.omitted.append("")

    def handle_endtag(self, tag):
        if tag == "section" and self.stack:
            self.stack.pop()
        if tag == "p" and self._in_omitted:
            self._in_omitted -= 1

    def handle_data(self, data):
        if self._in_omitted:
            self.omitted[-1] += data


# ================================================================================================ the end-to-end test
@pytest.mark.slow
def test_report_from_real_runs_renders_in_chromium_without_network(filled_store, tmp_path):
    path, ids = filled_store
    out = build_report(path, None, tmp_path / "report.html", title="dlmeval test report")
    text = out.read_text(encoding="utf-8")
    with RunStore(path, must_exist=True) as store:
        rep = collect(store)
        # what the store calls for, computed from the store itself: every (run shown, renderer) whose table exists
        # with the required columns must be a section or be listed as not shown
        shown = {p.run.run_id: p for p in rep.parts}
        due = []
        for rid, part in shown.items():
            run = part.run
            for r in renderers(run.signature.kind):
                if r.table == ITEMS:
                    ok = any(len(x) for x in rep.options["item_runs"][rid])
                else:
                    ok = r.table in run.tables() and not r.missing_columns(run.get_table(r.table))
                if ok:
                    due.append((rid, r))
        # the folding: care runs into the sweep, meta-eval components into the summary, robust into robust-spec
        assert set(rep.folded_into) >= {ids["care:tiny-llada"], ids["care:tiny-bert"]}
        assert {rep.folded_into[r] for r in (ids["care:tiny-llada"], ids["care:tiny-bert"])} == {
            ids["care-sweep"]
        }
        kinds_folded = {store.get_run(r).signature.kind for r in rep.folded_into}
        assert {"care", "meta-eval-lexical", "meta-eval-ar", "meta-eval-diffscore", "robust"} <= kinds_folded
    assert len(due) >= 25

    if chromium_exe() is None:
        pytest.skip("chromium is not installed (apt-get install -y --no-install-recommends chromium)")
    dom, netlog = run_chromium(out.as_uri(), tmp_path / "c1", "--dump-dom")
    assert "dlmeval test report" in dom and dom.rstrip().endswith("</html>")
    parser = DomSections()
    parser.feed(dom)
    by_key = {(s["run"], s["renderer"]): s for s in parser.sections}
    missing = []
    for rid, r in due:
        s = by_key.get((rid, r.key))
        if s is None:
            # not drawn: the page must say why, in the run's "Not shown" line
            if not any(r.title in o for o in parser.omitted):
                missing.append(f"{r.key} of {rid}")
            continue
        assert s["tables"] >= r.n_tables, (r.key, s)
        assert s["svg"] >= s["figures"], (r.key, s)
        if s["figures"] < r.n_figures:  # a figure left out (empty, or one level of its factor) says why
            assert any(r.title in o and "figure:" in o for o in parser.omitted), (r.key, s)
    assert not missing, f"sections neither shown nor explained: {missing}"
    drawn = {k for _, k in by_key}
    # the pillars' headline sections are drawn from the real and synthetic runs
    assert {
        "meta-eval/sum",
        "meta-eval/mt",
        "meta-eval/profile_correlation",
        "analysis/adversarial",
        "analysis/positional",
        "diffscore/heatmap",
        "care/nfe",
        "care/temperature",
        "care/interaction",
        "care/frontier",
        "care/churn",
        "robust/accuracy",
        "robust/rdi",
        "robust/reliability",
        "robust/ipm",
        "robust/dgcg",
        "robust/probes",
    } <= drawn
    # every section in the page has its tables and figures
    for s in parser.sections:
        assert s["tables"] + s["figures"] >= 1, s
    # signatures first, with every run's signature line
    assert dom.index('id="signatures"') < dom.index('id="pillar-scoring"')
    for rid in ids.values():
        assert rid in dom
    # no network: nothing in the page points outside it, and the network log saw no request
    assert parser.external == []
    assert network_urls(page_requests(netlog)) == []
    assert "<script" not in text.lower()

    # the screenshot, kept as an artifact
    shot = tmp_path / "report.png"
    _, netlog2 = run_chromium(
        out.as_uri(), tmp_path / "c2", f"--screenshot={shot}", "--window-size=1280,2200", "--hide-scrollbars"
    )
    assert network_urls(page_requests(netlog2)) == []
    from matplotlib.image import imread

    img = imread(shot)
    assert img.shape[0] >= 2000 and img.shape[1] >= 1200
    assert float(np.std(img[..., :3])) > 0.05  # not a blank page
    art = REPO / "artifacts"
    art.mkdir(exist_ok=True)
    shutil.copy(shot, art / "report.png")
    shutil.copy(out, art / "report.html")


@pytest.mark.slow
def test_network_check_sees_a_request_when_a_page_makes_one(tmp_path):
    """The negative control of the no-network check: a page with an external image is caught."""
    if chromium_exe() is None:
        pytest.skip("chromium is not installed (apt-get install -y --no-install-recommends chromium)")
    page = tmp_path / "leaky.html"
    page.write_text(
        '<!DOCTYPE html><html><body><img src="http://127.0.0.1:9/pixel.png">'
        '<link rel="stylesheet" href="https://cdn.example.org/x.css"></body></html>'
    )
    _, netlog = run_chromium(page.as_uri(), tmp_path / "c", "--dump-dom")
    assert sorted(network_urls(page_requests(netlog))) == [
        "http://127.0.0.1:9/pixel.png",
        "https://cdn.example.org/x.css",
    ]


@pytest.mark.slow
def test_leaderboard_from_real_care_runs(filled_store, tmp_path):
    path, ids = filled_store
    df = leaderboard_frame(path)
    # one row per tiny model (the care runs; the sweep adds none), each with the signature of its own run
    assert sorted(df["model"]) == ["tiny-bert", "tiny-llada"]
    assert set(df["run_id"]) == {ids["care:tiny-llada"], ids["care:tiny-bert"]}
    with RunStore(path, must_exist=True) as store:
        for r in df.itertuples():
            assert r.signature == store.get_run(r.run_id).signature.short()
            lb = store.get_run(r.run_id).get_table("leaderboard").iloc[0]
            assert r.mauve_baseline == pytest.approx(lb["mauve_none"], nan_ok=True)
            assert r.gap == pytest.approx(lb["gap"], nan_ok=True)
            nfe = store.get_run(r.run_id).get_table("nfe")
            want = nfe[(nfe["strategy"] == "high_entropy") & (nfe["steps"] == r.steps)]["nfe"].mean()
            assert r.nfe_strategy == pytest.approx(want)
    assert list(df["rank"]) == [1, 2]
    paths = write_leaderboard(path, tmp_path / "lb")
    assert {k: p.name for k, p in paths.items()} == {"html": "lb.html", "md": "lb.md", "csv": "lb.csv"}
    csv = pd.read_csv(paths["csv"])
    assert list(csv["model"]) == list(df["model"]) and "signature" in csv.columns
    md = paths["md"].read_text()
    # signatures carry '|', which a Markdown table cell escapes
    assert md.startswith("# Care leaderboard")
    assert all(s.replace("|", "\\|") in md for s in df["signature"])
    assert "<table" in paths["html"].read_text()


# ================================================================================================ fast unit tests
def test_rounding_rules_are_one_per_kind_of_column():
    assert fmt_value(0.12345, "mauve") == "0.123"
    assert fmt_value(23.456, "ppl") == "23.5" and fmt_value(23.456, "ppl_none") == "23.5"
    assert fmt_value(437.25, "nfe") == "437.2" and fmt_value(57.06, "acceptance_pct") == "57.1"
    assert fmt_value(0.0004, "p") == "<0.001" and fmt_value(0.01234, "wilcoxon_p") == "0.012"
    assert fmt_value(3.14159, "F") == "3.14"
    assert fmt_value(0.25, "temperature") == "0.25" and fmt_value(0.0, "temperature") == "0"
    assert fmt_value(128.0, "steps") == "128" and fmt_value(np.int64(7), "n_seeds") == "7"
    assert fmt_value(float("nan"), "mauve") == "–" and fmt_value(None, "x") == "–"
    assert fmt_value(True, "meaningful") == "yes" and fmt_value("none", "strategy") == "none"
    df = pd.DataFrame(
        {
            "strategy": ["none"],
            "mauve": [0.6],
            "mauve_se": [0.03],
            "gap": [0.296],
            "ci_lo": [0.1],
            "ci_hi": [0.2],
        }
    )
    disp, src = display_frame(df)
    assert list(disp.columns) == ["strategy", "MAUVE ± SE", "gap (MAUVE)", "CI"]
    assert disp.iloc[0].tolist() == ["none", "0.600 ± 0.030", "0.296", "[0.100, 0.200]"]
    assert src["MAUVE ± SE"] == "mauve"
    # no SE (one seed): the mean alone
    disp, _ = display_frame(pd.DataFrame({"mauve": [0.6], "mauve_se": [float("nan")]}))
    assert disp.iat[0, 0] == "0.600"


def test_table_emphasizes_the_best_value_marks_cells_and_truncates():
    df = pd.DataFrame({"metric": ["a", "b", "c"], "x": [0.5, 0.7, 0.7], "y": [3.0, 1.0, 2.0]})
    h = table_html(
        TableView(
            df,
            best={"x": "max", "y": "min"},
            marks={(0, "x"): "†"},
            max_rows=2,
            more_hint="dlmeval runs export R",
        )
    )
    rows = re.findall(r"<tr>(.*?)</tr>", h, flags=re.S)
    assert "<strong>0.700</strong>" in rows[2] and "<strong>1.000</strong>" in rows[2]  # ties: every best row
    assert "0.500" in rows[1] and "<strong>" not in rows[1] and '<sup class="mark">†</sup>' in rows[1]
    assert "1 more rows not shown (dlmeval runs export R)" in h and len(rows) == 3  # header + 2 rows


def test_headline_tables_hide_absent_rows_and_list_them_under_the_table():
    """#36 item 7: a paper baseline the suite did not run is not a row of dashes in a headline table but a footnote;
    marks stay on their rows; a wide table scrolls inside its frame."""
    from dlmeval.report.html import CSS

    wide = pd.DataFrame(
        {
            "metric": ["BLEU", "BARTScore (absent: no checkpoint given)", "DiffScore (paper mapping)",
                       "GPTScore (absent: no GPTScore templates)", "odd (absent: but it has a value)"],
            **{f"bench{i} COH (rho doc-avg)": [0.1, np.nan, 0.3, np.nan, 0.2] for i in range(14)},
        }
    )  # fmt: skip
    view = TableView(wide, marks={(2, "bench0 COH (rho doc-avg)"): "†"}, best={"bench0 COH (rho doc-avg)": "max"},
                     hide_absent="metric")  # fmt: skip
    assert view.absent == ["BARTScore (no checkpoint given)", "GPTScore (no GPTScore templates)"]
    h = table_html(view)
    rows = re.findall(r"<tr>(.*?)</tr>", h, flags=re.S)
    absent_rows = [r for r in rows if "absent: no" in r]
    assert len(rows) == 4 and absent_rows == []  # header + BLEU, DiffScore, the valued row
    assert '<strong>0.300<sup class="mark">†</sup></strong>' in rows[2]  # the mark moved with its row
    assert "odd (absent: but it has a value)" in rows[3]  # a row with numbers is never hidden
    foot = re.search(r'<p class="note absent" data-absent="2">(.*?)</p>', h, re.S)
    assert foot and "BARTScore (no checkpoint given); GPTScore (no GPTScore templates)" in foot.group(1)
    # the latency form: a family that was not timed says so in its note
    lat = pd.DataFrame({"family": ["DiffScore", "GPTScore"], "mean_s": [0.2, np.nan],
                        "note": [None, "absent (no GPTScore templates for task SUM)"]})  # fmt: skip
    v2 = TableView(lat, hide_absent=("family", "note"))
    assert list(v2.df["family"]) == ["DiffScore"] and v2.absent == [
        "GPTScore (no GPTScore templates for task SUM)"
    ]
    # without the option nothing is hidden; a wide table sits in a frame that scrolls sideways
    assert len(re.findall(r"<tr>", table_html(TableView(wide)))) == 6
    assert h.startswith('<div class="frame">') and re.search(r"div\.frame \{[^}]*overflow-x: auto", CSS)


def test_pareto_front_keeps_configurations_nothing_beats():
    ppl = np.array([10.0, 12.0, 11.0, 30.0, 9.0, np.nan])
    mauve = np.array([0.5, 0.9, 0.4, 0.95, 0.2, 0.99])
    # 9.0/0.2 best PPL; 10/0.5; 12/0.9; 30/0.95; 11/0.4 is beaten by 10/0.5; NaN left out
    assert F.pareto_front(ppl, mauve).tolist() == [4, 0, 1, 3]


def test_inline_svgs_do_not_share_ids():
    df = pd.DataFrame(
        {"strategy": ["none", "none", "x", "x"], "steps": [8, 16, 8, 16], "nfe": [8, 16, 20, 40]}
    )
    a = F.figure_svg(F.nfe_vs_steps(df), salt="a1")
    b = F.figure_svg(F.nfe_vs_steps(df), salt="b2")
    ids_a, ids_b = set(re.findall(r'id="([^"]+)"', a)), set(re.findall(r'id="([^"]+)"', b))
    assert ids_a and not ids_a & ids_b
    refs = set(re.findall(r'href="#([^"]+)"', a)) | set(re.findall(r"url\(#([^)]+)\)", a))
    assert refs <= ids_a  # every reference resolves inside its own figure
    assert a.startswith("<svg") and "<script" not in a


def test_figures_reject_tables_without_their_columns():
    with pytest.raises(InputError, match="lacks column"):
        F.interaction_plot(pd.DataFrame({"strategy": ["none"], "mauve": [0.5]}))
    with pytest.raises(InputError, match="no rows"):
        F.rdi_heatmap(pd.DataFrame(columns=["model", "type", "rate", "rdi"]))


def test_significance_marks_follow_the_comparisons_table():
    from dlmeval.report.sections_scoring import significance_marks

    wide = pd.DataFrame(
        {
            "metric": ["BLEU", "DiffScore (paper mapping)"],
            "SummEval COH (rho doc-avg)": [0.1, 0.3],
            "gu-en (tau)": [0.2, 0.4],
        }
    )
    comps = pd.DataFrame(
        [
            {
                "benchmark": "SummEval",
                "task": "SUM",
                "dimension_tag": "COH",
                "protocol": "doc_spearman",
                "label_a": "DiffScore (paper mapping)",
                "metric_b": "ar:mapped",
                "a_significantly_better": True,
            },
            {
                "benchmark": "gu-en",
                "task": "WMT",
                "dimension_tag": "DARR",
                "protocol": "kendall",
                "label_a": "DiffScore (paper mapping)",
                "metric_b": "ar:mapped",
                "a_significantly_better": False,
            },
            {
                "benchmark": "gu-en",
                "task": "WMT",
                "dimension_tag": "DARR",
                "protocol": "kendall",
                "label_a": "DiffScore (paper mapping)",
                "metric_b": "bleu",
                "a_significantly_better": True,
            },
        ]
    )
    assert significance_marks(wide, comps) == {(1, "SummEval COH (rho doc-avg)"): "†"}
    # with the paper's marks in the run (a BARTScore / GPTScore family ran) the report shows those, as the Markdown
    # tables do: † vs BARTScore, ‡ vs GPTScore, both on one cell; the AR-baseline dagger is no longer used
    paper = [
        {
            **comps.iloc[0].to_dict(),
            "metric_b": m,
            "test": "williams (paper marks)",
            "mark": k,
            "a_significantly_better": ok,
        }
        for m, k, ok in (("bartscore:mapped", "†", True), ("gptscore:mapped", "‡", True))
    ] + [
        {
            **comps.iloc[1].to_dict(),
            "metric_b": "gptscore:mapped",
            "test": "williams (paper marks)",
            "mark": "‡",
            "a_significantly_better": False,
        }
    ]
    both = pd.concat([comps.assign(test="williams", mark=None), pd.DataFrame(paper)], ignore_index=True)
    assert significance_marks(wide, both) == {(1, "SummEval COH (rho doc-avg)"): "†‡"}
    only_gpt = pd.concat(
        [comps.assign(test="williams", mark=None), pd.DataFrame(paper[1:])], ignore_index=True
    )
    assert significance_marks(wide, only_gpt) == {(1, "SummEval COH (rho doc-avg)"): "‡"}


def _tiny_store(tmp_path):
    """Fast fixture (no model): a care-sweep run with tables from the real Care table functions on hand-made cells,
    one with a broken and one with an unknown table."""
    from dlmeval.protocols.care import parse_spec
    from dlmeval.protocols.care import tables as ct

    spec = parse_spec(
        {
            "name": "t",
            "sweep": {
                "strategies": ["none", "high_entropy"],
                "steps": [8, 16],
                "temperatures": [0.0, 0.5],
                "seeds": [1, 2],
            },
            "headline": {"steps": 16, "temperature": 0.5},
        }
    )
    rows = []
    for strat in ("none", "high_entropy"):
        for steps in (8, 16):
            for t in (0.0, 0.5):
                for seed in (1, 2):
                    m = 0.5 + 0.4 * t - (0.3 * t if strat == "high_entropy" else 0) + 0.01 * seed
                    nfe = steps if strat == "none" else 3 * steps
                    rows.append(
                        dict(
                            model="m",
                            source="webtext",
                            strategy=strat,
                            steps=steps,
                            nfe_budget=None,
                            temperature=t,
                            fraction=0.15,
                            seed=seed,
                            n=4,
                            n_accepted=4,
                            acceptance=1.0,
                            nfe=nfe,
                            nfe_min=nfe,
                            nfe_max=nfe,
                            remasks=0.0,
                            ppl=20 - 5 * t,
                            mauve=m,
                            self_bleu=0.3,
                            distinct3=0.8,
                        )
                    )
    cells = ct.cells_frame(rows)
    store = RunStore(tmp_path / "t.sqlite")
    run = store.open_run(
        "care-sweep",
        {"headline": {"baseline": "none", "strategy": "high_entropy", "steps": 16}, "models": ["m"]},
    )
    for name, df in ct.all_tables(cells, ct.down_frame([]), spec).items():
        run.put_table(name, df)
    run.put_table("nfe", ct.table_nfe(cells, spec).drop(columns=["nfe"]))  # broken: no nfe column
    run.put_table("extra_numbers", pd.DataFrame({"a": [1.23456]}))
    run.finish()
    return store, run


def test_sections_appear_only_for_stored_tables_and_say_why_not(tmp_path):
    store, run = _tiny_store(tmp_path)
    rep = collect(store)
    (part,) = rep.parts
    keys = [rs.renderer.key for rs in part.sections if rs.renderer]
    assert {
        "care/temperature",
        "care/interaction",
        "care/frontier",
        "care/gap",
        "care/anova",
        "care/leaderboard",
    } <= set(keys)
    omitted = dict(part.omitted)
    assert omitted["Actual NFE"] == "table `nfe` lacks column(s) nfe"
    assert omitted["Remask-fraction dose-response"] == "no table `dose_response`"
    assert omitted["Churn over steps"] == "the run has no per-item results"
    plain = [rs for rs in part.sections if rs.renderer is None]
    # an unknown table, and one whose section could not be drawn, are still shown plainly
    assert [rs.tables for rs in plain] == [["nfe"], ["extra_numbers"]]
    out = build_report(store, [run.run_id[:6]], tmp_path / "r.html")
    text = out.read_text()
    assert "No robustness runs in this report" in text and "No scoring runs in this report" in text
    assert "Not shown for this run: " in text and "lacks column(s) nfe" in text
    assert run.signature.short() in text and "1.235" in text
    assert "<script" not in text
    # no address at all but the SVG / XLink namespace names
    assert set(re.findall(r"https?://[^\s\"'<>]+", text)) <= {
        "http://www.w3.org/2000/svg",
        "http://www.w3.org/1999/xlink",
    }


def test_a_failing_section_does_not_cost_the_report(tmp_path, monkeypatch):
    from dlmeval.report import sections_sampling

    store, run = _tiny_store(tmp_path)

    def boom(*a, **k):
        raise ValueError("bad numbers")

    monkeypatch.setattr(sections_sampling.F, "gap_plot", boom)
    (part,) = collect(store).parts
    assert ("Interaction gap by temperature", "could not be drawn (ValueError: bad numbers)") in part.omitted
    assert any(rs.renderer and rs.renderer.key == "care/frontier" for rs in part.sections)


def test_folding_and_bad_input(tmp_path):
    from dlmeval.report.html import fold_runs

    store = RunStore(tmp_path / "f.sqlite")
    spec = {"seed": 0, "sweep": {"steps": [8]}}
    a = store.open_run("care", {**spec, "model": "m1"}, seed=0)
    b = store.open_run("care", {**spec, "model": "m2"}, seed=1)  # another seed: not the sweep's
    c = store.open_run("care", {**spec, "sweep": {"steps": [16]}, "model": "m1"}, seed=0)  # another spec
    sweep = store.open_run("care-sweep", {**spec, "models": ["m1", "m2"]}, seed=0)
    assert fold_runs([a, b, c, sweep]) == {a.run_id: sweep.run_id}
    assert fold_runs([a, b, c]) == {}  # no sweep selected: nothing folds
    with pytest.raises(InputError, match="no run 'ffff'"):
        build_report(store, ["ffff"], tmp_path / "x.html")
    empty = RunStore(tmp_path / "empty.sqlite")
    with pytest.raises(InputError, match="no runs in"):
        build_report(empty, None, tmp_path / "x.html")
    with pytest.raises(InputError, match="no run store"):
        build_report(tmp_path / "missing.sqlite", None, tmp_path / "x.html")
    with pytest.raises(InputError, match="leaderboard formats"):
        write_leaderboard(store, tmp_path / "lb", formats=("pdf",))


def test_leaderboard_ranks_rows_and_keeps_each_signature(tmp_path):
    store = RunStore(tmp_path / "lb.sqlite")
    head = {"headline": {"baseline": "none", "strategy": "high_entropy"}}
    runs = {}
    for name, mauve_none, gap in (("m1", 0.90, 0.30), ("m2", 0.95, 0.10), ("m3", 0.90, 0.05)):
        r = store.open_run("care", {**head, "model": name}, [{"name": name, "weights_sha256": name * 8}])
        r.put_table(
            "leaderboard",
            pd.DataFrame(
                [
                    {
                        "model": name,
                        "source": "webtext",
                        "steps": 16,
                        "temperature": 0.5,
                        "ppl_none": 20.0,
                        "mauve_none": mauve_none,
                        "ppl_high_entropy": 18.0,
                        "mauve_high_entropy": mauve_none - gap,
                        "gap": gap,
                        "gap_se": 0.01,
                        "p": 0.02,
                        "n_seeds": 2,
                        "humaneval_pass1": float("nan"),
                        "gsm8k_em": float("nan"),
                        "arc_acc": 0.25,
                    }
                ]
            ),
        )
        r.put_table(
            "nfe",
            pd.DataFrame(
                {
                    "model": [name] * 2,
                    "strategy": ["none", "high_entropy"],
                    "steps": [16, 16],
                    "nfe": [16.0, 48.5],
                }
            ),
        )
        runs[name] = r
    df = leaderboard_frame(store)
    assert list(df["model"]) == ["m2", "m3", "m1"]  # MAUVE(none) descending, ties by the smaller gap
    assert list(df["rank"]) == [1, 2, 3]
    assert df.set_index("model").loc["m3", "signature"] == runs["m3"].signature.short()
    assert df.set_index("model").loc["m1", "nfe_strategy"] == 48.5
    assert df.set_index("model").loc["m1", "weights"] == "m1m1m1m1"
    md = write_leaderboard(store, tmp_path / "out" / "board.md", formats=("md",))["md"]
    assert md.name == "board.md"
    lines = md.read_text().splitlines()
    row = next(line for line in lines if line.startswith("| 1 |"))
    assert "| m2 |" in row and "| 0.950 |" in row and "| 48.5 |" in row


def test_cli_report_and_leaderboard(tmp_path, capsys):
    from dlmeval.cli.main import main

    store, run = _tiny_store(tmp_path)
    store.close()
    out = tmp_path / "cli.html"
    assert main(["--store", str(tmp_path / "t.sqlite"), "report", "-o", str(out)]) == 0
    assert capsys.readouterr().out.strip() == f"wrote the report of 1 run(s) to {out}"
    assert out.read_text().startswith("<!DOCTYPE html>")
    assert (
        main(
            [
                "--store",
                str(tmp_path / "t.sqlite"),
                "--json",
                "leaderboard",
                "-o",
                str(tmp_path / "lb"),
                "--format",
                "csv",
            ]
        )
        == 0
    )
    got = json.loads(capsys.readouterr().out)
    assert got["paths"] == {"csv": str(tmp_path / "lb.csv")} and "signature" in got["columns"]
    assert main(["--store", str(tmp_path / "nope.sqlite"), "report"]) == 2
    assert "no run store" in capsys.readouterr().err


@pytest.mark.slow
def test_report_figures_show_what_their_captions_say_in_chromium(filled_store, tmp_path):
    """The report of real tiny runs, as Chromium renders it (#26): no "lacks column", no empty table or figure,
    every meta-eval CI panel holds a DiffScore row, the probe figure names every probed model, every figure has
    labelled series (matplotlib's SVG keeps each text as a comment beside its glyph paths), every table sits in
    a frame and the page never scrolls sideways."""
    if chromium_exe() is None:
        pytest.skip("chromium is not installed (scripts/system-deps.sh installs it)")
    path, _ = filled_store
    out = build_report(path, None, tmp_path / "report.html", title="dlmeval figures")
    # a copy with one script that measures the layout (the report itself has no script and forbids one)
    probe_page = tmp_path / "measure.html"
    text = out.read_text(encoding="utf-8")
    text = re.sub(r'<meta http-equiv="Content-Security-Policy"[^>]*>', "", text)
    script = (
        "<script>document.querySelectorAll('div.frame').forEach(f => f.setAttribute('data-overflow', "
        "f.scrollWidth > f.clientWidth + 1 ? '1' : '0')); document.body.setAttribute('data-page-width', "
        "document.documentElement.scrollWidth + '/' + window.innerWidth);</script>"
    )
    probe_page.write_text(text.replace("</body>", script + "</body>"), encoding="utf-8")
    dom, _ = run_chromium(probe_page.as_uri(), tmp_path / "c", "--dump-dom", "--window-size=1280,2000")
    assert "dlmeval figures" in dom
    assert "lacks column" not in dom
    assert "<tbody></tbody>" not in dom  # no empty table
    width, window = map(int, re.search(r'data-page-width="(\d+)/(\d+)"', dom).groups())
    assert width <= window, "the page scrolls sideways: a table or figure is wider than the window"
    n_tables = len(re.findall(r'<table class="data"', dom))
    assert n_tables == len(re.findall(r'<div class="frame"[^>]*><table class="data"', dom)) and n_tables > 10
    blocks = re.findall(r'<section class="block"[^>]*data-renderer="([^"]+)"[^>]*>(.*?)</section>', dom, re.S)
    figures = [
        (key, svg, cap)
        for key, body in blocks
        for svg, cap in re.findall(
            r"<figure[^>]*>\s*(<svg.*?</svg>)\s*<figcaption>(.*?)</figcaption>", body, re.S
        )
    ]
    assert len(figures) >= 10
    for key, svg, cap in figures:
        labels = [c.strip() for c in re.findall(r"<!--(.*?)-->", svg, re.S)]
        assert labels and re.search(r"<path", svg), (key, cap)  # series and their labels drawn
    ci = [svg for key, svg, cap in figures if key == "meta-eval/results"]
    assert ci and all("red: DiffScore" in cap for key, _, cap in figures if key == "meta-eval/results")
    for svg in ci:
        panels = re.split(r'<g id="[^"]*axes_\d+"', svg)[1:]
        assert panels
        for panel in panels:
            assert any("DiffScore" in c for c in re.findall(r"<!--(.*?)-->", panel, re.S)), (
                "a CI panel without DiffScore"
            )
    with RunStore(path, must_exist=True) as store:
        probe_models = set()
        for r in store.list_runs():
            run = store.get_run(r["run_id"])
            if "probes" in run.tables():
                probe_models |= set(run.get_table("probes")["model"].astype(str))
    probe_figs = [svg for key, svg, _ in figures if key == "robust/probes"]
    assert probe_models and probe_figs
    for svg in probe_figs:
        comments = " ".join(re.findall(r"<!--(.*?)-->", svg, re.S))
        assert all(m in comments for m in probe_models), (probe_models, comments[:500])
    # #36 item 7: the headline tables show no row the run did not compute (a footnote names them); no figure of the
    # page draws a legend over a panel (the figures of every run, checked box by box)
    for body in re.findall(r'<table class="data".*?</table>', dom, re.S):
        assert "(absent:" not in body
    # the tiny meta-eval suite runs no BARTScore / GPTScore: their paper rows are named under the table instead
    assert re.search(
        r'<p class="note absent" data-absent="\d+">Not in this table[^<]*BARTScore \(not run', dom
    )
    from dlmeval.report import run_figures

    with RunStore(path, must_exist=True) as store:
        n_legends, overlaps = 0, []
        for r in store.list_runs():
            for title, fig in run_figures(store, r["run_id"]).items():
                n_legends += sum(ax.get_legend() is not None for ax in fig.axes) + len(fig.legends)
                overlaps += [f"{title}: {o}" for o in F.legend_overlaps(fig)]
    assert n_legends >= 10 and overlaps == []
