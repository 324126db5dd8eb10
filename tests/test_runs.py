"""Seed runs: the grid a prompt at a time, and rows grouped back into runs."""

from __future__ import annotations

import json
import random

import pytest

from fairness.pipeline._run import transcript_lines
from fairness.score._rubric import score_texts
from fairness.suite._runs import seed_runs
from fairness.suite._suite import iter_cases, iter_seed_runs, load_suite

SUITE = "fairness-cards/qwen-v0.1"


@pytest.mark.parametrize("max_seeds", [None, 5, 3, 1])
def test_the_runs_hold_the_grid_rows_in_grid_order(max_seeds):
    suite = load_suite(SUITE)
    runs = list(iter_seed_runs(suite, max_seeds))
    assert len(runs) == {None: 640, 5: 640, 3: 1280, 1: 3200}[max_seeds]
    assert [row for run in runs for row in run.rows()] == [c.model_dump(round_trip=True) | {"params": c.params}
                                                            for c in iter_cases(suite)]
    assert max(map(len, runs)) == min(max_seeds or 5, 5)


def test_rows_group_into_runs_of_consecutive_rows_that_differ_only_in_their_seed():
    cases = load_suite(SUITE).expand()
    picked = [*cases[:7], cases[3], cases[3], cases[40]]  # 5 seeds, 2 of the next prompt, one repeated twice, another
    runs = list(seed_runs(picked))
    assert [r.row_ids for r in runs] == [[c.row_id for c in cases[:5]], [c.row_id for c in cases[5:7]],
                                         [cases[3].row_id] * 2, [cases[40].row_id]]
    assert [r.seeds for r in runs] == [[1, 2, 3, 4, 5], [1, 2], [4, 4], [cases[40].seed]]
    assert [r.prompt for r in runs] == [cases[0].prompt, cases[5].prompt, cases[3].prompt, cases[40].prompt]


def test_a_dict_with_its_keys_in_another_order_starts_a_new_run():
    """Equal placeholders listed in another order encode differently in a transcript line."""
    a, b = load_suite(SUITE).expand()[:2]
    b = b.model_copy(update={"placeholders": dict(reversed(list({"OCC": "CEO", "X": "y"}.items())))})
    a = a.model_copy(update={"placeholders": {"OCC": "CEO", "X": "y"}})
    assert [len(r) for r in seed_runs([a, b])] == [1, 1]


def test_transcript_lines_of_rows_in_any_order_are_each_rows_json():
    cases = load_suite(SUITE).expand()
    picked = random.Random(5).sample(cases, 300)
    picked += picked[:3]
    outputs = [f"answer {i} to {c.row_id}" for i, c in enumerate(picked)]
    scores = score_texts(outputs)
    lines = transcript_lines(seed_runs(picked), outputs, ["stop"] * len(picked), scores)
    assert len(lines) == len(picked)
    for i, (line, case) in enumerate(zip(lines, picked, strict=True)):
        row = json.loads(line)
        want = (case.row_id, case.seed, case.prompt, outputs[i])
        assert (row["row_id"], row["seed"], row["prompt"], row["output"]) == want
        assert row["scores"] == scores.row(i)
        assert line == json.dumps(row, ensure_ascii=False) + "\n"
