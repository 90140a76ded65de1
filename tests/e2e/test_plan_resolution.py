"""Plan, then execute (#35): a protocol resolves its spec once into a plan and the run executes it. These tests
count, over a whole tiny run, how often the spec's data sources are looked up and read: exactly once each."""

from __future__ import annotations

from collections import Counter

import pytest

from dlmeval.store import RunStore
from tests.conftest import tiny_care_spec

CARE_SPEC = tiny_care_spec(
    "t-plan",
    diffusion=("tiny-llada", "tiny-bert"),
    n_prompts=3,
    sources=("webtext", "lm1b"),
    seeds=(1, 2),
    self_bleu_max=5,
    tasks={"gsm8k": {"n": 2, "shots": 1, "gen_tokens": 8}, "arc": {"n": 2, "n_masks": 1, "n_rates": 2}},
)


def _count(monkeypatch, owner, name: str, counts: Counter, key) -> None:
    """Wrap ``owner.name`` so that every call adds one to ``counts[key(*args)]``."""
    real = getattr(owner, name)

    def counted(*args, **kw):
        counts[key(*args, **kw)] += 1
        return real(*args, **kw)

    monkeypatch.setattr(owner, name, counted)


def test_care_run_resolves_each_source_once(tmp_path, monkeypatch):
    """A Care run of two models over two corpora with GSM8K and ARC looks each corpus up once
    (``CareSpec.corpus``), reads each corpus file once (prompts for both models and the MAUVE references come from
    that one read) and loads each downstream task once (the data digest, the units and the ARC scoring share it)."""
    from dlmeval.data import tasks as data_tasks
    from dlmeval.protocols import care
    from dlmeval.protocols.care import data as care_data
    from dlmeval.protocols.care.spec import CareSpec
    from tests.protocols.care.test_care import make_data

    data = make_data(tmp_path / "data")
    p = tmp_path / "plan.toml"
    p.write_text(CARE_SPEC)
    spec = care.load_spec(p)
    lookups, reads, loads = Counter(), Counter(), Counter()
    _count(monkeypatch, CareSpec, "corpus", lookups, lambda self, name: name)
    _count(monkeypatch, data_tasks, "load_webtext_reference", reads, lambda *a, **k: "webtext")
    _count(monkeypatch, data_tasks, "load_lm1b_reference", reads, lambda *a, **k: "lm1b")
    _count(monkeypatch, care_data, "_load", loads, lambda kind, src, *a: (kind, src.split))
    with RunStore(tmp_path / "s.sqlite") as store:
        res = care.run_care(spec, store, data_dir=data, progress=False)
    assert set(res.model_runs) == {"tiny-llada", "tiny-bert"}
    assert len(res.tables["quality"]) == 2 * 2 * 2  # models x sources x strategies (over the seeds)
    assert set(res.tables["arc"]["task"]) == {"arc"} and len(res.tables["downstream"]) == 2
    assert lookups == {"webtext": 1, "lm1b": 1}
    assert reads == {"webtext": 1, "lm1b": 1}
    assert loads == {("gsm8k", None): 1, ("arc_challenge", None): 1}


def test_care_plan_is_resolved_once_and_kept(tmp_path):
    """The plan holds what it resolved; a run given the plan reads nothing the plan has read already, and a plan
    refuses another data directory than its own."""
    from dlmeval.protocols import care
    from tests.protocols.care.test_care import make_data

    data = make_data(tmp_path / "data")
    p = tmp_path / "plan.toml"
    p.write_text(CARE_SPEC)
    plan = care.resolve(care.load_spec(p), care.CareOptions(data))
    assert plan.sources == ("webtext", "lm1b") and plan.tasks == ("gsm8k", "arc")
    assert len(plan.cells) == 2 * 2 * 2 and len(plan.downstream_cells) == 1
    assert plan.reads == {}  # resolving reads no data
    ident = plan.data_identity()
    assert plan.data_identity() is ident and plan.texts("lm1b") is plan.texts("lm1b")
    assert plan.references("webtext") == plan.references("webtext") and len(plan.references("webtext")) == 4
    with pytest.raises(ValueError, match="data_dir"):
        care.run_care(plan, None, data_dir=tmp_path / "elsewhere")


ROBUST_SPEC = """\
name = "t-plan-robust"
seed = 0
perturbation_seeds = [0]

[[pairs]]
dlm = "tiny-bert"
ar = "tiny-causal"

[conditions]
keys = ["char.keyboard@0.20"]

[tasks.triviaqa]
n = 2
modes = ["generation"]
gen_tokens = 4
source = "{triviaqa}"

[tasks.arc_challenge]
n = 2
modes = ["likelihood"]
source = "{arc}"

[dlm]
batch_size = 2

[ar]
batch_size = 2

[likelihood]
n_masks = 1
n_rates = 2

[stats]
bootstrap_resamples = 100

[calibration]
plots = false
"""


