"""HellaSwag and BIG-Bench Hard: the Care paper's log-likelihood sanity checks (§4.6: "evaluated via
log-likelihood scoring rather than sampling"), in lm-evaluation-harness's formats. Neither ships a stand-in: a spec
gives their source (a hub id or a local dataset, :mod:`dlmeval.data.rows`).

HellaSwag (lm-eval ``hellaswag``): context = the preprocessed ``activity_label: ctx_a ctx_b``, continuations =
``" " + ending``; the highest score wins (lm-eval's ``acc``; with mean log-probabilities, close to ``acc_norm``).
BBH (lm-eval ``bbh_zeroshot``): context = ``Q: {input}\\nA:``; the continuations are the distinct targets of the
item's subtask (:func:`dlmeval.data.rows.bbh_items`: dlmeval's reading of a log-likelihood BBH). In generation
mode the letters template (HellaSwag) or the zero-shot prompt (BBH, exact match on the first line) is used.
"""

from __future__ import annotations

from typing import Any

from dlmeval.errors import InputError
from dlmeval.robustness.perturb import Perturbation
from dlmeval.tasks.arc import extract_choice
from dlmeval.tasks.base import Prompt, Task, UserMessage, fill, perturb_prompt

HELLASWAG_TEMPLATE = (
    "Choose the most plausible continuation. Reply with just the letter (A, B, C, or D).\n\n"
    "Context: {question}\nChoices:\n  A) {A}\n  B) {B}\n  C) {C}\n  D) {D}\nAnswer:"
)
BBH_TEMPLATE = "Q: {question}\nA:"


class _Choice(Task):
    multiple_choice = True
    max_new_tokens = 32
    stop = ("\nQ:",)

    def load(self, data_dir=None, *, path=None) -> list[Any]:
        raise InputError(
            f"task {self.name} ships no stand-in: give its source (a hub id such as "
            f"{self._hub()} with --allow-download, or a local dataset directory / parquet / JSONL file)"
        )

    def _hub(self) -> str:
        from dlmeval.data.rows import HUB

        return HUB[self.data_kind][0]

    def gold(self, item) -> int:
        return item.gold

    def context(self, item) -> Prompt:
        return fill("{question}", question=item.query if hasattr(item, "query") else item.input)

    def choice_request(
        self, item, perturbation: Perturbation | None = None, *, seed: int = 0, scope: str = "prompt",
        chat: bool = False,
    ) -> tuple[UserMessage, list[str]]:  # fmt: skip
        msg = perturb_prompt(self.context(item), perturbation, seed=seed, item_id=item.item_id, scope=scope)
        sep = "" if chat else " "
        return msg, [sep + c for c in item.choices]


class HellaSwag(_Choice):
    name = "hellaswag"
    data_kind = "hellaswag"
    template = HELLASWAG_TEMPLATE
    chance = 0.25

    def prompt(self, item) -> Prompt:
        if len(item.choices) != 4:
            raise InputError(
                f"{item.item_id}: the HellaSwag template needs 4 endings, found {len(item.choices)}"
            )
        return fill(self.template, question=item.query, **dict(zip("ABCD", item.choices)))

    def extract(self, output: str, item=None) -> int | None:
        return extract_choice(output, item.choices if item is not None else None)

    def is_correct(self, item, output: str) -> bool:
        return self.extract(output, item) == item.gold

    def attack_target(self, item, *, chat: bool) -> str:
        return self._spaced("ABCD"[item.gold], chat)


class BBH(_Choice):
    name = "bbh"
    data_kind = "bbh"
    template = BBH_TEMPLATE
    chance = 0.0

    def from_rows(self, rows) -> list[Any]:
        from dlmeval.data.rows import bbh_items

        sub = (getattr(rows, "provenance", None) or {}).get("name") or "bbh"
        return bbh_items(rows, subtask=str(sub), label=self.name)

    def context(self, item) -> Prompt:
        return fill(self.template, question=item.input)

    def prompt(self, item) -> Prompt:
        return self.context(item)

    def extract(self, output: str, item=None) -> str:
        lines = output.strip().splitlines()
        return lines[0].strip() if lines else ""

    def is_correct(self, item, output: str) -> bool:
        return self.extract(output, item) == item.target

    def attack_target(self, item, *, chat: bool) -> str:
        return self._spaced(item.target, chat)


HELLASWAG = HellaSwag()
BBH_TASK = BBH()

__all__ = ["BBH", "BBH_TASK", "BBH_TEMPLATE", "HELLASWAG", "HELLASWAG_TEMPLATE", "HellaSwag"]
