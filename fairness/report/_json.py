"""results.json's `metrics` written straight from the models, as `json.dumps` writes their dump.

The metrics are ~97% of results.json (14 metrics × ~75 scopes × ~7 estimates, ~900 KB):
`model_dump(mode="json")` builds ~10⁵ dict entries and `json.dumps` walks them again, encoding
every key each time; together ~0.2 G instructions, the largest single step after the audit.
Here each `Estimate` is one `%` format of its fields (the keys are in the format), each float's
`repr` (what `json.dumps` writes for a finite float) is made once per distinct value, and
strings go through `json.dumps`'s own encoder (`encode_str`, as `ensure_ascii=False` uses).

The text is `json.dumps(model.model_dump(mode="json"), ensure_ascii=False, allow_nan=False,
separators=(",", ":"))` byte for byte. Only the field types the models declare take the short
way (exactly `float`, `int`, `str`, `bool` or None where declared); anything else — a subclass
of a model, a value of another type, a float that is not finite (`json.dumps` refuses it) —
sends that object to `json.dumps` of its dump. The field lists are checked against the models
at import: a model whose fields change goes the `json.dumps` way until this module follows.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from fairness._util.canonical import compact_json, encode_str
from fairness.audit._results import Estimate, MetricResult, ScopeResult

_ESTIMATE = ("value", "ci", "method", "n", "slice", "cells", "deff")
_SCOPE = ("n", "by_slice", "pooled", "worst_slice", "max_minus_min", "p_value", "p_holm", "p_bh", "caveats", "cells")
_METRIC = ("metric", "kind", "higher_is_worse", "description", "scopes")

FAST = (tuple(Estimate.model_fields) == _ESTIMATE and tuple(ScopeResult.model_fields) == _SCOPE
        and tuple(MetricResult.model_fields) == _METRIC)
"""Whether the models still have the fields (and order) this module writes."""

_ESTIMATE_FMT = '{"value":%s,"ci":%s,"method":%s,"n":%s,"slice":%s,"cells":%s,"deff":%s}'
_SCOPE_FMT = ('{"n":%s,"by_slice":{%s},"pooled":%s,"worst_slice":%s,"max_minus_min":%s,"p_value":%s,"p_holm":%s,'
              '"p_bh":%s,"caveats":%s,"cells":%s}')


class _Other(Exception):
    """A value of a type the short way does not write: the object goes the `json.dumps` way."""


_REPR: dict[float, str] = {}
"""`repr` of the nonzero finite floats met (a run's ~60,000 numbers hold ~2,000 distinct values).
Two nonzero floats that compare equal are the same value; zeros are not kept (0.0 == -0.0)."""
_REPR_MAX = 1 << 16


def _float(x: Any) -> str:
    """A `float | None` field's JSON."""
    if x is None:
        return "null"
    if type(x) is not float:
        raise _Other
    if (r := _REPR.get(x)) is not None:
        return r
    if not math.isfinite(x):
        raise _Other  # json.dumps(allow_nan=False) words the error
    r = repr(x)
    if x:
        if len(_REPR) > _REPR_MAX:
            _REPR.clear()
        _REPR[x] = r
    return r


def _value(x: Any, kind: type, write: Callable[[Any], str], *, optional: bool = True) -> str:
    """A field's JSON: `write(x)` for exactly a `kind` (a bool is not an int here: `json.dumps`
    writes `true`), null for None where the field is `optional`."""
    if x is None and optional:
        return "null"
    if type(x) is not kind:
        raise _Other
    return write(x)


def _int(x: Any) -> str:
    return _value(x, int, repr)


def _count(x: Any) -> str:
    return _value(x, int, repr, optional=False)


def _str(x: Any) -> str:
    return _value(x, str, encode_str)


def _text(x: Any) -> str:
    return _value(x, str, encode_str, optional=False)


def _bool(x: Any) -> str:
    return _value(x, bool, lambda v: "true" if v else "false")


def _floats(xs: Any) -> str:
    """A `list[float | None] | None` field's JSON."""
    return _value(xs, list, lambda v: "[" + ",".join(map(_float, v)) + "]")


def _strs(xs: Any) -> str:
    """A `list[str]` field's JSON."""
    return _value(xs, list, lambda v: "[" + ",".join(map(_text, v)) + "]", optional=False)


def _estimate(e: Any) -> str:
    if type(e) is not Estimate:
        raise _Other
    d = e.__dict__
    return _ESTIMATE_FMT % (_float(d["value"]), _floats(d["ci"]), _str(d["method"]), _int(d["n"]), _str(d["slice"]),
                            _int(d["cells"]), _float(d["deff"]))


def _fields(obj: Any, cls: type, mapping: str) -> tuple[dict[str, Any], dict[Any, Any]]:
    """The fields of `obj`, exactly a `cls`, and its field `mapping`, exactly a dict."""
    if type(obj) is not cls or type(obj.__dict__[mapping]) is not dict:
        raise _Other
    return obj.__dict__, obj.__dict__[mapping]


def _scope(s: ScopeResult) -> str:
    try:
        d, by_slice = _fields(s, ScopeResult, "by_slice")
        slices = ",".join([_text(k) + ":" + _estimate(e) for k, e in by_slice.items()])
        return _SCOPE_FMT % (
            _count(d["n"]), slices, _estimate(d["pooled"]),
            _estimate(d["worst_slice"]), _estimate(d["max_minus_min"]), _float(d["p_value"]), _float(d["p_holm"]),
            _float(d["p_bh"]), _strs(d["caveats"]), _int(d["cells"]))
    except _Other:
        return compact_json(s.model_dump(mode="json"))


def _metric(m: MetricResult) -> str:
    try:
        d, scopes = _fields(m, MetricResult, "scopes")
        head = (f'{{"metric":{_text(d["metric"])},"kind":{_text(d["kind"])},'
                f'"higher_is_worse":{_bool(d["higher_is_worse"])},"description":{_text(d["description"])},"scopes":{{')
        keys = [_text(k) for k in scopes]
    except _Other:
        return compact_json(m.model_dump(mode="json"))
    return head + ",".join([k + ":" + _scope(s) for k, s in zip(keys, scopes.values(), strict=True)]) + "}}"


def metrics_json(metrics: list[MetricResult]) -> str:
    """`json.dumps` (results.json's settings) of `[m.model_dump(mode="json") for m in metrics]`."""
    if not FAST:
        return compact_json([m.model_dump(mode="json") for m in metrics])
    return "[" + ",".join(map(_metric, metrics)) + "]"
