"""The DiffScore pillar's wing: everything that turns DiffScore scores into the paper's tables.

* :mod:`~dlmeval.protocols.diffscore.paper_protocols` the paper's correlation protocols (segment, system,
  summary-level, DARR pairs) over score frames
* :mod:`~dlmeval.protocols.diffscore.meta_eval` the meta-evaluation suite (`dlmeval meta-eval`): metric families,
  benchmarks, the run, the tables
* :mod:`~dlmeval.protocols.diffscore.ft` DiffScore-FT adapters (LoRA fine-tuning), with
  :mod:`~dlmeval.protocols.diffscore.ft_data` its training set (`--ft-train`)
* :mod:`~dlmeval.protocols.diffscore.analyses` the paper's analyses (`meta-eval --analysis NAME`)

The Care and robustness wings are :mod:`dlmeval.protocols.care` and :mod:`dlmeval.protocols.robust`.
"""
