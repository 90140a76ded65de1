"""Natural perturbations: the 32 conditions, rates, determinism, edge cases, and `dlmeval perturb`.

Rate tolerance. The number of edits is ``floor(r*E) + Bernoulli(frac(r*E))`` for ``E`` eligible units, so every
single draw must change within 1 unit of ``r*E`` (local shuffle: within 2, because a swap moves two words at once)
and the mean over many seeds must approach ``r*E`` (checked to 0.1 units over 400 seeds: the SD of that mean is
at most 0.5 / sqrt(400) = 0.025). The counts are recomputed here from the texts, not read from the result.
"""

from __future__ import annotations

import dataclasses
import json
import re
import unicodedata
from collections import Counter

import pytest

from dlmeval.cli.main import main
from dlmeval.errors import InputError
from dlmeval.robustness.perturb import (
    CONDITIONS,
    HOMOGLYPHS,
    KEYBOARD_NEIGHBOURS,
    NUMBER_WORDS,
    STOPWORDS,
    Perturbation,
    conditions,
    is_content_word,
    resolve_type,
    words,
)
from dlmeval.robustness.wordnet import wordnet_available

HAVE_WORDNET = wordnet_available()
needs_wordnet = pytest.mark.skipif(
    not HAVE_WORDNET, reason="WordNet missing: apt-get install -y wordnet-base (CI installs it)"
)

TEXT = (
    "Janet's ducks lay sixteen eggs per day. She eats three for breakfast every morning and bakes muffins for "
    "her friends every day with four. She sells the remainder at the farmers' market daily for two dollars per "
    "fresh duck egg. How much money does she make every day at the market? The astronomer observes that the "
    "planet rotates faster after a meteorite impact, which is the most likely effect of this increase in rotation."
)
EDGE = [
    "",
    "a",
    "word",
    "   ",
    "42",
    "Ωμέγα",
    "日本語のテキスト",
    "héllo wörld ñandú",
    "🙂 emoji 🙂",
    "a\nb\tc",
    "''",
    "...",
]


def word_list(text):
    return [text[s:e] for s, e in words(text)]


def is_subsequence(short, long):
    it = iter(long)
    return all(ch in it for ch in short)


def changed_units(p: Perturbation, src: str, out: str) -> int:
    """Edits counted from the texts alone."""
    t = p.type_key
    if t in ("char.keyboard", "char.homoglyph"):
        assert len(out) == len(src)
        return sum(a != b for a, b in zip(src, out))
    if t == "char.transposition":
        assert len(out) == len(src) and Counter(out) == Counter(src)
        diff = [i for i, (a, b) in enumerate(zip(src, out)) if a != b]
        assert len(diff) % 2 == 0
        pairs = list(zip(diff[::2], diff[1::2]))
        for i, j in pairs:  # adjacent letters swapped
            assert j == i + 1 and src[i] == out[j] and src[j] == out[i]
        return len(pairs)
    if t == "char.deletion":
        assert is_subsequence(out, src)
        return len(src) - len(out)
    if t == "char.insertion":
        assert is_subsequence(src, out)
        return len(out) - len(src)
    sw, ow = word_list(src), word_list(out)
    if t == "word.deletion":
        assert is_subsequence(ow, sw)
        return len(sw) - len(ow)
    if t == "word.repetition":
        return len(ow) - len(sw)
    if t in ("word.shuffle", "word.synonym"):
        assert len(ow) == len(sw)
        return sum(a != b for a, b in zip(sw, ow))
    raise AssertionError(t)


