"""Web-text cloze: which of four continuations follows a passage. A task the embedded models answer above chance
(ARC-Challenge is at chance for 22M-135M-parameter models), for the robustness demo (``robust-mini``).

Items are built from the shipped web-text stand-in (``reference-text/webtext_test.jsonl``, the Care prompt source),
in file order, from every document of at least :data:`CONTEXT_WORDS` + :data:`CONTINUATION_WORDS` whitespace words:
the context is its first :data:`CONTEXT_WORDS` words, the gold continuation the next :data:`CONTINUATION_WORDS`; the
three distractors are the continuations at the same word offset of the next three eligible documents (cyclically),
and the gold option's position is the item's index modulo 4, so every letter is gold equally often. No draw is
random: the items are a function of the file. Likelihood mode scores each option as the continuation of the
passage (the highest score wins); generation mode asks for the letter with ARC's template layout. Perturbations
apply to the passage only.
"""

from __future__ import annotations

from dlmeval.data.tasks import ARCItem, load_webtext_reference
from dlmeval.errors import InputError
from dlmeval.tasks.arc import ARCChallenge
from dlmeval.tasks.base import Prompt, fill

CONTEXT_WORDS = 24
CONTINUATION_WORDS = 6

CLOZE_TEMPLATE = (
    "Which continuation follows the text? Reply with just the letter (A, B, C, or D).\n\nText: {question}\n"
    "Choices:\n  A) {A}\n  B) {B}\n  C) {C}\n  D) {D}\nAnswer:"
)


def cloze_items(texts: list[str], label: str = "webtext_cloze") -> list[ARCItem]:
    """The cloze items of ``texts`` (module docstring); ``ARCItem`` with ``query`` = the passage."""
    n_words = CONTEXT_WORDS + CONTINUATION_WORDS
    docs = [w for w in (t.split() for t in texts) if len(w) >= n_words]
    if len(docs) < 4:
        raise InputError(f"{label}: needs at least 4 texts of {n_words}+ words, found {len(docs)}")
    conts = [" ".join(w[CONTEXT_WORDS:n_words]) for w in docs]
    items = []
    for i, words in enumerate(docs):
        others = [conts[(i + k) % len(docs)] for k in (1, 2, 3)]
        gold = i % 4
        choices = others[:gold] + [conts[i]] + others[gold:]
        items.append(ARCItem(f"{label}/{i}", " ".join(words[:CONTEXT_WORDS]), tuple(choices), gold))
    return items


class WebTextCloze(ARCChallenge):
    name = "webtext_cloze"
    template = CLOZE_TEMPLATE
    likelihood_template = "{question}"
    data_kind = "webtext"  # its identity in a run configuration: the shipped web-text file and its digest
    chance = 0.25
    max_new_tokens = 16
    stop = ("\nText:",)

    def load(self, data_dir=None, *, path=None) -> list[ARCItem]:
        return cloze_items([r.text for r in load_webtext_reference(data_dir, path=path)], self.name)

    def from_rows(self, rows) -> list[ARCItem]:
        raise InputError(f"task {self.name} is built from the shipped web-text file only; give no source")

    def prompt(self, item: ARCItem) -> Prompt:
        return fill(self.template, question=item.query, **dict(zip("ABCD", item.choices)))

    def likelihood_prompt(self, item: ARCItem) -> Prompt:
        return fill(self.likelihood_template, question=item.query)


WEBTEXT_CLOZE = WebTextCloze()
