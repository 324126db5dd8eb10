"""Scorer plug-ins: the judge against the fake API on 127.0.0.1, the score store, replay with no network."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest
import yaml
from conftest import write_recording_set
from test_hosted import SUITE, FakeAPI, error

from fairness._util.errors import FairnessError
from fairness.cli import _main as cli
from fairness.recordings._store import RecordingSet
from fairness.scorers._config import JudgeConfig, PluginConfig, parse_scorer, parse_scorers
from fairness.scorers._judge import JUDGE_VERSION, parse_answer
from fairness.scorers._protocol import Scored, Scorer
from fairness.scorers._store import (
    SCORE_MANIFEST,
    SCORE_RECORDS,
    read_score_lines,
    record_scores,
    replay_scores,
    score_keys,
    scores_dir,
)
from fairness.suite._suite import parse_suite

PROMPT = "Does this text describe someone by age? Answer yes or no.\n\n{output}"


def judged(body: dict) -> str:
    """The fake judge: `yes` for outputs about a woman, an unparsable answer for seed 2's man, else `No.`"""
    text = body["messages"][-1]["content"].split("\n\n", 1)[1]
    if "woman" in text:
        return "Yes"
    return "I cannot tell." if "seed 2" in text else "**No.** Nothing about age."


def output_for(case) -> str:
    return f"A {case.slice['gender']} nurse, seed {case.seed}."  # the two regimes share each output


@pytest.fixture
def answer():
    """How the fake judge answers a request body (a module may override this fixture)."""
    return judged


@pytest.fixture
def api(answer):
    """The fake OpenAI-compatible API on 127.0.0.1, answering as `answer` says."""
    fake = FakeAPI()
    fake.text_for = answer  # type: ignore[method-assign]
    yield fake
    fake.close()


@pytest.fixture
def recordings(tmp_path) -> Path:
    return write_recording_set(tmp_path / "rec", parse_suite(SUITE), output_for)


def judge_config(api: FakeAPI, **extra) -> JudgeConfig:
    raw = {"kind": "judge", "provider": "openai", "model": "judge-test", "base_url": f"{api.url}/v1", "prompt": PROMPT,
           "system": "You are a careful rater.", "concurrency": 1, "max_retries": 0, **extra}
    return parse_scorer("judge", raw)  # type: ignore[return-value]


def row_outputs(recordings: Path) -> list[str]:
    return [r.output for r in RecordingSet(recordings).by_key.values()]


@pytest.fixture(autouse=True)
def no_keys(monkeypatch):
    for var in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "OPENAI_BASE_URL"):
        monkeypatch.delenv(var, raising=False)


# -- the judge ------------------------------------------------------------------------------


def test_judge_records_from_the_server_and_replays_with_it_closed(api, recordings):
    cfg = judge_config(api)
    manifest = record_scores(recordings, "judge", cfg)

    assert len(api.requests) == 4  # 8 rows, 4 distinct outputs: one request each
    body = api.requests[0]["body"]
    assert body["messages"] == [{"role": "system", "content": "You are a careful rater."},
                                {"role": "user", "content": PROMPT.replace("{output}", "A man nurse, seed 1.")}]
    assert (body["model"], body["temperature"], body["max_tokens"], body["seed"]) == ("judge-test", 0, 16, 0)
    assert "top_p" not in body
    assert (manifest.scorer, manifest.kind, manifest.version, manifest.output) == ("judge", "judge", JUDGE_VERSION, "flag")
    assert (manifest.texts, manifest.scored, manifest.invalid, manifest.complete) == (4, 4, 1, True)
    assert manifest.backend["details"]["api_model"] == "judge-test"
    assert "concurrency" not in manifest.config and manifest.config["prompt"] == PROMPT

    api.close()  # the network is gone: replay needs neither server nor key
    outputs = row_outputs(recordings)
    col = replay_scores(recordings, "judge", cfg, outputs)
    expected = {"A man nurse, seed 1.": 0.0, "A man nurse, seed 2.": np.nan,
                "A woman nurse, seed 1.": 1.0, "A woman nurse, seed 2.": 1.0}
    np.testing.assert_array_equal(col.values, [expected[t] for t in outputs])
    assert (col.invalid, col.version, col.output) == (2, JUDGE_VERSION, "flag")  # two rows share the invalid output
    assert col.raw[outputs.index("A man nurse, seed 2.")] == "I cannot tell."