def eligible_units(p: Perturbation, text: str) -> int:
    """Eligible units recomputed from the definitions in the module docstring."""
    t = p.type_key
    if t == "char.transposition":
        return sum(
            1
            for i in range(len(text) - 1)
            if text[i].isalpha() and text[i + 1].isalpha() and text[i] != text[i + 1]
        )
    if t in ("char.deletion", "char.insertion"):
        return sum(c.isalpha() for c in text)
    if t == "char.keyboard":
        return sum(c.isascii() and c.isalpha() for c in text)
    if t == "char.homoglyph":
        return sum(c in HOMOGLYPHS for c in text)
    if t == "word.deletion":
        return sum(is_content_word(w) for w in word_list(text))
    if t == "word.synonym":
        from dlmeval.robustness.wordnet import synonyms

        return sum(is_content_word(w) and bool(synonyms(w)) for w in word_list(text))
    return len(word_list(text))


def active_conditions():
    return [c for c in CONDITIONS if HAVE_WORDNET or c.name != "synonym"]


# ---------------------------------------------------------------------------------------------------- conditions


def test_the_32_conditions_of_the_paper():
    assert len(CONDITIONS) == 32 == len({c.key for c in CONDITIONS})
    char = [c for c in CONDITIONS if c.level == "char"]
    word = [c for c in CONDITIONS if c.level == "word"]
    assert len(char) == 20 and len(word) == 12
    assert {c.name for c in char} == {"transposition", "deletion", "insertion", "keyboard", "homoglyph"}
    assert {c.name for c in word} == {"deletion", "shuffle", "synonym", "repetition"}
    assert sorted({c.rate for c in char}) == [0.05, 0.10, 0.20, 0.30]
    assert sorted({c.rate for c in word}) == [0.10, 0.20, 0.30]
    assert CONDITIONS[0].key == "char.transposition@0.05"
    assert Perturbation.of("keyboard", 0.1).key == "char.keyboard@0.10"
    assert [c.key for c in conditions(["shuffle"])] == [
        "word.shuffle@0.10",
        "word.shuffle@0.20",
        "word.shuffle@0.30",
    ]


def test_perturbations_are_frozen_self_describing_values():
    p = Perturbation.from_key("word.shuffle@0.20")
    assert p == Perturbation("shuffle", "word", 0.2) and hash(p) == hash(Perturbation("shuffle", "word", 0.2))
    assert p.params == (("window", 3),)
    with pytest.raises(dataclasses.FrozenInstanceError):
        p.rate = 0.3  # type: ignore[misc]
    d = p.describe()
    assert d["key"] == "word.shuffle@0.20" and d["level"] == "word" and d["rate"] == 0.2
    assert d["params"] == {"window": 3} and "window" in d["description"]
    assert all(Perturbation.from_key(c.key) == c for c in CONDITIONS)
    assert Perturbation.of("shuffle", 0.1, window=4).key == "word.shuffle@0.10[window=4]"


@pytest.mark.parametrize(
    "make, msg",
    [
        (lambda: Perturbation.of("keyboard", 1.5), "rate must be a number in"),
        (lambda: Perturbation.of("keyboard", -0.1), "rate must be a number in"),
        (lambda: Perturbation.of("typo", 0.1), "unknown perturbation type 'typo'"),
        (lambda: Perturbation.of("deletion", 0.1), "ambiguous"),
        (lambda: Perturbation("keyboard", "word", 0.1), "unknown perturbation word.keyboard"),
        (lambda: Perturbation.from_key("char.keyboard"), "looks like"),
        (lambda: Perturbation.from_key("char.keyboard@abc"), "bad rate"),
        (lambda: Perturbation.of("shuffle", 0.1, window=1), "window must be an integer >= 2"),
        (lambda: Perturbation.of("keyboard", 0.1).apply(None, 0, "x"), "apply to text"),
        (lambda: Perturbation.of("keyboard", 0.1).apply_span("abc", 2, 5, 0, "x"), "does not lie inside"),
    ],
)
def test_bad_input_is_rejected_clearly(make, msg):
    with pytest.raises(InputError, match=msg):
        make()


def test_resolve_type_accepts_bare_and_qualified_names():
    assert resolve_type("homoglyph").type_key == "char.homoglyph"
    assert resolve_type("word.deletion").type_key == "word.deletion"


# ---------------------------------------------------------------------------------------------------- rates


