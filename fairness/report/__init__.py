"""Stage 7 — rendering a `FairnessRun`: results.json, summary.md, the Fairness Card (YAML, Markdown, HTML), JUnit XML."""

from fairness.report._html import card_html
from fairness.report._junit import junit_xml
from fairness.report._render import card, card_md, card_yaml, results_json, summary_md

__all__ = ["card", "card_html", "card_md", "card_yaml", "junit_xml", "results_json", "summary_md"]
