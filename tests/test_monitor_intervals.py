"""The monitor's unit-clustered interval (issue 22) on fixed inputs, each figure recomputed here from its
definition with scipy, and the `heterogeneous-units` caveat appearing exactly where the units differ strongly.

Estimand: the output-weighted share of flagged outputs (mean count per output) Σx / Σn over the
traffic, units (users) being independent clusters.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from monitor_logs import CLEAN, FLAGGED, MAPPING, day_label, make_records, write_logs
from scipy import stats

from fairness.audit._intervals import SliceBounds, slice_intervals
from fairness.cli import main
from fairness.monitor._job import HETEROGENEOUS, heterogeneous_windows
from fairness.monitor._stats import UnitCounts, WindowCells, effective_df, heterogeneity

ALPHA = 0.05

# Per (unit, slice): records and flags. Slice 0: one unit far from the rest (its residual carries the
# variance: the kurtosis binds); slice 1: one heavy unit among light ones (unequal sizes: (Σn)²/Σn² binds);
# slice 2: equal sizes, residuals ±2 (units − 1 binds); slice 3: no flag at all; slice 4: every record flagged.
N = np.array([[10, 2, 10, 6, 3], [10, 2, 10, 6, 3], [10, 2, 10, 6, 3], [10, 2, 10, 6, 3], [10, 2, 10, 6, 3],
              [10, 2, 10, 6, 3], [10, 10, 10, 6, 3], [10, 2, 10, 6, 3]], dtype=float)
X = np.array([[1, 1, 7, 0, 3], [1, 0, 3, 0, 3], [1, 1, 7, 0, 3], [1, 0, 3, 0, 3], [1, 1, 7, 0, 3],
              [1, 0, 3, 0, 3], [9, 4, 7, 0, 3], [1, 1, 3, 0, 3]], dtype=float)


def reference(n: np.ndarray, x: np.ndarray, kind: str) -> tuple[float, float, float, float]:
    """One slice from the definitions: (ν, design effect, lower, upper) with scipy's t, normal, beta and gamma."""
    k = len(n)
    p = x.sum() / n.sum()
    e = x - n * p
    v = float(np.sum(e**2 / (1 - n / n.sum())))  # CR2: each residual over 1 − its unit's leverage
    base = n.sum() * p * (1 - p) if kind == "rate" else n.sum() * p
    kurt = k * float(np.sum(e**4)) / float(np.sum(e**2)) ** 2 if np.sum(e**2) > 0 else 3.0
    nu = max(min(k - 1, n.sum() ** 2 / float(np.sum(n**2)) - 1, 2 * k / (kurt - 1) if kurt > 1 else math.inf), 1.0)
    factor = (stats.t.ppf(0.975, nu) / stats.norm.ppf(0.975)) ** 2
    deff = max((v / base if base > 0 else 1.0) * factor, 1.0)
    xe, ne = x.sum() / deff, n.sum() / deff
    if kind == "rate":
        lo = stats.beta.ppf(ALPHA / 2, xe, ne - xe + 1) if xe > 0 else 0.0
        hi = stats.beta.ppf(1 - ALPHA / 2, xe + 1, ne - xe) if xe < ne else 1.0
    else:
        lo = stats.gamma.ppf(ALPHA / 2, xe) / ne if xe > 0 else 0.0
        hi = stats.gamma.ppf(1 - ALPHA / 2, xe + 1) / ne
    return nu, deff, lo, hi


class TestInterval:
    def test_degrees_of_freedom_are_the_least_of_the_three(self):
        uc = UnitCounts(X, N, "rate", np.zeros(5), True)
        nu = effective_df(uc)
        assert nu[2] == 7.0  # equal sizes, residuals of one size: units − 1
        assert nu[1] == pytest.approx(24**2 / (7 * 4 + 100) - 1, rel=1e-15)  # a unit of 10 among 7 of 2: 3.5
        e = X[:, 0] - N[:, 0] * X[:, 0].sum() / N[:, 0].sum()  # slice 0: one unit's residual carries it
        assert nu[0] == pytest.approx(2 * 8 / (8 * np.sum(e**4) / np.sum(e**2) ** 2 - 1), rel=1e-12)
        assert nu[0] == pytest.approx(3.1111111111, rel=1e-9)  # below units − 1 = (Σn)²/Σn² − 1 = 7
        assert list(nu[3:]) == [7.0, 7.0]  # no residual: nothing but the units

    def test_rate_bounds_are_clopper_pearson_at_the_effective_n(self):
        uc = UnitCounts(X, N, "rate", np.zeros(5), True)
        sb = SliceBounds.of(uc)
        lo, hi = slice_intervals(sb, ALPHA)
        for s in range(5):
            nu, deff, rlo, rhi = reference(N[:, s], X[:, s], "rate")
            assert effective_df(uc)[s] == pytest.approx(nu, rel=1e-12)
            assert sb.deff[s] == pytest.approx(deff, rel=1e-10)
            assert (lo[s], hi[s]) == (pytest.approx(rlo, rel=1e-9, abs=1e-15), pytest.approx(rhi, rel=1e-9)), s

    def test_edges_stay_exact(self):
        lo, hi = slice_intervals(SliceBounds.of(UnitCounts(X, N, "rate", np.zeros(5), True)), ALPHA)
        # no flag among 48 records: Clopper–Pearson's upper bound 1 − 0.025^(1/n) at the records over Korn–Graubard's
        # degrees-of-freedom factor (7 units, no residual), as before issue 22
        f = (stats.t.ppf(0.975, 7) / stats.norm.ppf(0.975)) ** 2
        assert (lo[3], hi[3]) == (0.0, pytest.approx(1 - 0.025 ** (f / 48), rel=1e-12))
        assert (lo[4], hi[4]) == (pytest.approx(0.025 ** (f / 24), rel=1e-12), 1.0)  # every one of 24 flagged
        assert np.all((lo >= 0) & (hi <= 1))

    def test_count_bounds_are_garwood_at_the_effective_n(self):
        counts = X.copy()
        counts[6, 1] = 95  # a heavy user with many keywords per output
        lo, hi = slice_intervals(SliceBounds.of(UnitCounts(counts, N, "count", np.zeros(5), True)), ALPHA)
        for s in range(4):
            _, _, rlo, rhi = reference(N[:, s], counts[:, s], "count")
            assert (lo[s], hi[s]) == (pytest.approx(rlo, rel=1e-9, abs=1e-15), pytest.approx(rhi, rel=1e-9)), s

    def test_one_unit_has_no_interval(self):
        lo, hi = slice_intervals(SliceBounds.of(UnitCounts(X[:1], N[:1], "rate", np.zeros(5), True)), ALPHA)
        assert np.isnan(lo).all() and np.isnan(hi).all()


