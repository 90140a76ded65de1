import json
import os
import re

import pytest
import torch

from dlmeval.data.paths import data_dir

#: pytester runs the CI hook below on a generated test file (tests/test_conftest.py)
pytest_plugins = ["pytester"]

#: torch's own thread count for this process (what a subprocess of the tests starts with)
_TORCH_THREADS = torch.get_num_threads()


@pytest.fixture(scope="session")
def data_root():
    """The shared data directory (``../shared/data`` beside the checkout, or DLMEVAL_DATA)."""
    return data_dir()


def write_tiny_encoder(d) -> str:
    """A 2-layer BERT encoder directory over the tiny word vocabulary (stands in for MiniLM in the suite tests);
    weights drawn under ``fork_rng`` from seed 0."""
    import torch
    from transformers import BertConfig, BertModel

    from dlmeval.models.tiny import tiny_tokenizer, tiny_vocab_size

    tiny_tokenizer("bert").save_pretrained(str(d))
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        cfg = BertConfig(
            vocab_size=tiny_vocab_size(),
            hidden_size=32,
            num_hidden_layers=2,
            num_attention_heads=2,
            intermediate_size=64,
            max_position_embeddings=128,
        )
        BertModel(cfg).save_pretrained(str(d))
    return str(d)


@pytest.fixture(scope="session")
def tiny_encoder(tmp_path_factory):
    return write_tiny_encoder(tmp_path_factory.mktemp("tiny-encoder"))


def _toml_value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int | float):
        return repr(v)
    if isinstance(v, str | os.PathLike):
        return json.dumps(str(v))  # a JSON string is a TOML basic string
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{k} = {_toml_value(x)}" for k, x in v.items()) + " }"
    return "[" + ", ".join(_toml_value(x) for x in v) + "]"


def tiny_care_spec(
    name: str,
    *,
    tasks: dict[str, dict] | None,
    diffusion: tuple[str, ...] = ("tiny-llada",),
    sources: tuple[str, ...] = ("webtext",),
    corpora: dict[str, dict] | None = None,
    n_prompts: int = 2,
    steps: int = 8,
    temperature: float = 0.0,
    seeds: tuple[int, ...] = (1,),
    bootstrap_resamples: int = 100,
    n_reference: int = 4,
    reference_words: int = 8,
    self_bleu_max: int = 4,
    downstream_steps: int | None = None,
) -> str:
    """The TOML text of a tiny Care spec (preset "tiny", evaluator tiny-causal, the AR featurizer, strategies none
    vs high_entropy at one temperature): ``tasks`` are the ``[downstream]`` tasks (name: inline table; None: no
    ``[downstream]`` section), ``corpora``
    the ``[corpora.<name>]`` tables; the sweep and the headline sample with ``steps`` and ``temperature``, the
    downstream tasks greedily with ``downstream_steps`` (default ``steps``)."""
    sections: dict[str, dict] = {
        "models": {"diffusion": diffusion, "evaluator": "tiny-causal"},
        "generation": {"n_prompts": n_prompts, "batch_size": n_prompts, "sources": sources},
        **{f"corpora.{k}": v for k, v in (corpora or {}).items()},
        "sweep": {"strategies": ("none", "high_entropy"), "steps": (steps,), "temperatures": (temperature,),
                  "seeds": seeds},
        "headline": {"baseline": "none", "strategy": "high_entropy", "steps": steps, "temperature": temperature,
                     "bootstrap_resamples": bootstrap_resamples},
        "metrics": {"featurizer": "ar", "n_reference": n_reference, "reference_words": reference_words,
                    "self_bleu_max": self_bleu_max},
        "downstream": {"strategies": ("none",), "steps": (steps if downstream_steps is None else downstream_steps,),
                       "temperatures": (0.0,), "seeds": (1,), **(tasks or {})},
    }  # fmt: skip
    if tasks is None:
        del sections["downstream"]
    lines = [f"name = {_toml_value(name)}", "seed = 0", 'preset = "tiny"']
    for section, keys in sections.items():
        lines += ["", f"[{section}]", *(f"{k} = {_toml_value(v)}" for k, v in keys.items())]
    return "\n".join(lines) + "\n"


@pytest.fixture(scope="module")
def peaky():
    """A tiny LLaDA-like model (left padding) with a sharpened head, so log-probs vary strongly with the context
    (one per test module: tests may not share a model whose weights another module could change)."""
    import torch

    from dlmeval.models import tiny_model

    m = tiny_model("llada", seed=1)
    with torch.no_grad():
        m.module.get_output_embeddings().weight.mul_(25.0)
    return m


@pytest.fixture(autouse=True)
def _torch_threads_restored():
    """Every test leaves torch's intra-op thread count as torch chose it at start: the count is in every run id
    (#32), so a test that sets it (``--threads``, ``torch.set_num_threads``) must not give later tests' in-process
    runs other ids than the subprocesses they compare with (those start with torch's own choice)."""
    yield
    if torch.get_num_threads() != _TORCH_THREADS:
        torch.set_num_threads(_TORCH_THREADS)


#: skip reasons that mean a package is missing that `make test` promises: the system packages scripts/system-deps.sh
#: installs (bubblewrap / libseccomp for the sandbox, WordNet, Chromium, Perl's XML::Parser for ROUGE-1.5.5) and
#: lm-eval (the dev extra)
PROMISED_PACKAGE_SKIP = re.compile(
    r"no OS isolation|wordnet|chromium is not installed|perl module .* is missing|no perl on PATH"
    r"|could not import 'lm_eval'",
    re.IGNORECASE,
)


def under_ci(env=None) -> bool:
    """CI as scripts/system-deps.sh reads it (.ci/run sets CI=1)."""
    return (os.environ if env is None else env).get("CI", "") in ("1", "true", "TRUE", "True", "yes")


def promised_package_failure(reason: str, env=None) -> str | None:
    """The failure message for a skip that under CI must fail (a package `make test` installs is missing), else
    None."""
    if under_ci(env) and PROMISED_PACKAGE_SKIP.search(reason or ""):
        return f"under CI a missing package that make test installs fails instead of skipping: {reason}"
    return None


def _fail_promised_skip(rep) -> None:
    if rep.skipped and not hasattr(rep, "wasxfail") and isinstance(rep.longrepr, tuple):
        message = promised_package_failure(str(rep.longrepr[2]))
        if message:
            rep.outcome = "failed"
            rep.longrepr = message


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """Under CI a test skipped because a promised package is missing is reported failed, with the skip's reason."""
    outcome = yield
    _fail_promised_skip(outcome.get_result())


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector):
    """The same for a module skipped whole (``pytest.importorskip`` / ``allow_module_level``): a collection error."""
    outcome = yield
    _fail_promised_skip(outcome.get_result())


@pytest.fixture
def public_dir():
    """A world-writable directory under /tmp (like /tmp itself): only the sandbox's own rules keep code out
    (tests/sandbox, tests/bad_inputs/test_exec.py)."""
    import shutil
    import tempfile

    d = tempfile.mkdtemp(prefix="dlmeval-public-", dir="/tmp")
    os.chmod(d, 0o777)
    yield d
    shutil.rmtree(d, ignore_errors=True)
