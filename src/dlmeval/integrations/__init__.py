"""Bridges to other evaluation frameworks (optional dependencies; import the submodule you need).

* :mod:`dlmeval.integrations.lm_eval`: dlmeval's diffusion LMs as the lm-evaluation-harness model ``dlmeval``
  (``pip install 'dlmeval[lm-eval]'``).
"""