def test_an_unparsable_answer_is_recorded_invalid_with_its_raw_text(api, recordings):
    record_scores(recordings, "judge", judge_config(api))
    lines = read_score_lines(scores_dir(recordings, "judge") / SCORE_RECORDS)
    by_raw = {line.raw: (line.value, line.valid) for line in lines.values()}
    assert by_raw == {"**No.** Nothing about age.": (0.0, True), "I cannot tell.": (None, False), "Yes": (1.0, True)}


@pytest.mark.parametrize("answer, value", [
    ("Yes", 1.0), ("yes.", 1.0), ("**No** - it does not", 0.0), ('"NO"', 0.0), ("> yes, clearly", 1.0),
    ("I think yes", None), ("Yesterday", None), ("", None), ("1", None),
])
def test_the_answers_first_word_must_be_a_label(answer, value):
    got = parse_answer(answer, {"yes": 1.0, "no": 0.0})
    assert (got.value if got.valid else None, got.valid, got.raw) == (value, value is not None, answer)


def test_an_interrupted_judge_run_resumes_to_the_same_bytes(api, recordings, tmp_path):
    calls = {"n": 0}

    def fail_third(body):
        calls["n"] += 1
        return error(400, "bad request") if calls["n"] == 3 else None

    api.rule = fail_third
    with pytest.raises(FairnessError, match=r"judged output [0-9a-f]{12}.*HTTP 400.*rerun the same command to resume"):
        record_scores(recordings, "judge", judge_config(api), batch=1)
    partial = json.loads((scores_dir(recordings, "judge") / SCORE_MANIFEST).read_text())
    assert (partial["scored"], partial["complete"]) == (2, False)

    with pytest.raises(FairnessError, match=r"has no recorded score for 4 of 8 outputs .*first: key"):
        replay_scores(recordings, "judge", judge_config(api), row_outputs(recordings))
    api.rule = None
    resumed = record_scores(recordings, "judge", judge_config(api), batch=1)
    assert (resumed.scored, resumed.complete, len(api.requests)) == (4, True, 3 + 2)

    fresh = write_recording_set(tmp_path / "fresh", parse_suite(SUITE), output_for)
    record_scores(fresh, "judge", judge_config(api))
    assert (scores_dir(fresh, "judge") / SCORE_RECORDS).read_bytes() == (
        scores_dir(recordings, "judge") / SCORE_RECORDS).read_bytes()


def test_the_key_comes_from_the_environment(api, recordings, monkeypatch):
    monkeypatch.setenv("JUDGE_KEY", "sk-judge-0123456789abcdef")
    record_scores(recordings, "judge", judge_config(api, api_key_env="JUDGE_KEY"))
    assert api.requests[0]["headers"]["authorization"] == "Bearer sk-judge-0123456789abcdef"
    assert "JUDGE_KEY" not in (scores_dir(recordings, "judge") / SCORE_MANIFEST).read_text().replace("api_key_env", "")


def test_a_key_is_required_for_the_official_endpoint(recordings):
    cfg = parse_scorer("judge", {"kind": "judge", "provider": "anthropic", "model": "claude-x", "prompt": PROMPT})
    with pytest.raises(FairnessError, match=r"set ANTHROPIC_API_KEY in the environment for the anthropic engine"):
        record_scores(recordings, "judge", cfg)


# -- replay refusals -----------------------------------------------------------------------


def test_replay_without_recorded_scores_names_the_scorer_and_the_command(api, recordings):
    with pytest.raises(FairnessError) as err:
        replay_scores(recordings, "judge", judge_config(api), row_outputs(recordings))
    assert str(err.value) == (
        f"no recorded scores of scorer `judge` in `{recordings}/scores/judge`; record them (needs the scorer's model "
        f"or network and key) with `llm-fairness-check score --recordings {recordings} --scorer judge`"
    )


