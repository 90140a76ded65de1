"""TriviaQA answer matching: substring (the paper, App. J) vs whole words (dlmeval's named option), measured on
the same generations.

    python benchmarks/bench_triviaqa_matching.py [--model default-ar] [--n 200] [--max-new-tokens 32]

Generates greedy answers to the first n TriviaQA items with the robustness prompt (App. D) through the model's
chat template, and judges every answer both ways; prints the two accuracies and the answers they disagree on.
"""

from __future__ import annotations

import argparse
import json
import time

from dlmeval.models import load_causal_lm
from dlmeval.tasks import TRIVIAQA, alias_match, chat_formatter


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="default-ar")
    ap.add_argument("--n", type=int, default=200)
    ap.add_argument("--max-new-tokens", type=int, default=32)
    ap.add_argument("--batch-size", type=int, default=8)
    a = ap.parse_args()
    model = load_causal_lm(a.model, device="cpu")
    items = TRIVIAQA.items(limit=a.n)
    wrap = chat_formatter(model)
    prompts = [wrap(TRIVIAQA.user_message(it).text) for it in items]
    t0 = time.perf_counter()
    outs = model.generate(
        prompts, max_new_tokens=a.max_new_tokens, stop=TRIVIAQA.stop, item_ids=[it.item_id for it in items],
        batch_size=a.batch_size,
    )  # fmt: skip
    secs = time.perf_counter() - t0
    sub = [alias_match(o, it.answers, whole_word=False) for o, it in zip(outs, items)]
    word = [alias_match(o, it.answers, whole_word=True) for o, it in zip(outs, items)]
    diff = [
        {"item": it.item_id, "output": o, "aliases": list(it.answers)[:6], "substring": s, "word": w}
        for it, o, s, w in zip(items, outs, sub, word)
        if s != w
    ]
    print(json.dumps({
        "model": a.model, "n": len(items), "max_new_tokens": a.max_new_tokens, "seconds": round(secs, 1),
        "accuracy_substring": sum(sub) / len(items), "accuracy_word": sum(word) / len(items),
        "disagreements": len(diff), "examples": diff[:12],
    }, indent=1, ensure_ascii=False))  # fmt: skip


if __name__ == "__main__":
    main()
