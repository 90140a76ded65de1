"""Reports people look at: a self-contained HTML report and the Care leaderboard, built from the run store.

Usage (not run here: it reads the user's store and writes files)::

    from dlmeval.report import build_report, write_leaderboard
    build_report(RunStore(), None, "report.html")                   # every run in the store
    write_leaderboard(RunStore(), "leaderboard")                     # .html, .md and .csv
    from dlmeval.report import figures                               # the figures, for notebooks
    figures.interaction_plot(run.get_table("mauve_temperature"))     # a matplotlib Figure


Sections are registered renderers keyed by (run kind, table name): see :mod:`dlmeval.report.registry` and
``docs/report.md`` for the tables and columns each one reads.
"""

from dlmeval.report.html import build_report, collect, run_figures
from dlmeval.report.leaderboard import leaderboard_frame, write_leaderboard
from dlmeval.report.registry import REGISTRY, Omit, Section, register, renderers

# the shipped sections register themselves on import, in this order (a run's sections keep it); registry.py is the
# leaf they import and imports none of them (#35)
# isort: off
from dlmeval.report import sections_robustness, sections_sampling, sections_scoring  # noqa: F401
from dlmeval.report import sections_analyses  # noqa: F401
# isort: on

__all__ = [
    "REGISTRY",
    "Omit",
    "Section",
    "build_report",
    "collect",
    "leaderboard_frame",
    "register",
    "renderers",
    "run_figures",
    "write_leaderboard",
]