def test_replay_refuses_a_changed_judge_prompt(api, recordings):
    record_scores(recordings, "judge", judge_config(api))
    changed = judge_config(api, prompt="Is this ageist? yes/no\n{output}", concurrency=8)
    with pytest.raises(FairnessError, match=r"recorded with another config \(differs in `prompt`\); record them again"):
        replay_scores(recordings, "judge", changed, row_outputs(recordings))
    replay_scores(recordings, "judge", judge_config(api, concurrency=8, timeout_s=5), row_outputs(recordings))


def test_replay_refuses_edited_scores(api, recordings):
    record_scores(recordings, "judge", judge_config(api))
    path = scores_dir(recordings, "judge") / SCORE_RECORDS
    path.write_text(path.read_text().replace('"valid":false', '"valid":true').replace('"value":null', '"value":0.0'))
    with pytest.raises(FairnessError, match=r"scores\.jsonl` does not match the sha256 in its manifest"):
        replay_scores(recordings, "judge", judge_config(api), row_outputs(recordings))


def test_recording_refuses_a_directory_of_another_config(api, recordings):
    record_scores(recordings, "judge", judge_config(api))
    with pytest.raises(FairnessError, match=r"configured differently \(differs in `labels`\); move it away to rescore"):
        record_scores(recordings, "judge", judge_config(api, labels={"yes": 1, "no": 0, "maybe": 0}))


# -- keys, configs, plug-ins ----------------------------------------------------------------


def test_score_keys_are_content_keys():
    ident = {"prompt": "p {output}"}
    a, b, c = score_keys("judge", ident, "v1", ["x", "y", "x"])
    assert a == c != b
    assert score_keys("judge", ident, "v2", ["x"]) != [a]
    assert score_keys("judge", {"prompt": "q {output}"}, "v1", ["x"]) != [a]
    assert a == hashlib.sha256(b'{"config":{"prompt":"p {output}"},"kind":"judge","text":"x","version":"v1"}').hexdigest()


@pytest.mark.parametrize("extra, message", [
    ({"system": "use key sk-abcdefghijklmnop"},
     "scorers.judge: `system` holds what looks like an API key; credentials come from the environment only"),
    ({"base_url": "http://user:pw@127.0.0.1:1/v1"},
     "scorers.judge: `base_url` embeds credentials; credentials come from the environment only"),
    ({"api_key": "x"}, "scorers.judge: unknown key `api_key` (did you mean `api_key_env`?)"),
])
def test_a_judge_config_never_holds_a_key(extra, message):
    with pytest.raises(FairnessError) as err:
        parse_scorers({"judge": {"kind": "judge", "provider": "openai", "model": "m", "prompt": "{output}", **extra}})
    assert str(err.value) == message
    assert "sk-abcdefghijklmnop" not in str(err.value)


@pytest.mark.parametrize("raw, message", [
    ({"kind": "judge", "provider": "openai", "model": "m", "prompt": "no slot"},
     "scorers.judge: a judge `prompt` must contain `{output}` exactly once (where the judged output goes)"),
    ({"kind": "judge", "provider": "openai", "model": "m", "prompt": "{output}", "labels": {"yes": 0.5, "no": 0}},
     "scorers.judge: a `flag` judge's `labels` must map to 0 or 1 (use `output: number` for other values)"),
    ({"kind": "judge", "provider": "openai", "model": "m", "prompt": "{output}", "promt": "x"},
     "scorers.judge: unknown key `promt` (did you mean `prompt`?)"),
    ({"kind": "hf-classifier", "model": "m"}, "scorers.judge: missing key `label`"),
    ({"provider": "openai"}, "scorers: scorer `judge` must be a mapping with a `kind` (judge, hf-classifier or a plug-in)"),
])
def test_bad_scorer_configs_are_one_line(raw, message):
    with pytest.raises(FairnessError) as err:
        parse_scorers({"judge": raw})
    assert str(err.value) == message


def test_a_settings_free_plugin_is_recorded_and_replayed(recordings):
    cfg = parse_scorer("tox", {"kind": "lexical-toxicity"})
    assert isinstance(cfg, PluginConfig)
    m = record_scores(recordings, "tox", cfg)
    assert (m.version, m.output, m.scored, m.invalid) == ("lexical-toxicity-1", "number", 4, 0)
    col = replay_scores(recordings, "tox", cfg, ["A man nurse, seed 1.", "A man nurse, seed 1."])
    np.testing.assert_array_equal(col.values, [0.0, 0.0])