def cells(window: str, x: np.ndarray, n: np.ndarray, clustered: bool = True) -> WindowCells:
    return WindowCells(window=window, slices=["a"], counts=n[:, None], sums={"stereotype_kw_rate": x[:, None]},
                       squares={}, clustered=clustered)


class TestHeterogeneity:
    def test_is_the_clustered_variance_over_the_binomial(self):
        n, x = np.array([4.0, 4, 4, 4]), np.array([0.0, 4, 0, 4])  # users all or nothing: 0.5 overall
        uc = UnitCounts(x[:, None], n[:, None], "rate", np.zeros(1), True)
        assert heterogeneity(uc)[0] == pytest.approx(4 / 3 * 4 * 2**2 / (16 * 0.25), rel=1e-15)  # 16/3

    def test_caveat_windows_are_those_at_the_threshold(self):
        from fairness.score._catalog import MetricSpec

        spec = MetricSpec(name="stereotype_kw_rate", column="stereotype_kw_rate", kind="rate", higher_is_worse=True,
                          description="-")
        n = np.array([4.0, 4, 4, 4])
        # all-or-nothing users (16/3 ≥ 3); the same users alike (0); 2 and 1 of 4 against 3 and 2 (below 3)
        windows = {"w-split": cells("w-split", np.array([0.0, 4, 0, 4]), n),
                   "w-alike": cells("w-alike", np.array([2.0, 2, 2, 2]), n),
                   "w-mild": cells("w-mild", np.array([1.0, 3, 2, 2]), n)}
        het = {w: float(heterogeneity(UnitCounts(wc.sums["stereotype_kw_rate"], wc.counts, "rate", np.zeros(1),
                                                 True))[0]) for w, wc in windows.items()}
        assert het == {"w-split": pytest.approx(16 / 3), "w-alike": 0.0, "w-mild": pytest.approx(4 / 3 * 2 / 4)}
        assert HETEROGENEOUS == 3.0
        assert heterogeneous_windows(windows, {spec.name: spec}) == ["w-split"]
        flat = {"w-split": cells("w-split", np.array([8.0]), np.array([16.0]), clustered=False)}
        assert heterogeneous_windows(flat, {spec.name: spec}) == []


def test_the_caveat_names_the_window_whose_users_differ(tmp_path):
    """The generated logs (tests/monitor_logs.py), each user flagged at their slice's rate, but on the first day
    half of man_Christian's users flagged on every output and the other half never."""
    records, _, _ = make_records()
    first = day_label(0)
    for r in records:
        if r["ts"].startswith(first) and r["gender"] == "man" and r["religion"] == "Christian":
            r["output"] = FLAGGED if int(r["user"].split("-")[1]) % 2 else CLEAN
    write_logs(tmp_path / "logs", records, "jsonl")
    (tmp_path / "mapping.yaml").write_text(MAPPING, encoding="utf-8")
    code = main(["monitor", str(tmp_path / "logs"), "--mapping", str(tmp_path / "mapping.yaml"), "--out",
                 str(tmp_path / "out"), "--quiet"])
    data = json.loads((tmp_path / "out" / "monitor.json").read_text(encoding="utf-8"))
    assert (data["gate"]["state"], code) == ("fail", 1)  # the planted drift, as in tests/test_monitor.py
    caveats = {c["code"]: c["message"] for c in data["caveats"]}
    assert list(caveats) == ["heterogeneous-units"]
    assert caveats["heterogeneous-units"].startswith(f"1 window(s) have a slice whose units' rates differ strongly "
                                                     f"(clustered variance ≥ 3× the binomial; {first}):")
