"""Plugins: an installed package's ``dlmeval.plugins`` entry point and ``--include FILE.py`` register things every
command can use and ``--help`` / ``dlmeval models`` list; ``--quiet`` silences any command."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PLUGIN = textwrap.dedent(
    """
    from dlmeval.robustness.perturb import register_perturbation


    def register():
        @register_perturbation("char", "shout", rates=(0.5,), description="upper-case every letter", eligible="letters")
        def _shout(text, rate, rng, params):
            elig = [i for i, c in enumerate(text) if c.islower()]
            return [(i, i + 1, text[i].upper()) for i in elig], len(elig), len(elig)
    """
)


def _dlmeval(args, pythonpath=(), timeout=300):
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE")}
    paths = [*map(str, pythonpath), *filter(None, [env.get("PYTHONPATH")])]
    env["PYTHONPATH"] = os.pathsep.join(str(Path(p).resolve()) for p in paths)
    return subprocess.run(
        [sys.executable, "-m", "dlmeval", *args], env=env, capture_output=True, text=True, timeout=timeout
    )


@pytest.mark.slow
def test_an_installed_plugin_package_is_usable_from_the_cli(tmp_path):
    pkg = tmp_path / "src"
    (pkg / "dlmeval_shout").mkdir(parents=True)
    (pkg / "dlmeval_shout" / "__init__.py").write_text(PLUGIN)
    (pkg / "pyproject.toml").write_text(
        textwrap.dedent(
            """
            [build-system]
            requires = ["setuptools>=61"]
            build-backend = "setuptools.build_meta"
            [project]
            name = "dlmeval-shout"
            version = "0.1"
            [project.entry-points."dlmeval.plugins"]
            shout = "dlmeval_shout:register"
            [tool.setuptools]
            packages = ["dlmeval_shout"]
            """
        )
    )
    target = tmp_path / "site"
    pip = [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation", "--target"]
    r = subprocess.run([*pip, str(target), str(pkg)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    run = _dlmeval(["perturb", "--type", "char.shout", "--rate", "0.5", "ab cd"], pythonpath=[target])
    assert run.returncode == 0, run.stderr
    assert "AB CD" in run.stdout
    helped = _dlmeval(["--help"], pythonpath=[target])
    assert "plugins: shout (entry point dlmeval_shout:register)" in helped.stdout
    listed = _dlmeval(["models"], pythonpath=[target])
    assert "plugins: shout" in listed.stdout
    # without the package the type is unknown: the plugin, not something else, made it work
    bare = _dlmeval(["perturb", "--type", "char.shout", "--rate", "0.5", "ab cd"])
    assert bare.returncode == 2 and "shout" in bare.stderr


def test_include_file_quiet_and_bad_include(tmp_path):
    f = tmp_path / "shout.py"
    f.write_text(PLUGIN + "\nregister()\n")
    args = ["--include", str(f), "perturb", "--type", "char.shout", "--rate", "0.5", "ab"]
    r = _dlmeval(args)
    assert r.returncode == 0 and "AB" in r.stdout, r.stderr
    q = _dlmeval(["--quiet", *args])
    assert q.returncode == 0 and q.stdout == "" and q.stderr == ""
    bad = _dlmeval(["--include", str(tmp_path / "missing.py"), "models"])
    assert bad.returncode == 2 and "--include" in bad.stderr and "Traceback" not in bad.stderr
    broken = tmp_path / "broken.py"
    broken.write_text("raise RuntimeError('boom')\n")
    b = _dlmeval(["--include", str(broken), "models"])
    assert b.returncode == 2 and "boom" in b.stderr and "Traceback" not in b.stderr


def test_register_plugin_from_python(tmp_path):
    import dlmeval
    from dlmeval.robustness.perturb import PERTURBATIONS, Perturbation

    f = tmp_path / "shout2.py"
    f.write_text(PLUGIN + "\nregister()\n")
    try:
        dlmeval.register_plugin(f)
        assert Perturbation("shout", "char", 0.5).apply("ab", seed=0, item_id="x") == "AB"
    finally:
        PERTURBATIONS.remove("char.shout")


def test_quiet_silences_one_command_not_the_next(tmp_path, capsys):
    """--quiet (global, or leaderboard's own spelling) ends with the command: a later main() in the same process
    prints again and logs warnings again."""
    import logging

    from dlmeval.cli.main import main

    store = str(tmp_path / "s.sqlite")
    assert main(["--store", store, "--quiet", "runs", "list"]) == 0
    assert capsys.readouterr().out == ""
    assert main(["--store", store, "runs", "list"]) == 0
    assert capsys.readouterr().out != ""
    assert logging.getLogger("dlmeval").level == logging.INFO
