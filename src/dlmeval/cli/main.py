"""The ``dlmeval`` command line.

Each sub-command lives in its own module of this package, exposing ``register(subparsers)`` that adds its parser
and sets ``func=run`` (a callable taking the parsed args and returning an exit code or None). Modules are listed in
``COMMANDS`` in the order ``--help`` shows them.

Errors of type :class:`dlmeval.errors.DlmevalError` (bad input, missing model, malformed data) print one line and
exit with code 2; ``--debug`` shows the traceback instead.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import importlib.util
import io
import logging
import os
import shlex
import signal
import sys
import threading

from dlmeval.cli.options import add_code_change_arg, apply_threads
from dlmeval.errors import DlmevalError

# (module, group) in help order: the three pillars first, then utilities.
COMMANDS: tuple[tuple[str, str], ...] = (
    ("score", "scoring"),
    ("meta_eval", "scoring"),
    ("care", "sampling"),
    ("sample", "sampling"),
    ("robust", "robustness"),
    ("perturb", "robustness"),
    ("train", "utilities"),
    ("models", "utilities"),
    ("check_model", "utilities"),
    ("runs", "utilities"),
    ("data", "utilities"),
    ("report", "utilities"),
    ("leaderboard", "utilities"),
    ("demo", "utilities"),
    ("lm_eval", "integrations"),
)

EPILOG = """\
pillars:
  scoring      score, meta-eval           DiffScore: masked-reconstruction quality scores
  sampling     care, sample               Care: compute-aware remasking sampler and protocol
  robustness   robust, perturb            perturbations, RDI/AURDI, calibration, IPM, D-GCG, probes
utilities      train, models, check-model, runs, data, report, leaderboard, demo
integrations   lm-eval                    lm-evaluation-harness with --model dlmeval (its arguments unchanged)

