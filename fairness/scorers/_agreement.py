"""Agreement of two flag scorers on the same outputs: Cohen's κ with a cluster-bootstrap interval.

Estimand: Cohen's κ between scorer A's and scorer B's flags on an output of this suite's
grid (rows pooled), with the grid's prompts as the sampling unit: the interval is the
evaluators' expanded-percentile bootstrap (`evaluators._resample.percentile`: levels widened
as for a t interval with prompts − 1 degrees of freedom) that redraws prompts (`prompt_id`:
a prompt's regimes and seeds stay together), so outputs of one prompt are not treated as
independent. Rows where either
scorer has no valid score (NaN) are left out of κ and counted (`invalid`), never read as 0.
`benchmarks/kappa_simulation.py` checks the interval's coverage on data from a latent-class
model with prompt effects (not the bootstrap's own model): 0.938–0.945 for a nominal 0.95 with
20–200 prompts (1,000 simulated grids per setting).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from fairness._util.errors import FairnessError
from fairness.audit._intervals import Interval
from fairness.audit._stats import DEFAULT_ALPHA, DEFAULT_B, bootstrap_weights
from fairness.evaluators._resample import PERCENTILE, percentile

ESTIMAND = (
    "Cohen's kappa between the two scorers' flags on an output of this suite's grid (rows pooled), prompts as the "
    "sampling unit: an expanded-percentile cluster bootstrap over prompts; rows either scorer left without a valid score "
    "are excluded and counted"
)
METHOD = PERCENTILE
"""The interval's construction: the evaluators' expanded percentile (Hesterberg 2015), clusters = prompts."""


@dataclass(frozen=True)
class Confusion:
    """Counts of the two flags over rows where both scorers gave a valid score."""

    both: int
    """A = 1 and B = 1."""
    only_a: int
    """A = 1, B = 0."""
    only_b: int
    """A = 0, B = 1."""
    neither: int
    """A = 0 and B = 0."""
    invalid: int
    """Rows left out because A or B has no valid score."""

    @property
    def n(self) -> int:
        return self.both + self.only_a + self.only_b + self.neither

    @property
    def kappa(self) -> float:
        return float(cohen_kappa(np.array([self.both, self.only_a, self.only_b, self.neither], dtype=np.float64)))


@dataclass(frozen=True)
class Agreement:
    """How far two flag scorers agree on the same outputs."""

    a: str
    b: str
    kappa: float
    """Cohen's κ over all valid rows (NaN when both scorers are constant: chance agreement is 1)."""
    interval: Interval
    observed: float
    """Share of valid rows where the flags agree."""
    confusion: Confusion
    by_slice: dict[str, Confusion]
    """Confusion counts per slice, in first-appearance order."""
    disagreements: np.ndarray
    """Row indices where both scores are valid and the flags differ."""
    estimand: str = ESTIMAND


def cohen_kappa(counts: np.ndarray) -> np.ndarray:
    """κ from (..., 4) counts [both, only_a, only_b, neither]; NaN where chance agreement is 1 or n = 0."""
    c = np.asarray(counts, dtype=np.float64)
    n = c.sum(axis=-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        po = (c[..., 0] + c[..., 3]) / n
        pa, pb = (c[..., 0] + c[..., 1]) / n, (c[..., 0] + c[..., 2]) / n
        pe = pa * pb + (1 - pa) * (1 - pb)
        kappa = (po - pe) / (1 - pe)
    return np.where((n > 0) & (pe < 1 - 1e-12), kappa, np.nan)


def _cells(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each row's confusion cell (0 both … 3 neither) and whether both scores are valid."""
    valid = np.isfinite(a) & np.isfinite(b)
    cell = np.where(np.nan_to_num(a) == 1, 0, 2) + np.where(np.nan_to_num(b) == 1, 0, 1)
    return cell, valid


def _confusion(cell: np.ndarray, valid: np.ndarray) -> Confusion:
    c = np.bincount(cell[valid], minlength=4)
    return Confusion(int(c[0]), int(c[1]), int(c[2]), int(c[3]), int((~valid).sum()))


def agreement(
    a: np.ndarray, b: np.ndarray, prompts: Sequence[str], slices: Sequence[str], *, names: tuple[str, str] = ("a", "b"),
    n_resamples: int = DEFAULT_B, confidence: float = 1 - DEFAULT_ALPHA, seed: int = 0,
) -> Agreement:
    """κ of two flag columns (0/1, NaN = no valid score) aligned row by row, its interval and confusions.

    Args:
        a, b: the two scorers' flags per row.
        prompts: each row's prompt (`prompt_id`): the bootstrap's cluster.
        slices: each row's slice id, for the per-slice confusion counts.
    """
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    n = a.shape[0]
    if b.shape != (n,) or len(prompts) != n or len(slices) != n:
        raise FairnessError("agreement needs the two flag columns, prompts and slices of the same rows")
    for name, x in zip(names, (a, b), strict=True):
        if not np.isin(x[np.isfinite(x)], (0.0, 1.0)).all():
            raise FairnessError(f"agreement: `{name}` is not a flag (values other than 0, 1 and NaN)")
    cell, valid = _cells(a, b)
    slice_ids, slice_codes = np.unique(np.asarray(slices, dtype=object), return_inverse=True)
    order = dict.fromkeys(slices)
    by_slice = {s: _confusion(cell[slice_codes == i], valid[slice_codes == i]) for i, s in enumerate(slice_ids)}
    overall = _confusion(cell, valid)
    kappa = overall.kappa
    _, clusters = np.unique(np.asarray(prompts, dtype=object), return_inverse=True)
    k = int(clusters.max()) + 1 if n else 0
    per_cluster = np.bincount(clusters[valid] * 4 + cell[valid], minlength=4 * k).reshape(k, 4).astype(np.float64)
    draws = np.full(n_resamples, np.nan)
    if np.isfinite(kappa) and k > 1:
        draws = cohen_kappa(bootstrap_weights(k, n_resamples, np.random.default_rng(seed)) @ per_cluster)
    interval = percentile(draws, confidence, k)
    return Agreement(
        a=names[0], b=names[1], kappa=kappa, interval=interval,
        observed=(overall.both + overall.neither) / overall.n if overall.n else float("nan"),
        confusion=overall, by_slice={s: by_slice[s] for s in order}, disagreements=np.flatnonzero(valid & (cell % 3 != 0)),
    )
