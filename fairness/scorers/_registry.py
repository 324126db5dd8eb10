"""Finding scorers: the built-ins and those registered under the `fairness.scorers` entry points.

A plug-in declares, in its `pyproject.toml`::

    [project.entry-points."fairness.scorers"]
    detoxify = "my_plugin:DetoxifyScorer"    # a class or factory called with no arguments

and the object it returns must satisfy `Scorer` (`name`, `version`, `output`, `score`).
`judge` and `hf-classifier` need their settings, so they are built from a rubric's config
(`build_scorer`); `vader` and `lexical-toxicity` (the sentiment evaluator's) need none.
"""

from __future__ import annotations

import importlib
from importlib.metadata import entry_points

from fairness._util.errors import FairnessError
from fairness.scorers._config import HFClassifierConfig, JudgeConfig, ScorerConfig
from fairness.scorers._protocol import Scorer

ENTRY_POINT_GROUP = "fairness.scorers"
BUILTIN_SCORERS: dict[str, str] = {
    "vader": "fairness.evaluators.sentiment:VaderScorer",
    "lexical-toxicity": "fairness.evaluators.sentiment:LexicalToxicityScorer",
}
"""Built-ins needing no settings, as `module:attr` (imported only when asked for)."""
CONFIGURED = ("judge", "hf-classifier")
"""Built-ins built from a rubric's `scorers:` entry."""


def available_scorers() -> dict[str, str]:
    """Scorer names and where they come from (`built-in` or the entry point's `module:attr`)."""
    found = dict.fromkeys([*BUILTIN_SCORERS, *CONFIGURED], "built-in")
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        found.setdefault(ep.name, ep.value)
    return found


def load_scorer(name: str) -> Scorer:
    """Instantiate a settings-free built-in or a scorer registered under `fairness.scorers`.

    Raises:
        FairnessError: the name is unknown or needs settings, the plug-in fails to load, or it
            does not satisfy `Scorer`.
    """
    if name in BUILTIN_SCORERS:
        module, attr = BUILTIN_SCORERS[name].split(":")
        return getattr(importlib.import_module(module), attr)()
    if name in CONFIGURED:
        raise FairnessError(f"scorer `{name}` needs its settings: declare it under a rubric's `scorers:`")
    eps = [ep for ep in entry_points(group=ENTRY_POINT_GROUP) if ep.name == name]
    if not eps:
        raise FairnessError(f"unknown scorer `{name}` (available: {', '.join(sorted(available_scorers()))})")
    try:
        obj = eps[0].load()
        scorer = obj() if isinstance(obj, type) or not isinstance(obj, Scorer) else obj
    except FairnessError:
        raise
    except Exception as exc:  # noqa: BLE001 - any failure of a third-party plug-in is the user's to fix
        raise FairnessError(f"scorer `{name}` ({eps[0].value}) failed to load: {exc}") from None
    if not isinstance(scorer, Scorer) or scorer.output not in ("flag", "number") or not isinstance(scorer.version, str):
        raise FairnessError(
            f"scorer `{name}` ({eps[0].value}) does not satisfy the `{ENTRY_POINT_GROUP}` protocol: it needs "
            "`name`, `version` (a string), `output` (`flag` or `number`) and `score(texts)`"
        )
    return scorer


def build_scorer(name: str, config: ScorerConfig) -> Scorer:
    """The scorer a rubric's `scorers:` entry `name` describes (models load here, lazily)."""
    if isinstance(config, JudgeConfig):
        from fairness.scorers._judge import JudgeScorer

        return JudgeScorer(config, name)
    if isinstance(config, HFClassifierConfig):
        from fairness.scorers._hf import HFClassifierScorer

        return HFClassifierScorer(config, name)
    return load_scorer(config.kind)
