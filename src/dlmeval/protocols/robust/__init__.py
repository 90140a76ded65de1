"""The robustness protocol: a DLM and an AR model as a pair, clean and under every natural-noise condition.

Usage (not run here: the demo spec takes minutes)::

    from dlmeval.protocols.robust import load_spec, run_robust
    from dlmeval.store import RunStore
    res = run_robust(load_spec("robust-demo"), RunStore("runs.sqlite"), out_dir="robust-out/robust-demo")
    res.tables["comparison"]


Modules (the paper: Sec. 3 and 6, App. E-J; docs/robustness.md maps every table and figure to its file):

* :mod:`.spec`       the spec: dataclasses whose fields carry their validation, read by ``spec_io.read_dataclass``;
                     ``PAPER_CONDITIONS`` (the frozen 32); ``with_models`` (CLI model overrides)
* :mod:`.keys`       what keys a record: a model's run config (budgets, decoding settings and whether the sampler
                     applies them, task options, data identity) and the record keys inside the run
* :mod:`.responders` one DLM and one AR implementation of "generate with confidences" and "score choices"
                     (judged span = scored span)
* :mod:`.evaluate`   the models and cells of a spec, and the per-item records, in fixed chunks, resumable
* :mod:`.plan`       the spec resolved once (``resolve`` -> ``RobustPlan``: models, cells, probes, task objects, the
                     task data read once), what ``--plan`` prints and ``run_robust`` executes
* :mod:`.probes`     the probe registry and phases (model phase: DLMs first, then AR models; tables phase after
                     all models); ``probe_ipm``, ``probe_dgcg``, ``probe_linear``, ``probe_mechanism``
* :mod:`.tables`     every table as a pure function of the records
* :mod:`.output`     Markdown / CSV / figures, stored tables read back
* :mod:`.run`        ``run_robust``

Seeds. Perturbations use the perturbation seed as given (``dlmeval perturb --seed S --item-id ID`` shows what the
model saw); the sampler, the AR sampler and the DiffScore masks derive theirs from the run seed
(``derive_seed(seed, "robust-...", task, condition, perturbation seed)``, per item inside). DiffScore masks are
keyed by the option text, so every condition scores an option under the same masks (common random numbers).
"""

from __future__ import annotations

# the probes of the paper: each module registers its class in probes.PROBES (a leaf registry that imports no
# probe); importing any part of this package runs this line first (#35)
from dlmeval.protocols.robust import probe_dgcg, probe_ipm, probe_linear, probe_mechanism  # noqa: F401
from dlmeval.protocols.robust.evaluate import ModelEntry, model_entries, plan_cells
from dlmeval.protocols.robust.keys import (
    PROTOCOL_VERSION,
    data_identity,
    items_digest,
    model_config,
    record_key,
)
from dlmeval.protocols.robust.output import (
    TABLE_ORDER,
    TITLES,
    load_tables,
    markdown,
    plot_reliability,
    write_tables,
)
from dlmeval.protocols.robust.plan import RobustOptions, RobustPlan, resolve
from dlmeval.protocols.robust.probes import PROBES, Probe, ProbeContext, register_probe
from dlmeval.protocols.robust.responders import ARResponder, DLMResponder, Responder, responder
from dlmeval.protocols.robust.run import RUN_KIND, SPEC_KIND, RobustResult, run_robust
from dlmeval.protocols.robust.spec import (
    MODES,
    PAPER_CONDITIONS,
    ARGenSpec,
    CalibrationSpec,
    LikelihoodSpec,
    PairSpec,
    ProbeSpec,
    RobustSpec,
    SamplerSpec,
    StatsSpec,
    TaskSpec,
    load_spec,
    parse_spec,
    with_models,
)
from dlmeval.protocols.robust.tables import all_tables, calibration_tables, table_accuracy
from dlmeval.protocols.spec_io import shipped_spec_path
from dlmeval.seeding import derive_seed

__all__ = [
    "MODES",
    "PAPER_CONDITIONS",
    "PROBES",
    "PROTOCOL_VERSION",
    "RUN_KIND",
    "SPEC_KIND",
    "TABLE_ORDER",
    "TITLES",
    "ARGenSpec",
    "ARResponder",
    "CalibrationSpec",
    "DLMResponder",
    "LikelihoodSpec",
    "ModelEntry",
    "PairSpec",
    "Probe",
    "ProbeContext",
    "ProbeSpec",
    "Responder",
    "RobustOptions",
    "RobustPlan",
    "RobustResult",
    "RobustSpec",
    "SamplerSpec",
    "StatsSpec",
    "TaskSpec",
    "all_tables",
    "calibration_tables",
    "data_identity",
    "derive_seed",
    "items_digest",
    "load_spec",
    "load_tables",
    "markdown",
    "model_config",
    "model_entries",
    "parse_spec",
    "plan_cells",
    "plot_reliability",
    "record_key",
    "register_probe",
    "resolve",
    "responder",
    "run_robust",
    "shipped_spec_path",
    "table_accuracy",
    "with_models",
    "write_tables",
]
