"""The fixed cost of commands that do nothing heavy (#36), side by side with ``python -c "import torch"``.

    .venv/bin/python benchmarks/bench_startup.py            # about a minute

Each command runs ``--rounds`` times in a fresh interpreter (a throw-away store, so ``runs list`` reads an empty
one); reported: the minimum CPU seconds (user + system of the child, which load on the machine inflates less than
wall time) and that figure as a ratio to the torch import. Commands that import neither torch nor transformers
stay far below 1.0 (``models`` too: it imports every family module to read the registry, and the family modules
import torch only where a model is built or run).
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile

COMMANDS = {
    "import torch": [sys.executable, "-c", "import torch"],
    "dlmeval --help": [sys.executable, "-m", "dlmeval", "--help"],
    "dlmeval runs list": [sys.executable, "-m", "dlmeval", "runs", "list"],
    "dlmeval data list": [sys.executable, "-m", "dlmeval", "data", "list"],
    "dlmeval models": [sys.executable, "-m", "dlmeval", "models"],
}


def cpu_seconds(cmd: list[str], env: dict[str, str]) -> float:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "DLMEVAL_STORE": os.path.join(tmp, "s.sqlite")}
        best = {name: min(cpu_seconds(cmd, env) for _ in range(a.rounds)) for name, cmd in COMMANDS.items()}
    base = best["import torch"]
    print(f"{'command':<20} {'CPU s (min of ' + str(a.rounds) + ')':>18} {'/ import torch':>15}")
    for name, s in best.items():
        print(f"{name:<20} {s:>18.2f} {s / base:>15.2f}")


if __name__ == "__main__":
    main()
