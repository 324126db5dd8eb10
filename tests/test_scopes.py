"""A scope's results for all metrics at once equal the one-metric interval functions, figure for figure.

`fairness.audit._scopes.scope_results` computes the design effects and exact bounds of every
metric of a kind in one array; each recorded number must be what `slice_intervals`,
`worst_interval`, `gap_interval` and `pooled_interval` give for that metric alone (the
same float64 operations, so the same bits, so the same rounded figures).
"""

from __future__ import annotations

import numpy as np
import pytest

from fairness._util.canonical import json_number
from fairness.audit._cells import CellTable
from fairness.audit._intervals import (
    CellCounts,
    SliceBounds,
    gap_interval,
    pooled_interval,
    slice_intervals,
    worst_interval,
)
from fairness.audit._metrics import Scope
from fairness.audit._options import AuditOptions
from fairness.audit._scopes import scope_results, worst_kind
from fairness.score._catalog import METRICS

SPECS = [METRICS[name] for name in ("refusal_rate", "religion_mention_rate", "deflection_rate", "stereotype_kw_count",
                                     "positive_professional_count")]
"""A harm rate, a neutral rate, a rate the tables below never fire, a harm count and a count where lower is worse."""


def _table(seed: int, C: int = 12, S: int = 8, empty_slice: int | None = None) -> CellTable:
    """Random per-cell sums and rows: rates as 0/1 sums, counts as Poisson totals; some cells of
    one row, and optionally a slice without rows."""
    rng = np.random.default_rng(seed)
    n = rng.integers(1, 6, size=(C, S)).astype(np.float64)
    if empty_slice is not None:
        n[:, empty_slice] = 0
    p = rng.uniform(0.02, 0.6, size=(C, S))
    sums = np.stack([
        rng.binomial(n.astype(np.int64), p).astype(np.float64),
        rng.binomial(n.astype(np.int64), 0.5).astype(np.float64),
        np.zeros((C, S)),
        rng.poisson(1.3 * n).astype(np.float64),
        rng.poisson(0.4 * n).astype(np.float64),
    ], axis=2)
    return CellTable(n_cells=C, n_slices=S, n_metrics=len(SPECS), n=n, sums=sums, sumsq=sums.copy(), cell_codes={},
                     seed_n=np.zeros(0), seed_sums=np.zeros((0, len(SPECS))))


def _ci(iv) -> list[float | None]:
    return [json_number(iv.low), json_number(iv.high)]


@pytest.mark.parametrize(("seed", "empty_slice"), [(1, None), (2, None), (3, 5), (4, 0)])
def test_every_metric_matches_the_one_metric_functions(seed: int, empty_slice: int | None) -> None:
    cells = _table(seed, empty_slice=empty_slice)
    slices = [f"s{i}" for i in range(cells.n_slices)]
    mask = np.ones(cells.n_cells, dtype=bool)
    mask[3] = False  # a scope is a subset of the cells
    options = AuditOptions()
    T, N, results = scope_results(cells, Scope("overall", (), mask), slices, SPECS, options, min_n=0)  # nothing hidden
    assert T.shape == (cells.n_cells - 1, cells.n_slices, len(SPECS)) and N.shape == (cells.n_cells - 1, cells.n_slices)
    for m, (spec, sr) in enumerate(zip(SPECS, results, strict=True)):
        cc = CellCounts(T[:, :, m], N, spec.kind)
        sb = SliceBounds.of(cc)
        lo, hi = slice_intervals(sb, options.alpha)
        live = [i for i in range(len(slices)) if cc.n[i] > 0]
        for i, sl in enumerate(slices):
            est = sr.by_slice[sl]
            assert est.n == int(cc.n[i])
            assert est.deff == json_number(sb.deff[i])
            if i in live:
                assert est.value == json_number(cc.values[i])
                assert est.ci == [json_number(lo[i]), json_number(hi[i])]
        w, g = worst_interval(sb, worst_kind(spec), options.alpha), gap_interval(sb, options.alpha)
        assert (sr.worst_slice.ci, sr.worst_slice.method) == (_ci(w), w.method)
        assert (sr.max_minus_min.ci, sr.max_minus_min.method) == (_ci(g), g.method)
        p = pooled_interval(cc, options.alpha)
        assert (sr.pooled.ci, sr.pooled.method) == (_ci(p), p.method)
        assert sr.pooled.value == json_number(cc.x.sum() / cc.n.sum())
        assert sr.n == int(cc.n.sum())
    never = ("lexical ceiling: the flag never fires in any slice (0%); no disparity can be measured" if empty_slice is None
             else "a slice has no rows in this scope: worst slice and gap are over the others")
    assert results[2].caveats == [never]
    assert results[4].worst_slice.method == "korn-graubard-simultaneous-min"


def test_deeper_scopes_have_no_intervals_and_underpowered_ones_hide_values() -> None:
    cells = _table(7)
    slices = [f"s{i}" for i in range(cells.n_slices)]
    deep = Scope("family=F1,regime=r", (("family", "F1"), ("regime", "r")), np.ones(cells.n_cells, dtype=bool))
    _, _, results = scope_results(cells, deep, slices, SPECS, AuditOptions(), min_n=1)
    assert all(sr.pooled.ci is None and sr.worst_slice.ci is None and sr.by_slice["s0"].ci is None for sr in results)
    assert results[0].worst_slice.value is not None
    _, _, small = scope_results(cells, Scope("overall", (), np.ones(cells.n_cells, dtype=bool)), slices, SPECS,
                                AuditOptions(), min_n=10_000)
    assert small[0].caveats[0] == "underpowered"
    assert small[0].worst_slice.value is None and small[0].max_minus_min.value is None
    assert small[0].by_slice["s0"].value is None and small[0].by_slice["s0"].ci is None