Every result is printed with its run signature; runs are stored in SQLite (--store PATH, or DLMEVAL_STORE).
"""


class _VersionAction(argparse.Action):
    """``--version``: the code version every run signature records (from git in a checkout), computed only when
    asked (it may run git)."""

    def __call__(self, parser, namespace, values, option_string=None):
        from dlmeval.store.code import code_version

        print(f"dlmeval {code_version()}")  # on stdout, as argparse's version action prints
        parser.exit()


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="dlmeval",
        description="Evaluation toolkit for diffusion language models.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--version", action=_VersionAction, nargs=0, help="show the version runs record and exit")
    p.add_argument("--debug", action="store_true", help="show tracebacks")
    p.add_argument("--json", action="store_true", help="machine-readable JSON output on stdout")
    p.add_argument(
        "--store", default=None, help="run store (SQLite file); default: DLMEVAL_STORE or user data dir"
    )
    p.add_argument("--no-progress", action="store_true", help="no progress bars")
    p.add_argument(
        "-q",
        "--quiet",
        action="store_true",
        help="print nothing but errors: no results on stdout, no warnings, no progress bars (runs are still stored; "
        "the exit code tells success)",
    )
    p.add_argument(
        "--include",
        action="append",
        default=[],
        metavar="FILE.py",
        help="load a plugin file that registers families, strategies, perturbations, ... (repeatable; installed "
        "plugins: the `dlmeval.plugins` entry points)",
    )
    p.add_argument(
        "--sandbox-unsafe",
        "--sandbox-same-user",
        dest="sandbox_unsafe",
        action="store_true",
        help="accept the risk of running generated code (HumanEval) where the sandbox's start-up probes found a "
        "required isolation layer missing (it refuses otherwise; the run records it)",
    )
    p.add_argument(
        "--adapter-any-base",
        action="store_true",
        help="apply a LoRA adapter (--adapter, --ft-adapter) to a base other than the one its dlmeval_train.json "
        "records (refused otherwise; the run's model identity records it)",
    )
    add_code_change_arg(p)
    from dlmeval import plugins

    if plugins.LOADED:
        p.epilog += "\nplugins: " + ", ".join(f"{n} ({src})" for n, src in plugins.LOADED) + "\n"
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    for mod, _group in COMMANDS:
        name = f"dlmeval.cli.{mod}"
        if importlib.util.find_spec(name) is None:
            continue
        importlib.import_module(name).register(sub)
    return p


def command_reader():
    """A reader of recorded command lines for :func:`dlmeval.store.lease.resume_hint`: given the words after
    ``dlmeval``, whether their command takes ``--threads`` and whether they state it (any form argparse accepts:
    ``--threads 2``, ``--threads=2``, an abbreviation), as this parser reads them; None where they do not parse
    (options of another version, a plugin's command not loaded). The parser is built once per reader."""
    parser = build_parser()

    def read(argv: list[str]) -> tuple[bool, bool] | None:
        own, _rest = _split_passthrough(argv, parser)  # another program's arguments are not dlmeval's
        try:
            with contextlib.redirect_stderr(io.StringIO()), contextlib.redirect_stdout(io.StringIO()):
                args = parser.parse_args(own)
        except SystemExit:  # argparse's way of saying it does not parse (or --help / --version)
            return None
        if not getattr(args, "func", None):
            return None
        return hasattr(args, "threads"), getattr(args, "threads", None) is not None

    return read


def usable_cpus() -> int:
    """The cores this process may run on: its CPU affinity, capped by a cgroup v2 CPU quota (``cpu.max``, as a
    container's ``--cpus`` sets it) when one is lower. OpenMP and torch read the affinity but not the quota."""
    n = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    try:
        quota, period = open("/sys/fs/cgroup/cpu.max").read().split()[:2]
        if quota != "max":
            n = min(n, max(1, int(int(quota) // int(period))))
    except (OSError, ValueError):
        pass
    return max(1, n)


def thread_policy(environ: dict[str, str] | os._Environ = os.environ) -> None:
    """Set before torch loads, unless the user set them: OpenMP threads sleep when idle instead of spinning
    (``OMP_WAIT_POLICY=PASSIVE``: on a machine that other jobs share, spinning threads burnt about 3x the CPU for the
    same numbers), numpy's OpenBLAS threads spin 2^4 cycles before they sleep instead of its default 2^28
    (``OPENBLAS_THREAD_TIMEOUT=4``, read when numpy loads: a BLAS-bound loop beside busy processes burnt 2-5x less
    CPU with it; the demo's stages, torch-bound, did not move: docs/benchmarks.md), and a CPU quota below the affinity
    caps the thread count (``OMP_NUM_THREADS``). None changes a number by itself (the same threads split the same
    work); the thread count a run used is in its signature."""
    environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "4")
    n = usable_cpus()
    affinity = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else n
    if n < affinity:
        environ.setdefault("OMP_NUM_THREADS", str(n))


#: commands whose arguments belong to another program: everything after the command's name is passed unchanged
PASSTHROUGH = ("lm-eval",)


def _split_passthrough(
    argv: list[str], parser: argparse.ArgumentParser
) -> tuple[list[str], list[str] | None]:
    """``(dlmeval's arguments, the rest)`` when the command is a pass-through one (``dlmeval [OPTIONS] lm-eval
    ARGS...``), else ``(argv, None)``. argparse cannot hand a sub-command arguments that look like options."""
    takes_value = {
        s for a in parser._actions if a.option_strings and a.nargs is None and a.const is None
        for s in a.option_strings
    }  # fmt: skip
    i = 0
    while i < len(argv) and argv[i].startswith("-"):
        i += 2 if argv[i] in takes_value else 1
    if i < len(argv) and argv[i] in PASSTHROUGH:
        return argv[: i + 1], argv[i + 1 :]
    return argv, None


def _load_plugins(argv: list[str], debug: bool) -> None:
    """Installed plugins and ``--include`` files, before the parser is built (they may add choices)."""
    from dlmeval import plugins

    try:
        plugins.load_plugins()
        for path in plugins.includes_in(argv):
            plugins.include(path)
    except DlmevalError as e:
        if debug:
            raise
        sys.stderr.write(f"dlmeval: error: {e}\n")
        raise SystemExit(2) from None


def main(argv: list[str] | None = None) -> int:
    if (
        "torch" not in sys.modules
    ):  # too late to matter once torch is loaded (a caller that imported it first)
        thread_policy()
    argv = list(sys.argv[1:] if argv is None else argv)
    given = list(argv)
    cut = next((argv.index(c) for c in PASSTHROUGH if c in argv), len(argv))  # another program's arguments
    _load_plugins(argv[:cut], "--debug" in argv)
    parser = build_parser()
    argv, rest = _split_passthrough(argv, parser)
    args = parser.parse_args(argv)
    # the run record's command line: what this call was given (main(argv) in a notebook or a test is not sys.argv)
    args.command_line = shlex.join(["dlmeval", *given])
    if rest is not None:
        args.passthrough_args = rest
    # offline by default: nothing below may reach a hub unless a command passes --allow-download
    if not getattr(args, "allow_download", False):
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
    if not getattr(args, "func", None):
        parser.print_help()
        return 0
    from dlmeval.cli.common import console_logging

    console_logging(args.debug)
    # set on every call: an earlier --quiet main() in the same process must not silence this one
    logging.getLogger("dlmeval").setLevel(
        logging.ERROR if args.quiet else logging.DEBUG if args.debug else logging.INFO
    )
    if args.quiet:
        args.no_progress = True
    if args.sandbox_unsafe:
        from dlmeval.sandbox import UNSAFE_ENV

        os.environ[UNSAFE_ENV] = "1"
    if args.allow_code_change:
        from dlmeval.store.code import ALLOW_ENV

        os.environ[ALLOW_ENV] = "1"
    if args.adapter_any_base:
        from dlmeval.models.adapters import ANY_BASE_ENV

        os.environ[ANY_BASE_ENV] = "1"
    if not args.debug:
        # through the environment, read when transformers is first imported: importing it here would cost every
        # command (``runs list`` included) the seconds of a torch import
        logging.getLogger("transformers").setLevel(logging.ERROR)
        os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
        os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    from dlmeval import parallel

    # a kill (SIGTERM) records the run as interrupted, as Ctrl-C does; the handler is put back at the end. Not in
    # a job of several ranks: its launcher's SIGTERM must end a rank waiting in a collective at once (the run's
    # lease then shows it interrupted)
    old_term = None
    single = os.environ.get("WORLD_SIZE", "1").strip() in ("", "1")
    if single and threading.current_thread() is threading.main_thread():
        old_term = signal.signal(signal.SIGTERM, _terminate)
    try:
        return _run(args, parallel)
    finally:
        if old_term is not None:
            signal.signal(signal.SIGTERM, old_term)


def _run(args, parallel) -> int:
    from dlmeval.store import lease

    lease.forget()  # only the runs this command writes are marked failed / interrupted when it stops
    who = ""
    try:
        # under torchrun / accelerate launch / srun: join the group (a single process otherwise)
        apply_threads(args)
        par = parallel.init_from_env()
        who = f"rank {par.rank}: " if par.distributed else ""
        # --quiet silences this command only: a caller that runs main() in-process (tests, a notebook) gets its
        # stdout back afterwards; a rank other than 0 stays silent for the life of the process
        quiet_restore = sys.stdout if (par.is_main and args.quiet) else None
        if not par.is_main or args.quiet:
            args.no_progress = True  # rank 0 draws the job's bars and prints the results
            sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - restored below under --quiet
        rc = None
        try:
            rc = args.func(args)
        finally:
            parallel.shutdown(completed=rc is not None)
            if quiet_restore is not None:
                sys.stdout.close()
                sys.stdout = quiet_restore
        sys.stdout.flush()  # inside the try: a closed pipe shows up here when stdout is buffered
    except DlmevalError as e:
        _record_stop("failed", str(e))
        if args.debug:
            raise
        # one write of the whole line: the ranks of a job share one stderr, and print's separate write of the
        # newline let two ranks' lines run together
        sys.stderr.write(f"dlmeval: error: {who}{e}\n")
        sys.stderr.flush()
        return 2
    except KeyboardInterrupt as e:
        _record_stop("interrupted", str(e) or "interrupted (SIGINT, Ctrl-C)")
        print("dlmeval: interrupted; a rerun of the same command resumes where it stopped", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # the reader went away (`dlmeval runs list | head -1`): end quietly; point stdout at devnull so the
        # interpreter's final flush does not raise again (the recipe of the Python docs, "Note on SIGPIPE")
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
    except Exception as e:  # a bug: the traceback follows, and the run says it failed and why
        _record_stop("failed", f"{type(e).__name__}: {e}")
        raise
    return int(rc or 0)


def _record_stop(status: str, error: str) -> None:
    """Mark the runs this process was writing ``failed`` / ``interrupted`` with ``error``
    (:func:`dlmeval.store.lease.stop_all`); never hides the error being reported."""
    try:
        from dlmeval.store import lease
        from dlmeval.store.db import _now

        lease.stop_all(status, error, _now())
    except Exception:  # noqa: BLE001 - the store may be what failed
        pass


def _terminate(signum, frame) -> None:
    raise KeyboardInterrupt(f"interrupted (signal {signal.Signals(signum).name})")


if __name__ == "__main__":
    sys.exit(main())