def test_robust_cli_run_reads_each_task_once(tmp_path, monkeypatch, capsys):
    """``dlmeval robust SPEC`` on two sourced tasks reads each task's rows once: the check before the store opens
    and the run of both models share the plan's read (before the plan: twice, once for the check, once for the
    run)."""
    from dlmeval.cli.main import main
    from dlmeval.protocols.robust import evaluate
    from tests.e2e.test_hub_protocols import build_sets

    sets = build_sets(tmp_path / "sets")
    p = tmp_path / "robust.toml"
    p.write_text(ROBUST_SPEC.format(**sets))
    reads = Counter()
    _count(monkeypatch, evaluate, "source_items", reads, lambda data, task, path: task.name)
    store = tmp_path / "runs.sqlite"
    rc = main(
        ["--store", str(store), "--json", "--no-progress", "robust", str(p), "--out", str(tmp_path / "out")]
    )
    out = capsys.readouterr().out
    assert rc == 0, out
    assert '"model_runs"' in out and "tiny-causal" in out
    assert reads == {"triviaqa": 1, "arc_challenge": 1}


def test_meta_eval_run_digests_each_benchmark_once(data_root, tmp_path, monkeypatch):
    """A meta-eval run resolves its options once into a plan (``SuiteInputs.plan``): the data file of each
    benchmark is digested once, for the check before the store opens and the summary run both (before the plan:
    once for each)."""
    from dlmeval.data import paths
    from dlmeval.protocols.diffscore.meta_eval import SuiteInputs, SuiteOptions, run_suite

    opts = SuiteOptions(dlm="tiny-bert", ar="tiny-causal", n_masks=2, n_rates=2, bootstrap=0, progress=False,
                        data_dir=str(data_root), benchmarks=("SummEval",), limit=3, families=("lexical",))  # fmt: skip
    digests = Counter()
    _count(monkeypatch, paths, "file_digest", digests, lambda path, *a, **k: path.name)
    inputs = SuiteInputs(opts).prepare()
    assert inputs.plan.benchmarks == ("SummEval",) and inputs.plan.families == ("lexical",)
    report = run_suite(opts, RunStore(tmp_path / "runs.sqlite"), inputs=inputs)
    assert set(report.components) == {"lexical"}
    assert report.run.signature.config["data"]["SummEval"] == inputs.plan.data_identity("SummEval")
    assert sum(digests.values()) == 1 and len(digests) == 1


LEADERBOARD_SPEC = """\
name = "t-plan-lb"
kind = "care-leaderboard"
seed = 0
preset = "tiny"

[models]
evaluator = "tiny-causal"

[generation]
n_prompts = 3
batch_size = 3
sources = ["webtext"]

[metrics]
featurizer = "ar"
n_reference = 4
reference_words = 8
self_bleu_max = 5

[leaderboard]
steps = 8
temperature = 0.5
baseline = "none"
strategy = "high_entropy"
seeds = [1]
remask_fraction = 0.25

[[rows]]
label = "tiny-llada"
model = "tiny-llada"
tier = 1
scale = "tiny"

[[rows]]
label = "tiny-bert"
model = "tiny-bert"
tier = 1
scale = "tiny"

[[rows]]
label = "tiny-causal (p=0.95)"
model = "tiny-causal"
tier = "reference"
scale = "tiny"
kind = "ar"
top_p = 0.95
"""


def test_leaderboard_rows_share_one_read_of_the_corpus(tmp_path, monkeypatch):
    """care-leaderboard resolves every row's Care plan at once (:func:`resolve_leaderboard`), sharing their reads:
    running the plan looks no corpus up in a spec, and reads the corpus once for both diffusion rows and the AR row
    (prompts and MAUVE references alike)."""
    from dlmeval.data import tasks as data_tasks
    from dlmeval.protocols.care.leaderboard import load_leaderboard, resolve_leaderboard, run_leaderboard
    from dlmeval.protocols.care.plan import CareOptions
    from dlmeval.protocols.care.spec import CareSpec
    from tests.protocols.care.test_care import make_data

    data = make_data(tmp_path / "data")
    p = tmp_path / "lb.toml"
    p.write_text(LEADERBOARD_SPEC)
    plan = resolve_leaderboard(load_leaderboard(p), CareOptions(data))
    assert [care is None for _, care in plan.rows] == [False, False, True]
    assert all(care.reads is plan.base.reads for _, care in plan.rows if care is not None)
    lookups, reads = Counter(), Counter()
    _count(monkeypatch, CareSpec, "corpus", lookups, lambda self, name: name)
    _count(monkeypatch, data_tasks, "load_webtext_reference", reads, lambda *a, **k: "webtext")
    with RunStore(tmp_path / "s.sqlite") as store:
        _, table = run_leaderboard(plan, store, device="cpu", progress=False)
    assert list(table["model"]) == ["tiny-llada", "tiny-bert", "tiny-causal (p=0.95)"]
    assert table["mauve_none"].between(0, 1).all()
    assert reads == {"webtext": 1}
    assert lookups == {}
