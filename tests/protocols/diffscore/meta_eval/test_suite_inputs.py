"""The meta-eval suite in two halves: :class:`SuiteInputs` (options, frames, models; checked before a store opens)
and :class:`Suite` (the runs, over an open store), and the public interface the metric families use."""

import ast
from pathlib import Path

import pytest

from dlmeval.store import RunStore

FAMILY_DIR = Path(__file__).resolve().parents[4] / "src/dlmeval/protocols/diffscore/meta_eval"


def _opts(data_root, **kw):
    from dlmeval.protocols.diffscore.meta_eval import SuiteOptions

    base = dict(dlm="tiny-bert", ar="tiny-causal", n_masks=2, n_rates=2, bootstrap=0, progress=False,
                data_dir=str(data_root), benchmarks=("SummEval",), limit=4, families=("diffscore", "ar"))  # fmt: skip
    base.update(kw)
    return SuiteOptions(**base)


def test_a_suite_needs_a_store():
    from dlmeval.protocols.diffscore.meta_eval import Suite, SuiteInputs, SuiteOptions

    with pytest.raises(TypeError, match="open store"):
        Suite(SuiteOptions(), None)
    with pytest.raises(TypeError, match="SuiteInputs"):
        Suite(SuiteInputs(SuiteOptions()), RunStore(":memory:"), models={"x": object()})


def test_models_loaded_in_prepare_are_the_ones_the_runs_score_with(data_root, monkeypatch, tmp_path):
    """Prepared before the store exists, each model loads once; the suite's families then score with them."""
    from dlmeval.models import registry
    from dlmeval.protocols.diffscore.meta_eval import SuiteInputs, run_suite

    loads = []
    real_d, real_c = registry.load_diffusion, registry.load_causal_lm
    monkeypatch.setattr(registry, "load_diffusion", lambda s, **kw: loads.append(s) or real_d(s, **kw))
    monkeypatch.setattr(registry, "load_causal_lm", lambda s, **kw: loads.append(s) or real_c(s, **kw))
    opts = _opts(data_root)
    inputs = SuiteInputs(opts).prepare()
    assert sorted(loads) == ["tiny-bert", "tiny-causal"]
    store_path = tmp_path / "runs.sqlite"
    assert not store_path.exists()  # nothing above touched a store
    report = run_suite(opts, RunStore(store_path), inputs=inputs)
    assert sorted(loads) == ["tiny-bert", "tiny-causal"]  # no second load for the runs
    assert set(report.components) == {"diffscore", "ar"}
    with pytest.raises(ValueError, match="other options"):
        run_suite(_opts(data_root, limit=3), RunStore(":memory:"), inputs=inputs)


def test_a_family_that_opens_its_run_while_loading_is_refused(data_root):
    from dlmeval.protocols.diffscore.meta_eval import SuiteInputs
    from dlmeval.protocols.diffscore.meta_eval.families import METRIC_FAMILIES

    fam = METRIC_FAMILIES["ar"](SuiteInputs(_opts(data_root)))
    fam.load()  # loading is fine
    with pytest.raises(RuntimeError, match="load\\(\\) may read the data and load models only"):
        fam.run  # noqa: B018


def test_families_use_only_the_public_suite_interface():
    """No family module reaches a private member of its suite (``self.suite._x`` / ``suite._x``)."""
    offenders = []
    for path in sorted(FAMILY_DIR.glob("*.py")) + sorted((FAMILY_DIR.parent / "analyses").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Attribute)
                and node.attr.startswith("_")
                and not node.attr.startswith("__")
            ):
                base = node.value
                name = base.attr if isinstance(base, ast.Attribute) else getattr(base, "id", "")
                if name == "suite" and path.name not in ("suite.py", "inputs.py"):
                    offenders.append(f"{path.name}:{node.lineno} {name}.{node.attr}")
    assert offenders == []