@pytest.mark.parametrize("p", active_conditions(), ids=lambda c: c.key)
def test_each_condition_changes_r_of_its_eligible_units(p):
    res = p.perturb(TEXT, 0, "item-1")
    e = eligible_units(p, TEXT)
    assert res.eligible == e > 0
    got = changed_units(p, TEXT, res.text)
    assert got == res.changed
    tol = 2 if p.name == "shuffle" else 1
    assert abs(got - p.rate * e) < tol, (got, p.rate * e)


@pytest.mark.parametrize(
    "key", ["char.keyboard@0.05", "char.deletion@0.10", "word.repetition@0.10", "char.homoglyph@0.30"]
)
def test_expected_count_is_exactly_r_times_eligible(key):
    # a one-line question: r*E is small and fractional, the edit count is unbiased across seeds
    p = Perturbation.from_key(key)
    text = "What is the capital of France?"
    e = eligible_units(p, text)
    counts = [changed_units(p, text, p.apply(text, s, "q")) for s in range(400)]
    assert set(counts) <= {int(p.rate * e), int(p.rate * e) + 1}
    assert abs(sum(counts) / len(counts) - p.rate * e) < 0.1


def test_rate_zero_is_the_identity_and_rate_one_edits_every_unit():
    for t in ("keyboard", "homoglyph", "char.deletion", "insertion", "repetition", "word.deletion"):
        assert Perturbation.of(t, 0.0).apply(TEXT, 1, "x") == TEXT
    text = "What is the capital of France?"
    assert Perturbation.of("word.deletion", 1.0).apply(text, 0, "x") == "What is the of?"
    assert Perturbation.of("repetition", 1.0).apply("the cat, sat.", 0, "x") == "the the cat cat, sat sat."
    assert Perturbation.of("char.deletion", 1.0).apply(text, 0, "x") == "     ?"
    h = Perturbation.of("homoglyph", 1.0).apply(text, 0, "x")
    assert all(b in HOMOGLYPHS[a] if a in HOMOGLYPHS else a == b for a, b in zip(text, h))


def test_paper_example_word_deletion_keeps_single_spaces():
    p = Perturbation.of("word.deletion", 0.5)
    text = "What is the capital of France?"  # two content words: exactly one is deleted
    outs = {p.apply(text, s, "x") for s in range(50)}
    assert outs == {"What is the of France?", "What is the capital of?"}


# ---------------------------------------------------------------------------------------------------- semantics


@pytest.mark.parametrize("seed", range(5))
def test_keyboard_uses_qwerty_neighbours_and_keeps_case(seed):
    text = "The Quick Brown Fox Jumps Over The Lazy Dog"
    out = Perturbation.of("keyboard", 0.3).apply(text, seed, "k")
    for a, b in zip(text, out):
        if a != b:
            assert b.lower() in KEYBOARD_NEIGHBOURS[a.lower()] and a.isupper() == b.isupper()


def test_keyboard_map_is_symmetric_and_covers_the_alphabet():
    assert sorted(KEYBOARD_NEIGHBOURS) == list("abcdefghijklmnopqrstuvwxyz")
    for k, nbs in KEYBOARD_NEIGHBOURS.items():
        assert k not in nbs and len(set(nbs)) == len(nbs)
        for n in nbs:
            assert k in KEYBOARD_NEIGHBOURS[n], (k, n)
    assert set(KEYBOARD_NEIGHBOURS["g"]) == set("tyfhvb")


def test_homoglyph_map_lists_only_cyrillic_or_greek_look_alikes():
    for src, targets in HOMOGLYPHS.items():
        assert src.isascii() and src.isalpha()
        for t in targets:
            name = unicodedata.name(t)
            assert name.startswith(("CYRILLIC", "GREEK")), name
            assert t != src and not t.isascii()
            assert (
                t.isupper() == src.isupper() or t.lower() == t.upper()
            )  # case matches (lunate sigma: no case)


