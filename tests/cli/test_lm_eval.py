"""`dlmeval lm-eval`: lm-eval's command line with the dlmeval model, in one process and data parallel under torchrun.

lm-eval is in the dev extra, so `make test` has it; these tests skip without it only outside CI (CI=1 fails).
"""

from __future__ import annotations

import glob
import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

if importlib.util.find_spec("lm_eval") is None:  # pragma: no cover - the dev extra installs it
    if os.environ.get("CI") == "1":
        pytest.fail("lm-eval is not installed (it is in the dev extra)", pytrace=False)
    pytest.skip("lm-eval is not installed", allow_module_level=True)

import torch  # noqa: E402
from lm_eval.api.instance import Instance  # noqa: E402

from dlmeval.cli.main import _split_passthrough, build_parser  # noqa: E402
from dlmeval.errors import InputError  # noqa: E402
from dlmeval.integrations import lm_eval_dist  # noqa: E402
from dlmeval.integrations.lm_eval import DlmevalLM, _batch_size  # noqa: E402
from dlmeval.parallel import ParallelContext  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples" / "lm-eval"
ARC = REPO.parent / "shared" / "data" / "tasks" / "arc_challenge_test.jsonl"
PY = sys.executable
needs_arc = pytest.mark.skipif(not ARC.is_file(), reason=f"{ARC} not present (the shared data directory)")


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK")}
    env.update(OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", DLMEVAL_DIST_TIMEOUT="300", HF_DATASETS_OFFLINE="1")
    if env.get("PYTHONPATH"):
        env["PYTHONPATH"] = os.pathsep.join(
            str(Path(p).resolve()) for p in env["PYTHONPATH"].split(os.pathsep)
        )
    return env


def _run(args: list[str], nproc: int = 1, timeout: float = 900) -> subprocess.CompletedProcess:
    launch = (
        [PY, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={nproc}"]
        if nproc > 1
        else [PY]
    )
    return subprocess.run(
        [*launch, "-m", "dlmeval", "lm-eval", *args],
        cwd=REPO,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def _samples(out: Path) -> dict[tuple[str, int], list]:
    """{(task, doc id): the model's responses} of lm-eval's --log_samples files."""
    got = {}
    for f in glob.glob(str(out / "*" / "samples_*.jsonl")):
        task = re.sub(r"_\d{4}-\d\d-\d\dT.*", "", Path(f).name.removeprefix("samples_"))
        for line in open(f, encoding="utf-8"):
            r = json.loads(line)
            got[(task, r["doc_id"])] = r["resps"]
    return got


# ------------------------------------------------------------------ the command line, in one process
def test_passthrough_arguments_reach_lm_eval_unchanged():
    p = build_parser()
    args = ["--model", "dlmeval", "--tasks", "x", "--help", "--store", "s"]
    assert _split_passthrough(["--json", "lm-eval", *args], p) == (["--json", "lm-eval"], args)
    assert _split_passthrough(["--store", "lm-eval", "lm-eval", "-h"], p) == (
        ["--store", "lm-eval", "lm-eval"],
        ["-h"],
    )
    assert _split_passthrough(["score", "--model", "lm-eval"], p) == (["score", "--model", "lm-eval"], None)


@pytest.mark.slow
@needs_arc
def test_arc_challenge_local_prints_a_results_table(tmp_path):
    """The issue's command (the default model, 8 questions, CPU), with --output_path and --log_samples."""
    r = _run(
        ["--model", "dlmeval", "--model_args", "model=default", "--include_path", "examples/lm-eval"]
        + ["--tasks", "arc_challenge_local", "--limit", "8", "--device", "cpu"]
        + ["--log_samples", "--output_path", str(tmp_path)]
    )
    assert r.returncode == 0, r.stderr[-3000:]
    assert re.search(r"\|arc_challenge_local\|\s*1\|none\s*\|\s*0\|acc\s*\|", r.stdout), r.stdout
    rows = _samples(tmp_path)
    assert len(rows) == 8 and all(len(v) == 4 for v in rows.values())  # 4 choices, one loglikelihood each
    assert "lm-eval rank 0/1: 32 loglikelihood requests" in r.stderr


# ------------------------------------------------------------------ data parallel: 2 ranks = 1 process, bit for bit
@pytest.mark.slow
@needs_arc
def test_two_ranks_give_one_process_numbers_each_answering_half(tmp_path):
    common = [
        "--model",
        "dlmeval",
        "--model_args",
        "model=tiny-llada,steps=4",
        "--include_path",
        "examples/lm-eval",
    ]
    common += ["--tasks", "arc_challenge_local", "arc_challenge_local_gen", "--limit", "6", "--device", "cpu"]
    common += ["--batch_size", "4", "--log_samples"]
    one = _run([*common, "--output_path", str(tmp_path / "one")])
    assert one.returncode == 0, one.stderr[-3000:]
    two = _run([*common, "--output_path", str(tmp_path / "two")], nproc=2)
    assert two.returncode == 0, two.stderr[-3000:]
    a, b = _samples(tmp_path / "one"), _samples(tmp_path / "two")
    assert len(a) == 12 and a == b  # every loglikelihood (as lm-eval writes floats) and every generated text
    table = [line for line in two.stdout.splitlines() if line.startswith("|arc")]
    assert table and table == [line for line in one.stdout.splitlines() if line.startswith("|arc")]
    # each rank answers 3 of the 6 documents: 12 of the 24 loglikelihood requests, 3 of the 6 generations
    for rank in (0, 1):
        assert f"lm-eval rank {rank}/2: 12 loglikelihood requests" in two.stderr
        assert f"lm-eval rank {rank}/2: 3 generate_until requests" in two.stderr
    assert "lm-eval rank 0/1: 24 loglikelihood requests" in one.stderr


# ------------------------------------------------------------------ the pieces
def test_device_defaults_to_cuda_when_present_else_cpu():
    one = ParallelContext()
    want = "cuda" if torch.cuda.is_available() else "cpu"
    assert lm_eval_dist.lm_eval_device(None, one) == want
    assert lm_eval_dist.lm_eval_device("auto", one) == want
    assert lm_eval_dist.lm_eval_device("cpu", one) == "cpu"
    if not torch.cuda.is_available():  # lm-eval's default --device is cuda:0: the CPU here, as with `hf`
        assert lm_eval_dist.lm_eval_device("cuda:0", one) == "cpu"


def test_objects_cross_ranks_as_tagged_json():
    metrics = {("acc", "none"): [1, 0.5, float("nan")], ("f1", "strip"): [("ref", "pred")], "s": {"$x": (1,)}}
    back = lm_eval_dist.decode(json.loads(json.dumps(lm_eval_dist.encode(metrics), allow_nan=True)))
    assert back.keys() == metrics.keys() and back[("f1", "strip")] == [("ref", "pred")]
    assert back["s"] == {"$x": (1,)} and back[("acc", "none")][:2] == [1, 0.5]
    assert lm_eval_dist.gather_object(ParallelContext(), metrics) == [metrics]


def test_batch_size_auto_and_bad_values():
    assert _batch_size("auto") == 16 and _batch_size("auto:4") == 16 and _batch_size("3") == 3
    with pytest.raises(InputError, match="batch_size"):
        _batch_size("many")


def _req(kind, args, doc_id, idx=0):
    return Instance(request_type=kind, doc={}, arguments=args, idx=idx, metadata=("t", doc_id, 1))


def test_a_documents_numbers_do_not_depend_on_the_other_documents():
    """group=doc: a batch never spans documents, so a document scored alone (as on another rank) gets the same
    bits as in the full list."""
    torch.set_num_threads(1)
    lm = DlmevalLM(model="tiny-llada", steps=4, gen_length=4, batch_size=8)
    reqs = [
        _req("loglikelihood", ("the cat sat on the", c), d, i)
        for d in range(3)
        for i, c in enumerate([" mat", " red dog"])
    ]
    reqs += [_req("loglikelihood", ("a much longer context of words here " * 2, " the"), 3)]
    full = lm.loglikelihood(reqs)
    alone = [x for d in range(4) for x in lm.loglikelihood([r for r in reqs if r.doc_id == d])]
    assert full == alone
    assert lm.request_counts["loglikelihood"] == 2 * len(reqs)
    gens = [
        _req("generate_until", (f"the {w}", {"until": ["."], "max_gen_toks": 4}), d)
        for d, w in enumerate(["cat", "a", "dog"])
    ]
    assert lm.generate_until(gens) == [lm.generate_until([g])[0] for g in gens]
    with pytest.raises(InputError, match="group"):
        DlmevalLM(lm=lm.lm, group="rank")


def test_chat_template_is_the_tokenizers_and_refused_without_one():
    lm = DlmevalLM(model="tiny-llada")
    text = lm.apply_chat_template([{"role": "user", "content": "the cat"}])
    assert "the cat" in text and text != "the cat" and lm.tokenizer_name
    assert lm.chat_template() == lm.lm.tokenizer.chat_template
    lm.lm.has_chat_template = False
    with pytest.raises(InputError, match="no chat template"):
        lm.apply_chat_template([{"role": "user", "content": "x"}])
