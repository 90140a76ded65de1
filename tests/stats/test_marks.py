"""The paper's significance marks (Williams test at the table's level), against direct formulas."""

import math

import numpy as np
import pytest
from scipy import stats as sps

from dlmeval.errors import InputError
from dlmeval.stats.marks import DAGGER, DOUBLE_DAGGER, significance_marks, williams_at_level


def _williams_by_hand(r12, r13, r23, n):
    k = 1 - r12**2 - r13**2 - r23**2 + 2 * r12 * r13 * r23
    t = (r12 - r13) * math.sqrt((n - 1) * (1 + r23))
    t /= math.sqrt(2 * k * (n - 1) / (n - 3) + ((r12 + r13) / 2) ** 2 * (1 - r23) ** 3)
    return t, sps.t.sf(t, n - 3)


def _data(seed=0, n=60):
    rng = np.random.default_rng(seed)
    h = rng.normal(size=n)
    good = h + 0.4 * rng.normal(size=n)  # strongly related to the humans
    mid = h + 1.2 * rng.normal(size=n)
    bad = rng.normal(size=n)  # unrelated
    return h, good, mid, bad


def test_segment_level_equals_formula():
    h, good, mid, _ = _data()
    w = williams_at_level("segment", good, mid, human=h, method="pearson")
    r12, r13, r23 = np.corrcoef(h, good)[0, 1], np.corrcoef(h, mid)[0, 1], np.corrcoef(good, mid)[0, 1]
    t, p = _williams_by_hand(r12, r13, r23, h.size)
    assert (w.r_a, w.r_b, w.r_ab, w.n) == pytest.approx((r12, r13, r23, 60))
    assert (w.t, w.p) == pytest.approx((t, p))
    # Spearman: the same test on ranks
    rk = [sps.rankdata(x) for x in (h, good, mid)]
    ws = williams_at_level("segment", good, mid, human=h, method="spearman")
    t, p = _williams_by_hand(
        np.corrcoef(rk[0], rk[1])[0, 1], np.corrcoef(rk[0], rk[2])[0, 1], np.corrcoef(rk[1], rk[2])[0, 1], 60
    )
    assert (ws.t, ws.p) == pytest.approx((t, p))


def test_system_level_uses_system_means():
    h, good, mid, _ = _data(1, n=48)
    systems = np.repeat([f"s{i}" for i in range(8)], 6)
    w = williams_at_level("system", good, mid, human=h, systems=systems, method="pearson")
    hm, gm, mm = (x.reshape(8, 6).mean(axis=1) for x in (h, good, mid))
    r = np.corrcoef([hm, gm, mm])
    t, p = _williams_by_hand(r[0, 1], r[0, 2], r[1, 2], 8)
    assert w.n == 8 and (w.t, w.p) == pytest.approx((t, p))


def test_summary_level_stouffer_of_per_document_williams():
    rng = np.random.default_rng(2)
    docs = np.repeat(["d0", "d1", "d2"], 10)
    h = rng.normal(size=30)
    a, b = h + 0.3 * rng.normal(size=30), h + rng.normal(size=30)
    w = williams_at_level("summary", a, b, human=h, docs=docs, method="spearman")
    zs = []
    for d in ("d0", "d1", "d2"):
        s = docs == d
        r12 = sps.spearmanr(h[s], a[s]).statistic
        r13 = sps.spearmanr(h[s], b[s]).statistic
        r23 = sps.spearmanr(a[s], b[s]).statistic
        zs.append(sps.norm.isf(_williams_by_hand(r12, r13, r23, 10)[1]))
    z = sum(zs) / math.sqrt(3)
    assert w.n == 3 and w.t == pytest.approx(z) and w.p == pytest.approx(sps.norm.sf(z))


def test_darr_level_is_williams_on_sign_vectors():
    # 6 outputs, 8 human pairs (better, worse); metric A gets 7 of 8 right, B 4 of 8 (one of them a tie)
    better = [0, 0, 1, 2, 3, 4, 5, 1]
    worse = [1, 2, 3, 4, 5, 5, 0, 4]
    a = np.array([6.0, 5, 4, 3, 2, 1])
    b = np.array([1.0, 4, 4, 4, 0, 2])  # pair (1, 3) is a tie: discordant
    w = williams_at_level("darr", a, b, pairs=(better, worse))
    sa = np.array([1 if a[i] > a[j] else -1 for i, j in zip(better, worse)])
    sb = np.array([1 if b[i] > b[j] else -1 for i, j in zip(better, worse)])
    assert sa.mean() == pytest.approx(0.75) and sb.mean() == pytest.approx(0.0)  # (7-1)/8 and (4-4)/8
    t, p = _williams_by_hand(sa.mean(), sb.mean(), (sa * sb).mean(), 8)
    assert (w.r_a, w.r_b, w.r_ab, w.n) == pytest.approx((0.75, 0.0, (sa * sb).mean(), 8))
    assert (w.t, w.p) == pytest.approx((t, p))
    # a NaN output drops the pairs it is in
    a2 = a.copy()
    a2[5] = np.nan
    assert williams_at_level("darr", a2, b, pairs=(better, worse)).n == 5


def test_marks_dagger_and_double_dagger():
    h, good, mid, bad = _data(3, n=80)
    weak = -0.3 * h + np.random.default_rng(9).normal(size=80)  # worse than both baselines
    scores = {"diffscore": good, "bartscore": mid, "gptscore": bad, "diffscore-weak": weak}
    marks, recs = significance_marks(
        scores,
        ["diffscore", "diffscore-weak"],
        level="segment",
        human=h,
        baselines={DAGGER: "bartscore", DOUBLE_DAGGER: "gptscore"},
    )
    by = {(r["row"], r["baseline"]): r for r in recs}
    for r in by.values():
        t, p = _williams_by_hand(r["r_a"], r["r_b"], r["r_ab"], 80)
        assert r["p"] == pytest.approx(p) and r["significant"] == (p < 0.05)
    assert by[("diffscore", "bartscore")]["p"] < 0.05 and by[("diffscore", "gptscore")]["p"] < 0.05
    assert marks == {"diffscore": DAGGER + DOUBLE_DAGGER, "diffscore-weak": ""}
    # a stricter alpha than the test's p takes the mark away
    p_bart = by[("diffscore", "bartscore")]["p"]
    m2, _ = significance_marks(
        scores, ["diffscore"], level="segment", human=h, baselines={DAGGER: "bartscore"}, alpha=p_bart / 2
    )
    assert m2 == {"diffscore": ""}
    # a baseline that was not computed gives no mark and no test
    m3, r3 = significance_marks(scores, ["diffscore"], level="segment", human=h, baselines={DAGGER: "absent"})
    assert m3 == {"diffscore": ""} and r3 == []


def test_marks_bad_input():
    h, good, mid, _ = _data()
    with pytest.raises(InputError, match="unknown level"):
        williams_at_level("document", good, mid, human=h)
    with pytest.raises(InputError, match="does not apply at the system level"):
        williams_at_level("system", good, mid, human=h, systems=["s"] * 60, method="kendall")
    with pytest.raises(InputError, match="needs systems"):
        williams_at_level("system", good, mid, human=h)
    with pytest.raises(InputError, match="needs pairs"):
        williams_at_level("darr", good, mid)
    with pytest.raises(InputError, match="has no scores"):
        significance_marks({"a": good}, ["b"], level="segment", human=h, baselines={})
    # too few items: no test, no mark, and a note that says why
    w = williams_at_level("segment", good[:3], mid[:3], human=h[:3])
    assert math.isnan(w.p) and "n > 3" in w.note and not w.better()