@pytest.mark.parametrize("seed", range(5))
def test_homoglyphs_come_only_from_the_map(seed):
    out = Perturbation.of("homoglyph", 0.5).apply(TEXT, seed, "h")
    for a, b in zip(TEXT, out):
        if a != b:
            assert b in HOMOGLYPHS[a]


def test_insertion_inserts_lowercase_ascii_letters():
    src = TEXT
    out = Perturbation.of("insertion", 0.3).apply(src, 4, "i")
    inserted = Counter(out) - Counter(src)
    assert sum(inserted.values()) == len(out) - len(src) and all(
        c in "abcdefghijklmnopqrstuvwxyz" for c in inserted
    )


def test_deletion_only_removes_letters():
    out = Perturbation.of("char.deletion", 0.3).apply(TEXT, 4, "d")
    removed = Counter(TEXT) - Counter(out)
    assert all(c.isalpha() for c in removed)
    assert re.sub(r"[^\W\d_]", "", TEXT) == re.sub(r"[^\W\d_]", "", out)  # punctuation, digits, spaces intact


def test_word_deletion_keeps_stopwords_and_numbers():
    text = "She eats three eggs and 16 muffins for the 2 children of the village"
    for s in range(20):
        out = Perturbation.of("word.deletion", 0.3).apply(text, s, "w")
        removed = Counter(word_list(text)) - Counter(word_list(out))
        assert all(is_content_word(w) for w in removed)
        for keep in ("three", "16", "2", "the", "and"):
            assert keep in word_list(out)
        assert "  " not in out
    assert "three" in NUMBER_WORDS and "the" in STOPWORDS and len(STOPWORDS) == 179


@pytest.mark.parametrize("seed", range(8))
def test_shuffle_moves_words_only_inside_windows_of_three_and_keeps_punctuation(seed):
    out = Perturbation.of("shuffle", 0.3).apply(TEXT, seed, "s")
    src_w, out_w = word_list(TEXT), word_list(out)
    for start in range(0, len(src_w), 3):
        assert Counter(src_w[start : start + 3]) == Counter(out_w[start : start + 3])
    assert re.sub(r"\w+(?:'\w+)*", "W", TEXT) == re.sub(r"\w+(?:'\w+)*", "W", out)


def test_edits_reconstruct_the_original_text():
    for p in active_conditions():
        res = p.perturb(TEXT, 3, "e")
        text = res.text
        for e in reversed(res.edits):
            text = text[: e.start] + e.original + text[e.end :]
        assert text == TEXT, p.key


# ---------------------------------------------------------------------------------------------------- determinism


def test_deterministic_per_seed_item_and_condition():
    for p in active_conditions():
        a = p.apply(TEXT, 7, "gsm8k/3")
        assert a == p.apply(TEXT, 7, "gsm8k/3")
        if p.name != "synonym":  # few synonym-eligible words: different draws may coincide
            assert a != p.apply(TEXT, 8, "gsm8k/3") or a != p.apply(TEXT, 7, "gsm8k/4"), p.key
    # order of application and other conditions do not matter: a pure function
    k = Perturbation.of("keyboard", 0.1)
    first = k.apply(TEXT, 1, "x")
    for p in CONDITIONS[:5]:
        p.apply(TEXT, 1, "x")
    assert k.apply(TEXT, 1, "x") == first


def test_golden_output_is_stable_across_processes():
    # derive_seed hashes reprs with sha256, so this value is the same in every process and Python version
    assert Perturbation.of("keyboard", 0.2).apply("What is the capital of France?", 0, "cli") == (
        "Whwy ks the calital of Frabce?"
    )


@pytest.mark.parametrize("text", EDGE, ids=repr)
def test_never_crashes_on_empty_short_or_non_ascii_input(text):
    for p in active_conditions():
        res = p.perturb(text, 0, "edge")
        assert isinstance(res.text, str) and res.changed <= max(res.eligible, 0) + (
            1 if p.name == "shuffle" else 0
        )
        if not any(c.isalpha() for c in text):
            assert p.level == "word" or res.text == text
    assert (
        Perturbation.of("keyboard", 1.0).apply("日本語", 0, "x") == "日本語"
    )  # no ASCII letters: not eligible
    assert Perturbation.of("char.deletion", 1.0).apply("Ωμέγα", 0, "x") == ""


