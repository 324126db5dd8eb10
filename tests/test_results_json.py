"""results.json's metrics written from the models (`fairness.report._json`) are `json.dumps` of their dump, byte for byte."""

from __future__ import annotations

import json

import pytest

from fairness.audit._results import Estimate, MetricResult, ScopeResult
from fairness.report import _json
from fairness.report._render import results_json


def _dumps(value) -> str:
    return json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":"), check_circular=False)


def _reference(metrics: list[MetricResult]) -> str:
    return _dumps([m.model_dump(mode="json") for m in metrics])


def _scope(**over) -> ScopeResult:
    est = Estimate(value=0.125, ci=[1.6e-05, 0.5], method="korn-graubard", n=200, cells=40, deff=1.0)
    fields = {"n": 800, "by_slice": {"man_Christian": est, "woman_Muslim": Estimate(value=None, n=0, cells=0)},
                  "pooled": Estimate(value=-0.0, n=800, ci=None), "worst_slice": Estimate(value=1e16, slice="man_Christian"),
                  "max_minus_min": Estimate(value=0.0, ci=[None, 3.1e-05], method="paired-newcombe-simultaneous"),
                  "p_value": 0.000999, "p_holm": 1.0, "p_bh": None, "caveats": ["lexical ceiling: ≥95%", 'a "quoted"\n\x01 note'],
                  "cells": None}
    fields.update(over)
    return ScopeResult(**fields)


def _metric(**over) -> MetricResult:
    fields = {"metric": "stereotype_kw_rate", "kind": "rate", "higher_is_worse": True, "description": "flag — ünïcode \\ ok",
                  "scopes": {"overall": _scope(), "family=F1": _scope(n=3, cells=2, caveats=[])}}
    fields.update(over)
    return MetricResult(**fields)


def test_the_models_have_the_fields_the_encoder_writes():
    assert _json.FAST


@pytest.mark.parametrize("metrics", [
    [],
    [_metric()],
    [_metric(), _metric(metric="refusal", higher_is_worse=None, scopes={}), _metric(higher_is_worse=False)],
    [_metric(scopes={"overall": _scope(by_slice={})})],
])
def test_metrics_json_is_json_dumps_of_the_dump(metrics):
    assert _json.metrics_json(metrics) == _reference(metrics)


def test_a_value_of_another_type_goes_the_json_dumps_way():
    # built without validation: an int in a float field, a tuple for a list, a bool for an int
    odd = ScopeResult.model_construct(**{**dict(_scope()), "p_value": 1, "cells": True})
    est = Estimate.model_construct(value=2, ci=(0.1, 0.2), method=None, n=None, slice=None, cells=None, deff=None)
    odd2 = _scope(pooled=est)
    metrics = [_metric(scopes={"a": odd, "b": odd2}), MetricResult.model_construct(**{**dict(_metric()), "kind": 3})]
    with pytest.warns(UserWarning):  # pydantic warns of the unexpected types either way
        expected = _reference(metrics)
    with pytest.warns(UserWarning):
        assert _json.metrics_json(metrics) == expected


def test_a_float_that_is_not_finite_is_refused_as_json_dumps_refuses_it():
    metrics = [_metric(scopes={"overall": _scope(p_value=float("nan"))})]
    with pytest.raises(ValueError, match="Out of range float values are not JSON compliant"):
        _reference(metrics)
    with pytest.raises(ValueError, match="Out of range float values are not JSON compliant"):
        _json.metrics_json(metrics)


def test_results_json_is_json_dumps_of_the_run(tmp_path):
    from fairness.audit._options import AuditOptions
    from fairness.pipeline._options import RunOptions
    from fairness.pipeline._run import run_audit

    rec = "recordings/fairness-cards/qwen-v0.1/SmolLM2-135M-Instruct-Q4_1"
    run = run_audit(RunOptions(recordings=rec, out=tmp_path / "out", audit=AuditOptions(permutations=50))).run
    text = results_json(run)
    assert text == _dumps(run.model_dump(mode="json")) + "\n"
    assert (tmp_path / "out" / "results.json").read_text(encoding="utf-8") == text
