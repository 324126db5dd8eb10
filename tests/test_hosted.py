"""Hosted engines (OpenAI, Anthropic) against a local fake API on 127.0.0.1: no network, no real keys."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from local_server import JsonHandler, serve, stop

from fairness._util.errors import FairnessError
from fairness.cli import _main as cli
from fairness.generate._dry_run import load_prices, plan_dry_run
from fairness.generate._loop import generate
from fairness.generate.engines._retry import RetryPolicy, parse_retry_after
from fairness.generate.engines.anthropic_engine import AnthropicEngine
from fairness.generate.engines.hosted import ProviderConfig, ProviderError, load_provider_config
from fairness.generate.engines.openai_engine import OpenAIEngine
from fairness.recordings._store import MANIFEST, RECORDS, ModelInfo, iter_records, read_manifest
from fairness.suite._suite import parse_suite

OPENAI_KEY = "sk-test-openai-0123456789abcdef"
ANTHROPIC_KEY = "sk-ant-test-0123456789abcdef"
SUITE = {
    "name": "tiny-hosted",
    "system_prompt": "You are a helpful assistant.",
    "attributes": {"gender": ["man", "woman"]},
    "insertion": {"placeholder": "A", "template": "a {gender}"},
    "placeholders": {"OCC": {"values": ["nurse"]}},
    "families": [{"id": "F1", "name": "Description", "paraphrases": ["Describe {A} who works as a {OCC}."]}],
    "regimes": [
        {"name": "low", "temperature": 0.2, "top_p": 0.9, "max_new_tokens": 32},
        {"name": "short", "temperature": 0.7, "top_p": 0.95, "max_new_tokens": 4},
    ],
    "seeds": [1, 2],
}
ROWS = 8  # 2 slices x 2 regimes x 2 seeds

Reply = tuple[int, dict[str, str], bytes]


# -- a fake provider ---------------------------------------------------------------------


class FakeAPI:
    """Speaks OpenAI chat completions (/v1/chat/completions) and Anthropic messages (/v1/messages).

    `script` replies are served first, in order; then `rule(body)` may return a reply;
    otherwise a well-formed answer that echoes the prompt, temperature and seed.
    """

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.script: list[Reply] = []
        self.rule: Callable[[dict], Reply | None] | None = None
        self.lock = threading.Lock()
        api = self

        class Handler(JsonHandler):
            def do_POST(self) -> None:
                body = self.read_json()
                with api.lock:
                    headers = {k.lower(): v for k, v in self.headers.items()}
                    api.requests.append({"path": self.path, "headers": headers, "body": body})
                    reply = api.script.pop(0) if api.script else (api.rule(body) if api.rule else None)
                status, headers, payload = reply or api.answer(self.path, body)
                self.send_json(status, payload, headers)

        self.server, self.url = serve(Handler)

    @staticmethod
    def text_for(body: dict) -> str:
        prompt = body["messages"][-1]["content"]
        return f"  Answer to: {prompt} (T={body.get('temperature')}, seed={body.get('seed')})\n"

    def answer(self, path: str, body: dict) -> Reply:
        text = self.text_for(body)
        if path.endswith("/chat/completions"):
            limit = body.get("max_tokens") or body.get("max_completion_tokens")
            reply = {
                "id": "chatcmpl-1",
                "object": "chat.completion",
                "created": 0,
                "model": body["model"],
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": text},
                        "finish_reason": "length" if limit <= 4 else "stop",
                    }
                ],
                "usage": {"prompt_tokens": 11, "completion_tokens": 4, "total_tokens": 15},
            }
        elif path.endswith("/messages"):
            reply = {
                "id": "msg_1",
                "type": "message",
                "role": "assistant",
                "model": body["model"],
                "content": [{"type": "text", "text": text}],
                "stop_reason": "max_tokens" if body["max_tokens"] <= 4 else "end_turn",
                "stop_sequence": None,
                "usage": {"input_tokens": 12, "output_tokens": 5},
            }
        else:
            return 404, {}, b'{"error": {"message": "no such route"}}'
        return 200, {}, json.dumps(reply).encode()

    def request_for(self, case) -> dict[str, Any]:
        """The request that asked for this grid row (requests arrive in any order under concurrency)."""
        for req in self.requests:
            body = req["body"]
            if (body["messages"][-1]["content"] == case.prompt and body.get("max_tokens") == case.params.max_new_tokens
                    and body.get("seed", case.seed) == case.seed and body.get("temperature") == case.params.temperature):
                return req
        raise AssertionError(f"no request for {case.row_id}")

    def close(self) -> None:
        stop(self.server)


def error(status: int, message: str = "boom", headers: dict[str, str] | None = None) -> Reply:
    return status, headers or {}, json.dumps({"error": {"type": "api_error", "message": message}}).encode()


@pytest.fixture
def api():
    fake = FakeAPI()
    yield fake
    fake.close()


@pytest.fixture
def suite():
    return parse_suite(SUITE)


@pytest.fixture
def suite_file(tmp_path: Path) -> Path:
    path = tmp_path / "suite.yaml"
    path.write_text(yaml.safe_dump(SUITE), encoding="utf-8")
    return path


@pytest.fixture(autouse=True)
def keys(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", OPENAI_KEY)
    monkeypatch.setenv("ANTHROPIC_API_KEY", ANTHROPIC_KEY)
    for var in ("OPENAI_BASE_URL", "ANTHROPIC_BASE_URL", "FAIRNESS_ALLOW_LIVE"):
        monkeypatch.delenv(var, raising=False)


def make_engine(kind: str, api: FakeAPI, sleeps: list[float] | None = None, **config: Any):
    """An engine pointed at the fake API, with sleeps recorded instead of waited."""
    sleeps = [] if sleeps is None else sleeps
    if kind == "openai":
        cfg = ProviderConfig(base_url=f"{api.url}/v1", **config)
        return OpenAIEngine("gpt-test", cfg, OPENAI_KEY, sleep=sleeps.append)
    cfg = ProviderConfig(base_url=api.url, **config)
    return AnthropicEngine("claude-test", cfg, ANTHROPIC_KEY, sleep=sleeps.append)


def run(suite, engine, out: Path, **kwargs):
    try:
        return generate(suite, engine, ModelInfo(id=engine.model, source="test"), out, progress=False, **kwargs)
    finally:
        engine.close()


def records(out: Path) -> list:
    return list(iter_records(out / RECORDS))


# -- normal answers ------------------------------------------------------------------------


def test_openai_rows_are_recorded_with_the_suites_sampling(api, suite, tmp_path):
    report = run(suite, make_engine("openai", api, concurrency=3), tmp_path / "out")

    assert report.complete and report.written == ROWS
    recs = records(tmp_path / "out")
    assert [r.row_id for r in recs] == [c.row_id for c in suite.expand()]  # grid order despite concurrency
    case = suite.expand()[0]
    assert recs[0].output == f"Answer to: {case.prompt} (T=0.2, seed=1)"
    assert (recs[0].prompt_tokens, recs[0].completion_tokens) == (11, 4)
    assert {r.regime: r.finish_reason for r in recs} == {"low": "stop", "short": "length"}

    first = api.request_for(case)
    body = first["body"]
    assert body["messages"][0] == {"role": "system", "content": "You are a helpful assistant."}
    assert body["model"] == "gpt-test"
    assert {k: body[k] for k in ("temperature", "top_p", "seed", "max_tokens")} == {
        "temperature": 0.2,
        "top_p": 0.9,
        "seed": 1,
        "max_tokens": 32,
    }
    assert first["headers"]["authorization"] == f"Bearer {OPENAI_KEY}"

    manifest = read_manifest(tmp_path / "out")
    assert manifest.complete and manifest.backend.engine == "openai"
    assert manifest.batch_plan["batch_size"] == 3
    assert manifest.effective_sampling["low"]["temperature"] == 0.2


def test_anthropic_rows_are_recorded_without_a_seed(api, suite, tmp_path):
    report = run(suite, make_engine("anthropic", api, concurrency=2), tmp_path / "out")

    assert report.complete
    recs = records(tmp_path / "out")
    assert {r.regime: r.finish_reason for r in recs} == {"low": "stop", "short": "length"}
    assert (recs[0].prompt_tokens, recs[0].completion_tokens) == (12, 5)
    first = api.request_for(suite.expand()[0])
    assert first["path"] == "/v1/messages"
    assert first["body"]["system"] == "You are a helpful assistant."
    assert first["body"]["messages"] == [{"role": "user", "content": suite.expand()[0].prompt}]
    assert (first["body"]["temperature"], first["body"]["top_p"]) == (0.2, 0.9)
    assert "seed" not in first["body"]
    assert first["headers"]["anthropic-version"] == "2023-06-01"  # the version that accepts sampling
    sampling = read_manifest(tmp_path / "out").effective_sampling["low"]
    assert sampling["seed"] is None and "no seed" in sampling["seed_note"]


def test_sampling_parameters_a_model_rejects_can_be_left_out(api, suite, tmp_path):
    run(suite, make_engine("anthropic", api, sampling=[]), tmp_path / "a")
    run(suite, make_engine("openai", api, sampling=["temperature"]), tmp_path / "o")

    anthropic, openai = api.requests[:ROWS], api.requests[ROWS:]
    assert not any("temperature" in r["body"] or "top_p" in r["body"] for r in anthropic)
    assert all(r["headers"]["anthropic-version"] != "2023-06-01" for r in anthropic)
    assert {r["body"]["temperature"] for r in openai} == {0.2, 0.7}
    assert not any("top_p" in r["body"] for r in openai)
    assert read_manifest(tmp_path / "o").effective_sampling["low"]["top_p"] is None


# -- retries ---------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
def test_rate_limits_back_off_then_succeed(api, suite, tmp_path, kind):
    api.script = [error(429, headers={"retry-after": "7"}), error(429), error(503)]
    sleeps: list[float] = []

    report = run(suite, make_engine(kind, api, sleeps, concurrency=1, backoff_base_s=1.0), tmp_path / "out")

    assert report.complete and len(records(tmp_path / "out")) == ROWS
    assert len(api.requests) == ROWS + 3
    assert sleeps[0] == 7.0  # the server's Retry-After wins
    assert 1.0 <= sleeps[1] <= 2.0  # then 2^n backoff with jitter
    assert 2.0 <= sleeps[2] <= 4.0


def test_server_errors_until_retries_run_out_keep_rows_and_a_rerun_resumes(api, suite, tmp_path):
    out = tmp_path / "out"
    poisoned = suite.expand()[5]  # the second batch of 2 rows holds rows 2 and 3; the third rows 4 and 5

    def fail_poisoned(body: dict) -> Reply | None:
        hit = body["messages"][-1]["content"] == poisoned.prompt and body["seed"] == poisoned.seed
        return error(500, "upstream exploded") if hit and body["temperature"] == poisoned.params.temperature else None

    api.rule = fail_poisoned
    sleeps: list[float] = []
    with pytest.raises(ProviderError) as info:
        run(suite, make_engine("openai", api, sleeps, concurrency=2, max_retries=2), out)

    message = str(info.value)
    assert f"row `{poisoned.row_id}` failed after 3 attempts" in message
    assert "HTTP 500" in message and "rerun" in message
    assert len(sleeps) == 2
    kept = records(out)
    assert [r.row_id for r in kept] == [c.row_id for c in suite.expand()[:4]]  # whole batches before the failure
    manifest = read_manifest(out)
    assert not manifest.complete and manifest.rows == 4

    api.rule, api.requests = None, []
    report = run(suite, make_engine("openai", api, concurrency=2), out)

    assert report.complete and report.already == 4 and report.written == ROWS - 4
    assert len(api.requests) == ROWS - 4  # nothing re-requested
    keys = [r.key for r in records(out)]
    assert len(keys) == ROWS == len(set(keys))


def test_connection_errors_are_retried(suite, tmp_path):
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cfg = ProviderConfig(base_url=f"http://127.0.0.1:{port}/v1", max_retries=1, timeout_s=5, concurrency=1)
    sleeps: list[float] = []
    with pytest.raises(ProviderError, match="failed after 2 attempts \\(connection error"):
        run(suite, OpenAIEngine("gpt-test", cfg, OPENAI_KEY, sleep=sleeps.append), tmp_path / "out")
    assert len(sleeps) == 1


def test_client_errors_are_not_retried(api, suite, tmp_path):
    api.rule = lambda body: error(400, "`temperature` is deprecated for this model")
    with pytest.raises(ProviderError, match=r"HTTP 400.*deprecated.*sampling:"):
        run(suite, make_engine("anthropic", api, concurrency=1), tmp_path / "out")
    assert len(api.requests) == 1


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
@pytest.mark.parametrize(
    "reply",
    [
        (200, {}, b"this is not json"),
        (200, {}, b'{"unexpected": true}'),
        (200, {}, b"[]"),
        (200, {"content-type": "text/plain"}, b"plain text"),
    ],
    ids=["not-json", "wrong-shape", "list", "text-plain"],
)
def test_malformed_bodies_fail_clearly(api, suite, tmp_path, kind, reply):
    api.script = [reply]
    with pytest.raises(ProviderError, match="malformed response"):
        run(suite, make_engine(kind, api, concurrency=1), tmp_path / "out")
    assert len(api.requests) == 1  # not retried
    assert records(tmp_path / "out") == []


def test_retry_after_parsing():
    assert parse_retry_after({"retry-after": "3"}) == 3.0
    assert parse_retry_after({"retry-after-ms": "250", "retry-after": "9"}) == 0.25
    assert parse_retry_after({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}) == 0.0  # in the past
    assert parse_retry_after({"retry-after": "soon"}) is None
    assert parse_retry_after(None) is None
    assert RetryPolicy(max_retry_after=30).delay(0, 3600) == 30  # a bogus header cannot stall a run


# -- the request cap -----------------------------------------------------------------------


def test_request_cap_stops_cleanly_and_a_rerun_continues(api, suite, tmp_path):
    out = tmp_path / "out"
    engine = make_engine("openai", api, concurrency=3, max_requests_per_run=4)
    report = run(suite, engine, out)

    assert engine.cap_reached and engine.requests == 4
    assert len(api.requests) == 4 and report.written == 4 and not report.complete
    manifest = read_manifest(out)
    assert not manifest.complete and manifest.rows == 4

    api.requests = []
    report = run(suite, make_engine("openai", api, concurrency=3), out)
    assert report.complete
    keys = [r.key for r in records(out)]
    assert len(keys) == ROWS == len(set(keys))
    # The driver sends whole planned batches, so the done row of the cut batch may be asked again.
    assert ROWS - 4 <= len(api.requests) <= ROWS - 3


# -- the CLI -------------------------------------------------------------------------------


def cli_run(argv: list[str], capsys) -> tuple[int, str, str]:
    code = cli.main(argv)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def generate_argv(api: FakeAPI, suite_file: Path, out: Path, engine: str = "openai", *extra: str) -> list[str]:
    url = f"{api.url}/v1" if engine == "openai" else api.url
    model = "gpt-test" if engine == "openai" else "claude-test"
    return ["generate", "--suite", str(suite_file), "--engine", engine, "--model", model, "--base-url", url,
            "--out", str(out), "--live", "--no-progress", *extra]  # fmt: skip


@pytest.mark.parametrize("engine", ["openai", "anthropic"])
def test_cli_generate_hosted(api, suite_file, tmp_path, capsys, engine):
    code, out, err = cli_run(generate_argv(api, suite_file, tmp_path / "out", engine, "--concurrency", "2"), capsys)
    assert code == 0, err
    assert f"{ROWS}/{ROWS} rows recorded (complete)" in out
    assert read_manifest(tmp_path / "out").backend.details["concurrency"] == 2


def test_cli_generate_needs_the_live_opt_in(api, suite_file, tmp_path, capsys):
    argv = [a for a in generate_argv(api, suite_file, tmp_path / "out") if a != "--live"]
    code, _, err = cli_run(argv, capsys)
    assert code == 2 and "opt-in" in err
    assert api.requests == []


def test_cli_generate_needs_a_key_from_the_environment(suite_file, tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY")
    argv = ["generate", "--suite", str(suite_file), "--engine", "openai", "--model", "gpt-test",
            "--out", str(tmp_path / "out"), "--live"]  # fmt: skip
    code, _, err = cli_run(argv, capsys)
    assert code == 2 and "set OPENAI_API_KEY in the environment" in err


def test_cli_request_cap(api, suite_file, tmp_path, capsys):
    code, out, _ = cli_run(generate_argv(api, suite_file, tmp_path / "out", "openai", "--max-requests", "3"), capsys)
    assert code == 0
    assert f"3/{ROWS} rows recorded (incomplete)" in out and "request cap" in out
    assert len(api.requests) == 3


@pytest.mark.parametrize(
    "config",
    [
        {"api_key": OPENAI_KEY},
        {"openai_api_key": "whatever"},
        {"token": "abc"},
        {"password": "hunter2"},
        {"headers": {"Authorization": "xyz"}},
        {"model": OPENAI_KEY},
        {"base_url": "https://user:pass@example.invalid/v1"},
    ],
    ids=["api_key", "prefixed", "token", "password", "nested", "key-shaped-value", "url-userinfo"],
)
def test_credentials_in_the_provider_config_are_refused(api, suite_file, tmp_path, capsys, config):
    cfg = tmp_path / "provider.yaml"
    cfg.write_text(yaml.safe_dump(config), encoding="utf-8")
    argv = generate_argv(api, suite_file, tmp_path / "out", "openai", "--provider-config", str(cfg))
    code, out, err = cli_run(argv, capsys)
    assert code == 2
    assert "credentials come from the environment only" in err and len(err.strip().splitlines()) == 1
    assert OPENAI_KEY not in out + err and "hunter2" not in err
    assert api.requests == []


def test_credentials_in_the_base_url_flag_are_refused(api, suite_file, tmp_path, capsys):
    argv = [*generate_argv(api, suite_file, tmp_path / "out"), "--base-url", "http://me:pw@127.0.0.1:9/v1"]
    code, _, err = cli_run(argv, capsys)
    assert code == 2 and "--base-url embeds credentials" in err and "pw" not in err


def test_unknown_and_conflicting_provider_config_keys_are_refused(tmp_path):
    path = tmp_path / "provider.yaml"
    path.write_text("colour: red\n", encoding="utf-8")
    with pytest.raises(FairnessError, match="unknown key `colour`"):
        load_provider_config(path)
    path.write_text(
        "provider: openai\nbase_url: http://127.0.0.1:1/v1\nconcurrency: 8\nmax_requests_per_run: 100\n"
        "max_retries: 3\napi_key_env: MY_KEY\nsampling: [temperature]\nmax_tokens_field: max_tokens\n"
        "prices: {my-model: {input: 1.5, output: 2}}\n",
        encoding="utf-8",
    )
    cfg = load_provider_config(path)
    assert cfg.concurrency == 8 and cfg.prices["my-model"].input == 1.5


def test_provider_config_for_another_provider_is_refused(api, suite_file, tmp_path, capsys):
    cfg = tmp_path / "provider.yaml"
    cfg.write_text("provider: anthropic\n", encoding="utf-8")
    code, _, err = cli_run(
        generate_argv(api, suite_file, tmp_path / "out", "openai", "--provider-config", str(cfg)), capsys
    )
    assert code == 2 and "--engine is `openai`" in err


@pytest.mark.parametrize("status", [401, 500])
def test_the_key_never_appears_in_output(api, suite_file, tmp_path, capsys, status):
    # A hostile or buggy server echoes the credentials it received.
    api.rule = lambda body: error(status, f"invalid credentials: {api.requests[-1]['headers'].get('authorization')}")
    cfg = tmp_path / "provider.yaml"
    cfg.write_text("max_retries: 0\n", encoding="utf-8")
    argv = generate_argv(api, suite_file, tmp_path / "out", "openai", "--provider-config", str(cfg))
    code, out, err = cli_run(argv, capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert OPENAI_KEY not in out + err and "***" in err
    if status == 401:
        assert "check OPENAI_API_KEY" in err
    assert OPENAI_KEY not in (tmp_path / "out" / MANIFEST).read_text(encoding="utf-8")


# -- dry-run -------------------------------------------------------------------------------


def dry_run_argv(suite_file: Path, out: Path, *extra: str, engine: str = "openai", model: str = "gpt-4o-mini"):
    return ["dry-run", "--suite", str(suite_file), "--engine", engine, "--model", model, "--out", str(out), *extra]


@pytest.fixture
def no_network(monkeypatch):
    def refuse(*args: Any, **kwargs: Any):
        raise AssertionError("dry-run opened a connection")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.delenv("OPENAI_API_KEY")
    monkeypatch.delenv("ANTHROPIC_API_KEY")


def test_dry_run_counts_requests_and_estimates_cost(suite, suite_file, tmp_path, capsys, no_network):
    code, out, err = cli_run(dry_run_argv(suite_file, tmp_path / "out"), capsys)
    assert code == 0, err
    assert f"{ROWS} requests for the grid" in out and f"0 already recorded in `{tmp_path / 'out'}`; {ROWS} to go" in out

    plan = plan_dry_run(suite, "gpt-4o-mini", tmp_path / "out")
    cases = suite.expand()
    assert plan.output_tokens == sum(c.params.max_new_tokens for c in cases)
    assert plan.input_tokens == sum(-(-len(suite.system_prompt + c.prompt) // 4) for c in cases)
    price = load_prices().lookup("gpt-4o-mini")[1]
    cost = plan.input_tokens * price.input / 1e6 + plan.output_tokens * price.output / 1e6
    assert f"at most ${cost:,.2f}" in out


def test_dry_run_counts_rows_already_recorded(api, suite, suite_file, tmp_path, capsys):
    engine = make_engine("openai", api, concurrency=1, max_requests_per_run=3)
    engine.model = "gpt-4o-mini-2024-07-18"  # a dated snapshot takes its base name's price
    run(suite, engine, tmp_path / "out")
    code, out, _ = cli_run(dry_run_argv(suite_file, tmp_path / "out", model="gpt-4o-mini-2024-07-18"), capsys)
    assert code == 0
    assert f"3 already recorded in `{tmp_path / 'out'}`; {ROWS - 3} to go" in out
    assert "`gpt-4o-mini`: $0.15 input" in out

    code, out, _ = cli_run(dry_run_argv(suite_file, tmp_path / "out", model="other-model"), capsys)
    assert "0 already recorded" in out and "generate would refuse it" in out


def test_dry_run_unknown_model_and_price_overrides(suite_file, tmp_path, capsys, no_network):
    code, out, _ = cli_run(dry_run_argv(suite_file, tmp_path / "out", engine="anthropic", model="claude-new"), capsys)
    assert code == 0 and "unknown model `claude-new`" in out
    cfg = tmp_path / "provider.yaml"
    cfg.write_text("prices: {claude-new: {input: 2, output: 10}}\n", encoding="utf-8")
    argv = dry_run_argv(
        suite_file, tmp_path / "out", "--provider-config", str(cfg), engine="anthropic", model="claude-new"
    )
    code, out, _ = cli_run(argv, capsys)
    assert code == 0 and "$2 input / $10 output per 1M tokens; --provider-config" in out


def test_dry_run_local_engine_has_no_token_cost(suite_file, tmp_path, capsys, no_network):
    code, out, _ = cli_run(dry_run_argv(suite_file, tmp_path / "out", engine="transformers", model="org/model"), capsys)
    assert code == 0 and "none per token" in out


def test_dry_run_refuses_credentials_too(suite_file, tmp_path, capsys, no_network):
    cfg = tmp_path / "provider.yaml"
    cfg.write_text("secret: x\n", encoding="utf-8")
    code, _, err = cli_run(dry_run_argv(suite_file, tmp_path / "out", "--provider-config", str(cfg)), capsys)
    assert code == 2 and "credentials come from the environment only" in err


def _null_content(kind: str) -> Reply:
    if kind == "openai":
        body = {"id": "c", "object": "chat.completion", "created": 0, "model": "gpt-test",
                "choices": [{"index": 0, "message": {"role": "assistant", "content": None}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 11, "completion_tokens": 0, "total_tokens": 11}}
    else:
        body = {"id": "m", "type": "message", "role": "assistant", "model": "claude-test", "content": [],
                "stop_reason": "end_turn", "stop_sequence": None, "usage": {"input_tokens": 12, "output_tokens": 0}}
    return 200, {}, json.dumps(body).encode()


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
def test_null_content_is_retried_then_an_error_never_an_empty_record(api, suite, tmp_path, kind):
    api.rule = lambda body: _null_content(kind)
    sleeps: list[float] = []
    with pytest.raises(ProviderError, match="failed after 3 attempts \\(MissingContent"):
        run(suite, make_engine(kind, api, sleeps, concurrency=1, max_retries=2), tmp_path / "out")
    assert len(api.requests) == 3
    assert records(tmp_path / "out") == []


def test_null_content_once_is_retried_and_the_real_answer_recorded(api, suite, tmp_path):
    api.script = [_null_content("openai")]
    report = run(suite, make_engine("openai", api, concurrency=1), tmp_path / "out")
    assert report.complete
    assert all(r.output.startswith("Answer to:") for r in records(tmp_path / "out"))
    assert len(api.requests) == ROWS + 1
