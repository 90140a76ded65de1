"""No silent truncation in the AR family: a cut conditioning text is on the item, in the run's warnings and in the
table labels."""

from dlmeval.store import RunStore


def test_cut_contexts_are_warned_and_marked(tmp_path, data_root):
    from dlmeval.protocols.diffscore.meta_eval import Suite, SuiteOptions, run_suite
    from dlmeval.protocols.diffscore.meta_eval.work import read_results

    opts = SuiteOptions(
        families=("ar",), ar="tiny-causal", benchmarks=("SummEval",), limit=1, bootstrap=0, progress=False,
        data_dir=str(data_root),
    )  # fmt: skip
    store = RunStore(tmp_path / "s.sqlite")
    rep = run_suite(opts, store)
    run = Suite(opts, store).component("ar").run
    res = read_results(run, "SummEval/")
    cut = {k: v for k, v in res.items() if "warning" in v}
    # SummEval's articles are longer than tiny-causal's 128 tokens: every s2h item conditions on a cut source,
    # no marginal item has a conditioning text
    s2h = [k for k in res if k.endswith("|ar:s2h")]
    assert s2h and all(k in cut for k in s2h)
    assert not any(k.endswith("|ar:mar") for k in cut)
    assert all("cut by" in v["warning"] for v in cut.values())
    assert any("SummEval ar:s2h: conditioning text cut" in w for w in run.warnings())
    assert all("contexts cut: see warnings" in lab for lab in rep.results["label"] if lab.startswith("AR "))
