"""The README's code blocks run as written (#26): every ```bash and ```python block, in order, in one scratch
directory with a fresh run store, on the models the README names (the embedded default ones). A block may be
skipped only when the line before it says ``<!-- doctest: skip (REASON) -->`` and the reason names a GPU or a
download."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FENCE = re.compile(r"(?P<before>[^\n]*)\n```(?P<lang>bash|python)\n(?P<code>.*?)\n```", re.S)
SKIP = re.compile(r"<!-- doctest: skip \((?P<why>[^)]*)\) -->")


def blocks(text: str) -> list[tuple[str, str, str | None]]:
    """(language, code, skip reason or None) of each fenced bash / python block."""
    out = []
    for m in FENCE.finditer(text):
        skip = SKIP.search(m.group("before"))
        out.append((m.group("lang"), m.group("code"), skip.group("why") if skip else None))
    return out


def test_block_parser_and_skip_rules():
    text = "intro\n```bash\necho a\n```\n<!-- doctest: skip (needs a GPU) -->\n```python\nprint(1)\n```\n"
    assert blocks(text) == [("bash", "echo a", None), ("python", "print(1)", "needs a GPU")]
    got = blocks((ROOT / "README.md").read_text(encoding="utf-8"))
    assert len(got) >= 8 and sum(why is None for _, _, why in got) >= 4
    for _, code, why in got:
        if why is not None:
            assert re.search(r"GPU|download", why), f"skip without a GPU / download reason: {why!r}\n{code}"


@pytest.mark.slow
def test_readme_blocks_run(tmp_path, data_root):
    shim = tmp_path / "bin"
    shim.mkdir()
    (shim / "dlmeval").write_text(f'#!/bin/sh\nexec "{sys.executable}" -m dlmeval "$@"\n')
    (shim / "dlmeval").chmod(0o755)
    (shim / "python").symlink_to(sys.executable)
    env = {
        **os.environ,
        "PATH": f"{shim}{os.pathsep}{os.environ.get('PATH', '')}",
        "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")]).rstrip(
            os.pathsep
        ),
        "DLMEVAL_STORE": str(tmp_path / "runs.sqlite"),
        "DLMEVAL_DATA": str(data_root),
        "HF_HUB_OFFLINE": "1",
        "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "2"),
    }
    work = tmp_path / "work"
    work.mkdir()
    ran = []
    for lang, code, why in blocks((ROOT / "README.md").read_text(encoding="utf-8")):
        if why is not None:
            continue
        cmd = ["bash", "-euo", "pipefail", "-c", code] if lang == "bash" else [sys.executable, "-c", code]
        r = subprocess.run(cmd, cwd=work, env=env, capture_output=True, text=True, timeout=900)
        assert r.returncode == 0, (
            f"README block failed:\n{code}\n--- stdout\n{r.stdout[-3000:]}\n--- stderr\n{r.stderr[-3000:]}"
        )
        ran.append((code, r.stdout, r.stderr))
    assert len(ran) >= 4
    out = "\n".join(o for _, o, _ in ran)
    err = "\n".join(e for _, _, e in ran)
    # the first steps say what they promise: the config chosen, scores beside their texts, runs stored
    assert "config: marginal (no sources given" in err and "config: cond (sources given" in err
    assert "The cat sat on the mat." in out and "Mat the on sat cat the." in out
    assert "sample" in out and "diffscore" in out  # runs list shows both kinds
    assert (work / "samples.csv").read_text().splitlines()[0].split(",").count("text") == 1
    assert (work / "items.csv").is_file()
    assert "WARNING:" not in err


def test_readme_names_every_family_and_every_guide():
    """The models table lists each registered family's spec form and stand-in; the documentation list links every
    guide in docs/ (#36: the newer families and the three pillar guides were missing)."""
    from dlmeval.models.family import FAMILIES

    text = (ROOT / "README.md").read_text()
    for fam in FAMILIES.values():
        form = f"`{fam.prefix}:PATH`" if fam.prefix else f"`{fam.name}`"
        assert form in text, f"README's models table lacks {form}"
        if fam.standin:
            assert f"`{fam.standin}`" in text, f"README's models table lacks the stand-in `{fam.standin}`"
    for guide in sorted((ROOT / "docs").glob("*.md")):
        assert f"(docs/{guide.name})" in text, f"README's documentation list lacks docs/{guide.name}"
