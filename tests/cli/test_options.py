"""Option groups declared once (#24): the flags several commands share come from one function of
:mod:`dlmeval.cli.options` each, with one help, default and choices everywhere; the estimator's choices are the
estimator's names; a metric family's options are declared on the family class and reach ``SuiteOptions``."""

from __future__ import annotations

import argparse
import dataclasses
import re
from pathlib import Path

import pytest

from dlmeval.cli.main import build_parser

CLI = Path(__file__).resolve().parents[2] / "src" / "dlmeval" / "cli"
RUNTIME_COMMANDS = {
    "score",
    "sample",
    "care",
    "robust",
    "meta-eval",
    "train",
    "check-model",
    "demo",
    "leaderboard",
}


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(sub.choices)


@pytest.fixture(scope="module")
def commands() -> dict[str, argparse.ArgumentParser]:
    return _subparsers(build_parser())


def _action(parser: argparse.ArgumentParser, flag: str) -> argparse.Action | None:
    return next((a for a in parser._actions if flag in a.option_strings), None)


def _facts(a: argparse.Action) -> tuple:
    """What a user sees of an option: its flags, type, default, choices (in order), help, metavar, nargs."""
    return (
        tuple(a.option_strings),
        type(a).__name__,
        a.type,
        a.default,
        None if a.choices is None else tuple(a.choices),
        a.help,
        a.metavar,
        a.nargs,
        a.const,
    )


def _having(commands, flag: str) -> dict[str, tuple]:
    return {name: _facts(a) for name, p in commands.items() if (a := _action(p, flag)) is not None}


@pytest.mark.parametrize(
    ("flag", "expected"),
    [
        ("--device", RUNTIME_COMMANDS),
        ("--dtype", RUNTIME_COMMANDS),
        ("--trust-remote-code", RUNTIME_COMMANDS),
        ("--allow-download", RUNTIME_COMMANDS),
        ("--preset", {"score", "meta-eval"}),
        ("--fast", {"score", "meta-eval"}),
        ("--masks", {"score", "meta-eval"}),
        ("--rates", {"score", "meta-eval"}),
        ("--scheme", {"score", "meta-eval"}),
        ("--weighting", {"score", "meta-eval", "train"}),
    ],
)
def test_a_shared_flag_is_the_same_option_in_every_command(commands, flag, expected):
    got = _having(commands, flag)
    assert set(got) == expected
    shared = {n: f for n, f in got.items() if n != "train"}  # train's --weighting is its loss (elbo / mean)
    assert len(set(shared.values())) == 1, {n: f[5] for n, f in shared.items()}


def test_the_estimator_group_is_the_one_of_score_and_meta_eval(commands):
    """score and meta-eval hold exactly the options `add_estimator_group` and the scoring batching declare."""
    from dlmeval.cli.options import add_batching_args, add_estimator_group

    ref = argparse.ArgumentParser()
    add_batching_args(add_estimator_group(ref), "scoring")
    for a in ref._actions[1:]:  # [0] is --help
        for cmd in ("score", "meta-eval"):
            assert _facts(_action(commands[cmd], a.option_strings[0])) == _facts(a), (cmd, a.option_strings)


def test_the_estimator_choices_are_the_estimators_names(commands):
    """--preset / --scheme / --weighting offer what the estimator accepts, in the order of its lists, and each
    choice is a setting EstimatorSpec takes (a choice the estimator refused would fail here)."""
    from dlmeval.scoring.masks import MASKING
    from dlmeval.scoring.spec import PRESETS, WEIGHT_FORMULA, EstimatorSpec, resolve_estimator

    p = commands["score"]
    assert tuple(_action(p, "--preset").choices) == ("default", *PRESETS)
    assert tuple(_action(p, "--scheme").choices) == tuple(MASKING)
    assert tuple(_action(p, "--weighting").choices) == tuple(WEIGHT_FORMULA)
    for preset in _action(p, "--preset").choices:
        resolve_estimator(preset)
    for scheme in _action(p, "--scheme").choices:
        for weighting in _action(p, "--weighting").choices:
            EstimatorSpec(scheme=scheme, weighting=weighting)


def test_seed_evaluator_device_and_batching_vary_only_where_the_command_differs(commands):
    from dlmeval.cli.options import RUN_SEED_HELP, SPEC_SEED_HELP

    seeds = _having(commands, "--seed")
    assert set(seeds) == RUNTIME_COMMANDS | {"perturb"}
    for name, f in seeds.items():
        from_spec = name in ("care", "robust")  # their --seed replaces the spec's
        assert f[2:4] == (int, None if from_spec else 0) and f[5] == (
            SPEC_SEED_HELP if from_spec else RUN_SEED_HELP
        )
    ev = _having(commands, "--evaluator-device")
    assert set(ev) == {"care", "robust", "meta-eval"}
    assert {(f[3], f[6]) for f in ev.values()} == {(None, "DEVICE")}
    assert len({f[5].split(" (default: --device)")[1] for f in ev.values()}) == 1
    tokens = _having(commands, "--max-tokens")
    assert set(tokens) == {"score", "meta-eval", "sample", "care"}
    assert tokens["score"] == tokens["meta-eval"] and tokens["sample"] == tokens["care"]
    rows = _having(commands, "--batch-size")
    assert rows["score"] == rows["meta-eval"]
    assert _action(commands["sample"], "--batch-size").default == 16
    assert _action(commands["care"], "--batch-size").default is None