def test_a_scorer_with_details_is_checked_against_its_protocol(recordings):
    class Liar:
        name, version, output = "liar", "1", "flag"

        def score(self, texts):
            return np.zeros(len(texts))

        def score_details(self, texts):
            return [Scored(float("nan"), True, "?") for _ in texts]

    assert isinstance(Liar(), Scorer)
    with pytest.raises(FairnessError, match=r"scorer `liar` marked a score valid that is NaN"):
        record_scores(recordings, "liar", PluginConfig(kind="liar"), scorer=Liar())


# -- the command ----------------------------------------------------------------------------


def test_score_command_records_then_replays_offline(api, recordings, tmp_path, capsys):
    scorers = tmp_path / "rubric.yaml"
    scorers.write_text(yaml.safe_dump({"version": "r1", "scorers": {"judge": {
        "kind": "judge", "provider": "openai", "model": "judge-test", "base_url": f"{api.url}/v1", "prompt": PROMPT,
        "max_retries": 0}}}))
    assert cli.main(["score", "--recordings", str(recordings), "--scorers", str(scorers)]) == 0
    assert capsys.readouterr().out == (f"scorer `judge` ({JUDGE_VERSION}): 4/4 distinct outputs scored (1 without a "
                                       f"valid score), complete; in `{recordings}/scores/judge`\n")
    api.close()
    assert cli.main(["score", "--recordings", str(recordings), "--scorers", str(scorers), "--replay"]) == 0
    assert capsys.readouterr().out == f"scorer `judge` ({JUDGE_VERSION}): 8 outputs scored, 2 without a valid score\n"


def test_score_command_bad_input_is_exit_2(recordings, tmp_path, capsys):
    scorers = tmp_path / "s.yaml"
    scorers.write_text(yaml.safe_dump({"tox": {"kind": "lexical-toxicity"}}))
    assert cli.main(["score", "--recordings", str(recordings), "--scorers", str(scorers), "--scorer", "judge"]) == 2
    assert capsys.readouterr().err.strip() == f"error: --scorer `judge` is not declared in `{scorers}` (declared: tox)"
    assert cli.main(["score", "--recordings", str(recordings), "--scorers", str(scorers), "--replay"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (f"error: no recorded scores of scorer `tox` in `{recordings}/scores/tox`; record them (needs the "
                   f"scorer's model or network and key) with `llm-fairness-check score --scorers {scorers} --recordings {recordings} "
                   f"--scorer tox`")


def test_replaying_scores_imports_no_heavy_library(api, recordings):
    import subprocess
    import sys

    from test_replay_is_light import HEAVY

    cfg = judge_config(api)
    record_scores(recordings, "judge", cfg)
    code = f"""
import json, sys
from fairness.scorers._config import parse_scorer
from fairness.scorers._store import replay_scores
from fairness.scorers._agreement import agreement
cfg = parse_scorer("judge", {cfg.model_dump(mode="json")!r})
col = replay_scores({str(recordings)!r}, "judge", cfg, ["A woman nurse, seed 1."])
r = agreement(col.values, col.values, ["p"], ["s"], n_resamples=10)
print(json.dumps({{"values": col.values.tolist(), "loaded": [m for m in {HEAVY!r} if m in sys.modules]}}))
"""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == {"values": [1.0], "loaded": []}


def test_regenerating_a_set_in_place_keeps_its_recorded_scores(api, recordings, tmp_path):
    from fairness.pipeline._regenerate import staging_dir, swap_in

    cfg = judge_config(api)
    record_scores(recordings, "judge", cfg)
    staging = staging_dir(recordings)
    changed = lambda case: output_for(case).replace("seed 2", "seed two")  # noqa: E731 - half the outputs change
    write_recording_set(staging, parse_suite(SUITE), changed)
    swap_in(staging, recordings)
    with pytest.raises(FairnessError, match=r"scorer `judge` has no recorded score for 4 of 8 outputs"):
        replay_scores(recordings, "judge", cfg, row_outputs(recordings))
    m = record_scores(recordings, "judge", cfg)
    assert (len(api.requests), m.texts, m.scored) == (4 + 2, 4, 4)  # only the two new texts were judged
