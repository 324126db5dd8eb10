"""results.json through pydantic-core is byte for byte the stdlib encoder's dump of the model."""

from __future__ import annotations

import json
import math

import pytest
from pydantic import BaseModel

from fairness._util.model_json import model_json


class Row(BaseModel):
    value: float
    ci: list[float | None]
    by_slice: dict[str, float]
    note: str


def stdlib(model: BaseModel) -> str:
    return json.dumps(model.model_dump(mode="json"), ensure_ascii=False, allow_nan=False, separators=(",", ":"))


SPELLINGS = [3.2e-05, -3.2e-05, 1e-05, 9.99e-05, 1e-06, -7e-09, 1.5e-10, 1e-300, 5e-324, 0.0001, 0.00012, 0.1 + 0.2,
             1e15, 1e16, 1.2345678901234568e17, 1.7976931348623157e308, -0.0, 0.0, 2.0, 123456.789]


def test_every_float_spelling_matches_python():
    row = Row(value=1e-06, ci=[*SPELLINGS, None], by_slice={f"s{i}": v for i, v in enumerate(SPELLINGS)}, note="x")
    assert model_json(row) == stdlib(row)
    assert '"value":1e-06,' in model_json(row)
    assert "[3.2e-05,-3.2e-05,1e-05,9.99e-05,1e-06,-7e-09," in model_json(row)


def test_number_lookalikes_inside_strings_are_left_as_written():
    note = 'ci:[0.000032,1e-6] {"a":1e-6} \\":1e-6,\\\\ "q":-0.00001] NaN,Infinity] é\u2028\x01\t'
    row = Row(value=3.2e-05, ci=[1e-06], by_slice={':1e-6,"k': 1e-06, "NaN,": 0.00005}, note=note)
    assert model_json(row) == stdlib(row)
    assert json.loads(model_json(row))["note"] == note


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_a_non_finite_float_is_written_null(bad):
    row = Row(value=0.5, ci=[bad, 0.25], by_slice={}, note="")
    assert model_json(row) == '{"value":0.5,"ci":[null,0.25],"by_slice":{},"note":""}'


def test_text_pydantic_core_cannot_encode_takes_the_stdlib_route():
    row = Row(value=1e-06, ci=[], by_slice={}, note="lone \ud800 surrogate")
    assert model_json(row) == stdlib(row)