def test_prepare_twice_loads_nothing_more_and_ft_loads_its_base_once(data_root, monkeypatch):
    """The CLI prepares the inputs, ``run_suite`` prepares them again; DiffScore-FT's base model (another model
    than ``--model``) is loaded once for its signature, by the prepare-time instance, and the suite's own family
    instance reads the same load."""
    from dlmeval.models import registry
    from dlmeval.protocols.diffscore.ft import FTOptions
    from dlmeval.protocols.diffscore.meta_eval import Suite, SuiteInputs

    loads = []
    real = registry.load_diffusion
    monkeypatch.setattr(registry, "load_diffusion", lambda s, **kw: loads.append(s) or real(s, **kw))
    inputs = SuiteInputs(
        _opts(data_root, families=("lexical",), ft=True, ft_options=FTOptions(model="tiny-llada"))
    )
    inputs.prepare()
    assert loads == ["tiny-llada"]  # the FT base, for the signature (tiny-bert: no family needs it)
    inputs.prepare()
    ft = Suite(inputs, RunStore(":memory:")).component("ft")  # opens the run: its configuration, its models
    assert ft.run.run_id and loads == ["tiny-llada"]


def test_suite_and_inputs_have_every_member_of_the_family_interface():
    from dlmeval.protocols.diffscore.meta_eval import Suite, SuiteInputs
    from dlmeval.protocols.diffscore.meta_eval.families import SuiteAPI

    members = {n for n in vars(SuiteAPI) if not n.startswith("_")} | set(SuiteAPI.__annotations__)
    assert {"open_run", "model", "dlm", "frame", "opts"} <= members
    for cls in (Suite, SuiteInputs):
        inst_attrs = {"opts", "benchmarks"}  # set in __init__ (or properties)
        missing = sorted(m for m in members if not hasattr(cls, m) and m not in inst_attrs)
        assert missing == [], (cls.__name__, missing)


def test_ar_batch_size_keys_the_run_of_a_family_that_batches(data_root):
    """Which rows share a forward pass moves an AR score's last bits, so another ``ar_batch_size`` is another
    run of the AR family (the DiffScore family's run, which does not read it, stays)."""
    from dlmeval.protocols.diffscore.meta_eval import Suite, SuiteInputs

    def run_ids(bs):
        inputs = SuiteInputs(_opts(data_root, ar_batch_size=bs))
        inputs.prepare()
        suite = Suite(inputs, RunStore(":memory:"))
        return {f: suite.component(f).run.run_id for f in ("ar", "diffscore")}

    a, b = run_ids(8), run_ids(2)
    assert a["ar"] != b["ar"] and a["diffscore"] == b["diffscore"]


def test_the_detokenizer_keys_every_run_and_follows_the_protocol(data_root):
    """--detokenizer: Moses (BARTScore's) by default under --protocol bartscore, Treebank under paper; another
    detokenizer is another run of every family (its texts differ), and Treebank's run ids are those without it."""
    from dlmeval.protocols.diffscore.meta_eval import Suite, SuiteInputs

    assert _opts(data_root).resolved_detokenizer == "treebank"
    assert _opts(data_root, protocol="bartscore").resolved_detokenizer == "moses"
    assert _opts(data_root, protocol="bartscore", detokenizer="treebank").resolved_detokenizer == "treebank"

    def run(detok):
        inputs = SuiteInputs(_opts(data_root, detokenizer=detok, families=("lexical",)))
        inputs.prepare()
        suite = Suite(inputs, RunStore(":memory:"))
        return suite.component("lexical").run, suite.frame("SummEval")

    (tb, f_tb), (mo, f_mo), (default, _) = run("treebank"), run("moses"), run(None)
    assert default.run_id == tb.run_id != mo.run_id
    assert mo.signature.config["detokenizer"] == "moses" and "detokenizer" not in tb.signature.config
    assert (f_tb["candidate_raw"] == f_mo["candidate_raw"]).all()
    assert (f_tb["candidate"] != f_mo["candidate"]).any()


def test_every_family_that_reads_ar_batch_size_is_batched():
    """A family module that reads ``ar_batch_size`` declares ``batched = True`` (else its batch size would be
    missing from its run signature)."""
    import inspect

    from dlmeval.protocols.diffscore.meta_eval import METRIC_FAMILIES

    readers = {
        name
        for name, fam in METRIC_FAMILIES.items()
        if "ar_batch_size" in inspect.getsource(inspect.getmodule(fam))
    }
    assert {"ar", "bartscore", "gptscore", "unieval", "alignscore", "questeval", "geval"} <= readers
    assert sorted(n for n in readers if not METRIC_FAMILIES[n].batched) == []
