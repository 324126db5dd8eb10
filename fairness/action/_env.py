"""Where an Action input's value comes from: `FAIRNESS_*` or GitHub's `INPUT_*`.

The composite action passes inputs as `FAIRNESS_*` (composite actions get no `INPUT_*`);
a container started by GitHub as a Docker action, or by `docker run -e INPUT_...` in
another CI system, passes `INPUT_<NAME>` — the input's name upper-cased, hyphens kept
(`INPUT_OUT-DIR`), which shells cannot export, so `INPUT_OUT_DIR` is accepted too.
Every spelling means the same input; two different non-empty values are bad input,
never a silent choice.
"""

from __future__ import annotations

from collections.abc import Mapping

from fairness._util.errors import FairnessError


def spellings(name: str, fairness_var: str) -> tuple[str, ...]:
    """The environment variables that carry input `name`, in order of precedence."""
    upper = name.upper().replace(" ", "_")
    return tuple(dict.fromkeys((fairness_var, f"INPUT_{upper}", f"INPUT_{upper.replace('-', '_')}")))


def input_value(env: Mapping[str, str], name: str, fairness_var: str) -> str | None:
    """The raw value of input `name`; None when no spelling is set, "" when all are empty."""
    present = {var: env[var] for var in spellings(name, fairness_var) if var in env}
    if not present:
        return None
    given = {var: value for var, value in present.items() if value.strip()}
    if len({value.strip() for value in given.values()}) > 1:
        raise FairnessError(f"input `{name}` is set twice with different values ({', '.join(given)}); set only one")
    return next(iter(given.values()), "")
