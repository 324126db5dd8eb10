"""Seed runs: the grid's rows a prompt at a time.

A grid's rows come in runs that differ only in their seed: one prompt under one regime, its
seeds consecutive (grid order is family, paraphrase, placeholders, slice, regime, seed). Work
that depends on the prompt — encoding it, keying it, coding its cell, wording its transcript
line — is done once per run instead of once per row, which is most of a large grid's cost
when the runs are long (a 320,000-row grid of 125 seeds has 2,560 runs).
"""

from __future__ import annotations

import operator
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from fairness.suite._case import SamplingParams


class SeedRun:
    """Consecutive grid rows that share everything but their seed (and so their row id and index).

    `seeds[i]`, `row_ids[i]` and index `first + i` are row i's; every other field is `Case`'s,
    the same for all the run's rows."""

    __slots__ = ("family", "first", "params", "paraphrase_id", "placeholders", "prompt", "prompt_id", "regime", "row_ids",
                 "seeds", "slice", "slice_id", "template_index")

    def __init__(self, *, first: int, prompt_id: str, family: str, paraphrase_id: str, template_index: int,
                 placeholders: dict[str, str], slice: dict[str, str], slice_id: str, regime: str,
                 params: SamplingParams, prompt: str, seeds: Sequence[int], row_ids: Sequence[str]) -> None:
        self.first, self.prompt_id, self.family, self.paraphrase_id = first, prompt_id, family, paraphrase_id
        self.template_index, self.placeholders, self.slice, self.slice_id = template_index, placeholders, slice, slice_id
        self.regime, self.params, self.prompt, self.seeds, self.row_ids = regime, params, prompt, seeds, row_ids

    def __len__(self) -> int:
        return len(self.seeds)

    def rows(self) -> Iterator[dict[str, Any]]:
        """Each row's fields (`Case`'s), in order."""
        shared = {name: getattr(self, name) for name in _SHARED_FIELDS}
        for i, (row_id, seed) in enumerate(zip(self.row_ids, self.seeds, strict=True)):
            yield {**shared, "row_id": row_id, "index": self.first + i, "seed": seed}


_SHARED_FIELDS = ("prompt_id", "family", "paraphrase_id", "template_index", "placeholders", "slice", "slice_id", "regime",
                  "params", "prompt")
_shared = operator.attrgetter(*_SHARED_FIELDS[1:])  # prompt_id and template_index are not in every row type


def seed_runs(rows: Iterable[Any]) -> Iterator[SeedRun]:
    """Consecutive `rows` (anything with `Case`'s fields; `prompt_id`, `template_index` and
    `index` optional) grouped into runs: a row joins the run before it when every field but
    its seed and row id is equal, dicts with their keys in the same order (they encode alike)."""
    run: list[Any] = []
    key: tuple = ()
    for row in rows:
        k = _shared(row)
        if run and (k != key or not _same_key_order(k, key)):
            yield _run_of(run)
            run = []
        run.append(row)
        key = k
    if run:
        yield _run_of(run)


def _same_key_order(a: tuple, b: tuple) -> bool:
    """Equal shared fields (already compared) whose dicts also list their keys in the same order."""
    return all(x is y or list(x) == list(y) for x, y in zip(a[2:4], b[2:4], strict=True))


def _run_of(rows: list[Any]) -> SeedRun:
    r = rows[0]
    return SeedRun(
        first=getattr(r, "index", 0), prompt_id=getattr(r, "prompt_id", ""), family=r.family,
        paraphrase_id=r.paraphrase_id, template_index=getattr(r, "template_index", 0), placeholders=r.placeholders,
        slice=r.slice, slice_id=r.slice_id, regime=r.regime, params=r.params, prompt=r.prompt,
        seeds=[x.seed for x in rows], row_ids=[x.row_id for x in rows],
    )