# the flags declared in dlmeval.cli.options, and the commands allowed a flag of the same name with another meaning
SHARED = (
    "--device",
    "--evaluator-device",
    "--dtype",
    "--trust-remote-code",
    "--allow-download",
    "--seed",
    "--preset",
    "--fast",
    "--masks",
    "--rates",
    "--scheme",
    "--weighting",
    "--batch-size",
    "--max-tokens",
)
OTHER_MEANING = {("train.py", "--batch-size"), ("train.py", "--weighting")}


def test_shared_flags_are_declared_in_cli_options_only():
    declared = re.compile(r"""add_argument\(\s*["'](--[\w-]+)["']""")
    for path in sorted(CLI.glob("*.py")):
        found = set(declared.findall(path.read_text(encoding="utf-8")))
        if path.name == "options.py":
            assert set(SHARED) <= found
            continue
        again = {f for f in found & set(SHARED) if (path.name, f) not in OTHER_MEANING}
        assert not again, f"{path.name} declares {sorted(again)} again: use dlmeval.cli.options"


# ------------------------------------------------------------------------------------------ metric families
def test_family_options_are_suite_options_fields_with_their_defaults(commands):
    """Each option a family declares sets a SuiteOptions field; left out, the field keeps its default."""
    from dlmeval.cli import meta_eval
    from dlmeval.protocols.diffscore.meta_eval import SuiteOptions
    from dlmeval.protocols.diffscore.meta_eval.families import family_options

    fields = {f.name for f in dataclasses.fields(SuiteOptions)}
    declared = family_options()
    assert {c.name for c, _ in declared} >= {
        "embedding",
        "bartscore",
        "unieval",
        "alignscore",
        "questeval",
        "geval",
    }
    flags = [o.flag for _, o in declared]
    assert len(flags) == len(set(flags))
    for _, o in declared:
        assert o.dest in fields, o
        assert _action(commands["meta-eval"], o.flag).dest == o.dest
    args = build_parser().parse_args(["meta-eval"])
    assert meta_eval._options(args) == dataclasses.replace(
        meta_eval._options(args),
        **{o.dest: SuiteOptions.__dataclass_fields__[o.dest].default for _, o in declared},
    )
    # the command line names none of them: they are the families'
    source = (CLI / "meta_eval.py").read_text(encoding="utf-8")
    for _, o in declared:
        assert o.flag not in source and f"args.{o.dest}" not in source, o.flag


def test_an_option_declared_on_a_family_class_reaches_suite_options():
    from dlmeval.cli import meta_eval
    from dlmeval.protocols.diffscore.meta_eval.families import (
        METRIC_FAMILIES,
        FamilyOption,
        MetricFamily,
        register_family,
    )

    @register_family
    class ToyFamily(MetricFamily):
        name = "toy-options"
        kind = "meta-eval-toy-options"
        default = False
        options_title = "Toy"
        options = (
            FamilyOption("--toy-layer", field="bertscore_layer", type=int, metavar="N", help="a toy layer"),
            FamilyOption("--toy-no-idf", field="moverscore_idf", action="store_false", help="toy: no IDF"),
        )

    try:
        parser = build_parser()
        args = parser.parse_args(
            ["meta-eval", "--toy-layer", "7", "--toy-no-idf", "--unieval-fact-model", "F"]
        )
        opts = meta_eval._options(args)
        assert (opts.bertscore_layer, opts.moverscore_idf, opts.unieval_fact_model) == (7, False, "F")
        help_text = _subparsers(parser)["meta-eval"].format_help()
        assert "Toy (the toy-options family; off by default: --metrics ... toy-options)" in help_text
        assert "--toy-layer N" in help_text
        # not given: the SuiteOptions defaults
        opts = meta_eval._options(parser.parse_args(["meta-eval"]))
        assert (opts.bertscore_layer, opts.moverscore_idf, opts.unieval_fact_model) == (None, True, None)
    finally:
        METRIC_FAMILIES.remove(ToyFamily.name)


def test_ft_options_take_the_training_defaults_of_finetune_config():
    from dlmeval.protocols.diffscore.ft import FTOptions
    from dlmeval.train.finetune import FinetuneConfig

    train = {f.name: f.default for f in dataclasses.fields(FinetuneConfig)}
    shared = [f for f in dataclasses.fields(FTOptions) if f.name in train]
    assert {f.name for f in shared} >= {"rank", "alpha", "dropout", "steps", "batch_size", "lr", "chat"}
    for f in shared:
        assert f.default == train[f.name], f.name
