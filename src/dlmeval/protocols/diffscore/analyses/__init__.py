"""The analyses of DiffScore paper section 6 and appendices J, H, I, N: ``dlmeval meta-eval --analysis NAME``.

One module per group of analyses, each registering its producers in :mod:`.registry` (the CLI's choices come
from there):

==================  ==================================================================  ==========================
analysis            what                                                                module
==================  ==================================================================  ==========================
positional          positional bias of token scores, DiffScore against AR               :mod:`.bias`
directional         forward / reverse consistency on seeded pairs                       :mod:`.bias`
adversarial         the PMI decomposition on adversarial SummEval variants              :mod:`.adversarial`
ablation            K, T, weighting and mask-scheme ablations                           :mod:`.ablation`
timestep-matrix     correlation of S(t_k) with each human dimension (Table 13, Fig. 2)  :mod:`.profiles`
learned-weights     timestep weights by 5-fold CV against uniform (Table 14, Fig. 6)    :mod:`.profiles`
tiers               mean profile per human-score tier (Fig. 7)                          :mod:`.profiles`
latency             seconds per output of every metric family (section 6.5, App. H)     :mod:`.latency`
prompt-templates    correlations under seven prompt templates (Table 11)                :mod:`.templates`
families            one benchmark with two diffusion models (section 6.4, App. N)       :mod:`.families`
==================  ==================================================================  ==========================

Every analysis writes its per-item values into a store run (kind ``meta-eval-analysis``) chunk by chunk, so a rerun
resumes, and returns small summary tables. The pure computations take frames / arrays and return frames, so the
tests check them against hand computations.

The names below stay importable from this package (read lazily, so the registry can be imported without pandas).
"""

from __future__ import annotations

from dlmeval.lazy import lazy_exports
from dlmeval.protocols.diffscore.analyses.registry import analyses, run_analysis

_EXPORTS = {
    "positional_stats": "bias",
    "reversal_pairs": "bias",
    "consistency_stats": "bias",
    "RELATIONS": "bias",
    "disfluent": "adversarial",
    "adversarial_set": "adversarial",
    "pmi_table": "adversarial",
    "ABLATIONS": "ablation",
}


_lazy, __dir__ = lazy_exports(__name__, _EXPORTS)


def __getattr__(name: str):
    if name == "ANALYSES":  # read again each time: the registry may grow after the first read
        return tuple(a.name for a in analyses())
    return _lazy(name)


__all__ = ["ANALYSES", "analyses", "run_analysis", *_EXPORTS]