def test_apply_span_perturbs_only_the_span():
    prompt = "Answer concisely.\n\nQuestion: What is the capital of France?\nAnswer:"
    start = prompt.index("What")
    end = prompt.index("\nAnswer:")
    p = Perturbation.of("keyboard", 0.3)
    res = p.perturb_span(prompt, start, end, 0, "q")
    assert res.text.startswith(prompt[:start]) and res.text.endswith(prompt[end:])
    assert res.text[start : start + end - start] == p.apply(prompt[start:end], 0, "q")
    assert res.eligible == eligible_units(p, prompt[start:end]) and res.changed > 0
    for e in res.edits:
        assert start <= e.start < end and res.text[e.start : e.end] != e.original
    assert p.apply_span(prompt, start, end, 0, "q") == res.text


# ---------------------------------------------------------------------------------------------------- WordNet


@needs_wordnet
def test_wordnet_synonyms_golden_values():
    from dlmeval.robustness.wordnet import synonyms

    assert synonyms("question") == ("inquiry", "enquiry", "query", "interrogation")
    assert synonyms("big") == ("large",)
    assert synonyms("Question") == synonyms("question")
    assert synonyms("eggs") == ()  # its counted senses offer only "egg" itself
    assert synonyms("zzzqqq") == ()


@needs_wordnet
@pytest.mark.parametrize("seed", range(5))
def test_synonym_substitution_replaces_content_words_by_their_synonyms(seed):
    from dlmeval.robustness.wordnet import synonyms

    p = Perturbation.of("synonym", 0.3)
    out = p.apply(TEXT, seed, "syn")
    for a, b in zip(word_list(TEXT), word_list(out)):
        if a != b:
            assert is_content_word(a) and b.lower() in {s.lower() for s in synonyms(a)}
            assert a[0].isupper() == b[0].isupper()


def test_missing_wordnet_raises_a_clear_error_naming_the_package(monkeypatch, tmp_path):
    monkeypatch.setenv("DLMEVAL_WORDNET", str(tmp_path))
    with pytest.raises(InputError, match="wordnet-base"):
        Perturbation.of("synonym", 0.1).apply("A big question", 0, "x")


# ---------------------------------------------------------------------------------------------------- CLI


def test_cli_shows_every_condition(capsys):
    assert main(["perturb", "What is the capital of France?", "--type", "keyboard"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("original") and len(out) == 5
    assert out[3].split()[0] == "char.keyboard@0.20" and out[3].endswith("Whwy ks the calital of Frabce?")


def test_cli_json_with_rate_seed_and_span(capsys):
    text = "Question: What is the capital of France?"
    assert main(["perturb", text, "--type", "homoglyph", "--rate", "1", "--span", "10:", "--json"]) == 0
    payload = json.loads(capsys.readouterr().out)
    [r] = payload["results"]
    assert r["key"] == "char.homoglyph@1.00" and r["changed"] == r["eligible"] == 15
    assert r["text"].startswith("Question: ") and r["text"] != text
    assert main(["--json", "perturb", "hi", "--type", "all", "--seed", "3"]) == 0
    n = len(json.loads(capsys.readouterr().out)["results"])
    assert n == len(CONDITIONS)


def test_cli_errors_are_one_line_with_exit_code_2(capsys):
    assert main(["perturb", "x", "--type", "deletion"]) == 2
    assert "ambiguous" in capsys.readouterr().err
    assert main(["perturb", "x", "--rate", "2"]) == 2
    assert main(["perturb", "x", "--span", "5:9"]) == 2
    assert main(["perturb"]) == 2
    assert main(["perturb", "--list"]) == 0
    assert "char.homoglyph" in capsys.readouterr().out
