"""GSM8K: grade-school math, judged by the final number of the generated solution.

The gold answer is the number after ``####`` in the reference solution (normalised by
:func:`dlmeval.data.tasks.normalize_number`). :func:`extract_gsm8k_answer` reads a generation in this order, and
the first rule that finds a number wins:

1. ``#### N`` (the format the prompt asks for): the first ``####`` followed directly by a number (a Markdown
   heading such as ``#### Step 1`` is not one);
2. ``\\boxed{N}`` (the last one);
3. an explicit statement, the last one: ``The answer is N``, ``Final answer: N``, ``answer = N``
   (``**``, ``$`` and spaces may come between);
4. the last number in the text.

Numbers may carry a sign, a ``$``, thousands separators and decimals (``$1,234.50`` -> ``1234.5``); a number
directly followed by a letter is still read (``42nd`` -> 42). Comparison is on the canonical strings, so
``18.00`` equals ``18``.
"""

from __future__ import annotations

import re
from typing import Any

from dlmeval.data.tasks import GSM8KItem, load_gsm8k, normalize_number
from dlmeval.tasks.base import Prompt, Task, fill

# The robustness paper, App. D (straight quotes; the PDF's line breaks are not part of the message).
GSM8K_TEMPLATE = (
    "Solve the following math problem step by step. At the end, write the final answer as a number after "
    "'####'.\n\nProblem: {question}\nSolution:"
)

_NUM = r"[-+]?\$?\s?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?|[-+]?\$?\.\d+"
_NUMBER = re.compile(_NUM)
_HASHES = re.compile(r"####\s*(?:\*\*)?\s*(" + _NUM + ")")
_BOXED = re.compile(r"\\boxed\s*\{([^{}]*(?:\{[^{}]*\}[^{}]*)*)\}")
_STATED = re.compile(
    r"(?i:answer)\s*(?:is|:|=)?\s*[:=]?\s*(?:\*\*|\$|\\\(|\s)*(" + _NUM + ")",
)


def _canon(raw: str) -> str | None:
    return normalize_number(raw.replace(" ", ""))


def extract_gsm8k_answer(text: str) -> str | None:
    """The final numeric answer of a generated solution in canonical form, or None (module docstring)."""
    m = _HASHES.search(text)
    if m:
        return _canon(m.group(1))
    boxed = _BOXED.findall(text)
    if boxed:
        nums = _NUMBER.findall(boxed[-1].replace("\\$", "$").replace("\\!", ""))
        if nums:
            return _canon(nums[0])
    stated = _STATED.findall(text)
    if stated:
        return _canon(stated[-1])
    nums = _NUMBER.findall(text)
    return _canon(nums[-1]) if nums else None


class GSM8K(Task):
    name = "gsm8k"
    template = GSM8K_TEMPLATE
    data_kind = "gsm8k"
    chance = 0.0
    max_new_tokens = 512
    stop = ("\nProblem:",)

    def load(self, data_dir=None, *, path=None) -> list[GSM8KItem]:
        return load_gsm8k(data_dir, path=path)

    def prompt(self, item: GSM8KItem) -> Prompt:
        return fill(self.template, question=item.question)

    def extract(self, output: str, item: Any = None) -> str | None:
        return extract_gsm8k_answer(output)

    def gold(self, item: GSM8KItem) -> str:
        return item.gold

    def is_correct(self, item: GSM8KItem, output: str) -> bool:
        pred = extract_gsm8k_answer(output)
        return pred is not None and pred == item.gold

    def attack_target(self, item: GSM8KItem, *, chat: bool) -> str:
        return self._spaced(f"#### {item.gold}", chat)  # the answer format the prompt asks for


GSM8K_TASK = GSM8K()
