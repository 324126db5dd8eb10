"""The GitHub Action under a simulated runner: inputs, outputs, summary, annotations,
injection safety, JUnit, the sticky PR comment, and the lint tools on its YAML.

The entrypoint runs as a subprocess with temporary GITHUB_OUTPUT / GITHUB_STEP_SUMMARY
files, exactly as a runner would start it; its stdout is read back the way the runner
reads workflow commands (honouring `::stop-commands::`).
"""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest
import yaml
from conftest import DEFAULT_RECORDINGS, REPO, write_recording_set
from local_server import JsonHandler, serve, stop
from paper_grid import paper_text_for

from fairness._util.errors import FairnessError
from fairness.action import _commands as _gha
from fairness.action import _main as _action
from fairness.action._artifact import artifact_name
from fairness.github._comment import CommentSkipped, comment_body, marker, upsert_comment, write_payload
from fairness.report._junit import junit_xml

CLEAN = "A capable professional who communicates clearly."
ALLOWED_COMMANDS = {"group", "endgroup", "error", "warning", "notice", "add-mask"}


# -- a simulated runner ---------------------------------------------------------------


def parse_output_file(text: str) -> dict[str, str]:
    """Read $GITHUB_OUTPUT back: `name<<DELIM` … `DELIM` blocks and `name=value` lines."""
    out: dict[str, str] = {}
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        if not line:
            i += 1
            continue
        if "<<" in line and ("=" not in line or line.index("<<") < line.index("=")):
            name, delim = line.split("<<", 1)
            end = lines.index(delim, i + 1)
            out[name] = "\n".join(lines[i + 1 : end])
            i = end + 1
        else:
            name, value = line.split("=", 1)
            out[name] = value
            i += 1
    return out


def _unescape(text: str) -> str:
    return text.replace("%0D", "\r").replace("%0A", "\n").replace("%3A", ":").replace("%2C", ",").replace("%25", "%")


@dataclass(frozen=True)
class Command:
    name: str
    props: dict[str, str]
    message: str


def workflow_commands(stream: str) -> list[Command]:
    """The commands a runner would act on: lines starting `::` after leading spaces,
    ignoring everything between `::stop-commands::TOKEN` and `::TOKEN::`."""
    stop: str | None = None
    found = []
    for raw in stream.splitlines():
        line = raw.lstrip()
        if stop is not None:
            if line == f"::{stop}::":
                stop = None
            continue
        m = re.match(r"^::([^\s:]+)(?: ([^:]*))?::(.*)$", line)
        if not m:
            assert not line.startswith("::"), f"malformed command line: {line!r}"
            continue
        name, props, message = m.group(1), m.group(2) or "", m.group(3)
        if name == "stop-commands":
            stop = message
            continue
        kv = dict(p.split("=", 1) for p in props.split(",") if p)
        found.append(Command(name, {k: _unescape(v) for k, v in kv.items()}, _unescape(message)))
    assert stop is None, "stop-commands was never resumed"
    return found


@dataclass
class RunnerResult:
    code: int
    stdout: str
    stderr: str
    outputs: dict[str, str]
    summary: str
    commands: list[Command]

    def named(self, name: str) -> list[Command]:
        return [c for c in self.commands if c.name == name]


def run_action(tmp_path: Path, inputs: dict[str, str], extra_env: dict[str, str] | None = None) -> RunnerResult:
    """Start entrypoint.py the way the composite action's last step does."""
    work = tmp_path / "workspace"
    work.mkdir(exist_ok=True)
    output, summary = tmp_path / "github_output", tmp_path / "step_summary"
    output.touch()
    summary.touch()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FAIRNESS_", "GITHUB_", "INPUT_")) and "proxy" not in k.lower()}
    env.update(GITHUB_OUTPUT=str(output), GITHUB_STEP_SUMMARY=str(summary), GITHUB_ACTIONS="true", FAIRNESS_ACTION_PATH=str(REPO))
    env.update({_action.ENV[name]: value for name, value in inputs.items()})
    env.update(extra_env or {})
    proc = subprocess.run([sys.executable, str(REPO / "entrypoint.py")], cwd=work, env=env, capture_output=True,
                          text=True, check=False, timeout=300)
    return RunnerResult(proc.returncode, proc.stdout, proc.stderr, parse_output_file(output.read_text()),
                        summary.read_text(), workflow_commands(proc.stdout))


def assert_inert(result: RunnerResult) -> None:
    """Only our own commands reach the runner, and nothing on stderr looks like one."""
    assert {c.name for c in result.commands} <= ALLOWED_COMMANDS, result.commands
    assert not [ln for ln in result.stderr.splitlines() if ln.lstrip().startswith("::")]


# -- recordings -----------------------------------------------------------------------


@pytest.fixture(scope="module")
def recordings(tmp_path_factory, default_suite) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("action-recordings")
    cases = default_suite.expand()
    return {
        "clean": write_recording_set(root / "clean", default_suite, lambda c: CLEAN),
        "paper": write_recording_set(root / "paper", default_suite, paper_text_for(cases)),
    }


def _inputs(rec: Path, **more: str) -> dict[str, str]:
    """Fast inputs: no assertion here reads a p-value, so no permutation tests."""
    return {"recordings": str(rec), "out-dir": "fairness-out", "bootstrap": "100", "permutations": "0", **more}


@pytest.fixture(scope="module")
def paper_action(tmp_path_factory, recordings) -> RunnerResult:
    """One Action run on the paper's recordings, shared by the tests that only read it."""
    return run_action(tmp_path_factory.mktemp("paper-action"), _inputs(recordings["paper"]))


# -- end to end -----------------------------------------------------------------------


class TestVerdicts:
    def test_pass(self, tmp_path, recordings):
        r = run_action(tmp_path, _inputs(recordings["clean"]))
        assert r.code == 0, r.stdout
        o = r.outputs
        assert (o["gate-status"], o["passed"], o["exit-code"]) == ("pass", "true", "0")
        slices = json.loads(o["worst-slices"])
        assert [s["scope"] for s in slices] == ["family=F1", "family=F2", "family=F3", "family=F4"]
        assert all(s["state"] == "pass" and s["worst_slice"] for s in slices)
        for key in ("results-path", "card-path", "summary-path", "junit-path"):
            assert Path(o[key]).is_file() and Path(o[key]).is_absolute()
        assert Path(o["results-path"]).parent == tmp_path / "workspace" / "fairness-out"
        assert "**PASS**" in r.summary and "| F2 |" in r.summary
        assert not r.named("error")
        assert_inert(r)

    def test_fail_annotates_failed_rules(self, paper_action):
        r = paper_action
        assert r.code == 1
        assert (r.outputs["gate-status"], r.outputs["passed"], r.outputs["exit-code"]) == ("fail", "false", "1")
        results = json.loads(Path(r.outputs["results-path"]).read_text())
        failed = [c for c in results["rules"] if c["state"] == "fail"]
        errors = r.named("error")
        assert failed and len(errors) == len(failed) <= 10
        assert errors[0].props["title"].startswith("Fairness rule stereotype-worst-slice failed [family=")
        unsettled = [c for c in results["rules"] if c["state"] == "inconclusive"]
        warnings = r.named("warning")
        rule_warnings = [w for w in warnings if w.props["title"].startswith("Fairness rule ")]
        assert len(rule_warnings) == min(len(unsettled), 10)
        assert all(w.props["title"].endswith(f"inconclusive [{c['scope']}]") for w, c in zip(rule_warnings, unsettled, strict=False))
        caveats = [w for w in warnings if w.props["title"].startswith("Fairness caveat: ")]
        assert 0 < len(caveats) <= 10 and len(caveats) + len(rule_warnings) == len(warnings)
        assert "**FAIL**" in r.summary
        assert_inert(r)

    def test_inconclusive_warns_and_passes_by_default(self, tmp_path, recordings):
        r = run_action(tmp_path, _inputs(recordings["paper"], threshold="0.2"))
        assert r.code == 0
        assert (r.outputs["gate-status"], r.outputs["passed"], r.outputs["exit-code"]) == ("inconclusive", "true", "0")
        assert not r.named("error")
        assert any(w.props["title"].startswith("Fairness rule stereotype-worst-slice inconclusive") for w in r.named("warning"))

    def test_fail_on_inconclusive_fails_the_step(self, tmp_path, recordings):
        r = run_action(tmp_path, _inputs(recordings["paper"], threshold="0.2", **{"fail-on": "inconclusive"}))
        assert r.code == 1
        assert (r.outputs["gate-status"], r.outputs["passed"], r.outputs["exit-code"]) == ("inconclusive", "false", "1")

    def test_junit_written_next_to_results(self, paper_action):
        r = paper_action
        root = ET.parse(r.outputs["junit-path"]).getroot()
        results = json.loads(Path(r.outputs["results-path"]).read_text())
        states = [c["state"] for c in results["rules"]]
        assert int(root.get("tests")) == len(states) == len(root.findall(".//testcase"))
        assert int(root.get("failures")) == states.count("fail") == len(root.findall(".//failure"))
        assert Path(r.outputs["junit-path"]).parent == Path(r.outputs["results-path"]).parent


class TestBadInput:
    @pytest.mark.parametrize("inputs", [
        {"threshold": "abc"},
        {"threshold": "nan"},
        {"mode": "bogus"},
        {"bootstrap": "0"},
        {"min-group-size": "-3"},
        {"fail-on": "always"},
        {"comment-on-pr": "yes please"},
        {"mode": "live"},  # live needs a model
        {"recordings": "no/such/dir"},
        {"suite": "no-such-suite"},
    ])
    def test_one_error_line_and_exit_2(self, tmp_path, recordings, inputs):
        r = run_action(tmp_path, {**_inputs(recordings["clean"]), **inputs})
        assert r.code == 2, r.stdout
        assert len(r.named("error")) == 1 and r.named("error")[0].props["title"] == "llm-fairness-check: bad input"
        assert (r.outputs["gate-status"], r.outputs["passed"], r.outputs["exit-code"]) == ("error", "false", "2")
        assert_inert(r)


class TestInjection:
    def _payload(self, tmp_path: Path, tag: str) -> str:
        return f"$(touch {tmp_path}/pwned-{tag}-a)`touch {tmp_path}/pwned-{tag}-b`;touch {tmp_path}/pwned-{tag}-c ::error::x"

    def test_payload_in_paths_and_free_text_stays_inert(self, tmp_path, recordings):
        payload = self._payload(tmp_path, "1")
        r = run_action(tmp_path, _inputs(recordings["clean"], model=payload, provider=payload, **{"out-dir": f"out/{payload}"}))
        assert r.code == 0, r.stdout
        assert not list(tmp_path.glob("pwned-*"))
        assert (tmp_path / "workspace" / "out" / payload / "results.json").is_file()  # a literal directory name
        assert not [c for c in r.commands if c.message == "x" or c.name == "error"]
        assert_inert(r)
        assert r.outputs["results-path"].endswith(f"{payload}/results.json")

    def test_payload_reaching_an_error_message_is_escaped(self, tmp_path, recordings):
        payload = self._payload(tmp_path, "2")
        r = run_action(tmp_path, _inputs(recordings["clean"], suite=payload))
        assert r.code == 2
        assert not list(tmp_path.glob("pwned-*"))
        (err,) = r.named("error")
        assert "::error::x" in err.message  # the payload is data inside our one error
        assert_inert(r)

    @pytest.mark.parametrize("name", ["suite", "recordings", "out-dir", "threshold", "model", "baseline"])
    def test_newlines_are_rejected_without_echo(self, tmp_path, recordings, name):
        r = run_action(tmp_path, {**_inputs(recordings["clean"]), name: f"ok\n::error::x\n$(touch {tmp_path}/pwned)"})
        assert r.code == 2
        assert not list(tmp_path.glob("pwned*"))
        (err,) = r.named("error")
        assert "line break" in err.message and "::error::x" not in r.stdout
        assert_inert(r)

    def test_workflow_commands_in_model_output_are_inert(self, tmp_path, default_suite):
        rec = write_recording_set(tmp_path / "rec", default_suite, lambda c: "::error::from the model\n::add-mask::x")
        r = run_action(tmp_path, _inputs(rec))
        assert r.code == 0
        assert not [c for c in r.commands if "from the model" in c.message or c.message == "x"]
        assert_inert(r)

    def test_secrets_are_masked_before_anything_else(self, tmp_path, recordings):
        token, key = "ghs_0123456789abcdefSECRET", "sk-test-0123456789abcdef"
        r = run_action(tmp_path, _inputs(recordings["clean"], **{"github-token": token}), {"OPENAI_API_KEY": key})
        masks = [c.message for c in r.named("add-mask")]
        assert token in masks and key in masks
        first_other = next(i for i, c in enumerate(r.commands) if c.name != "add-mask")
        assert all(c.name == "add-mask" for c in r.commands[:first_other])
        assert r.stdout.count(token) == 1 and r.stdout.count(key) == 1  # only inside ::add-mask::


class TestBaselineAndLive:
    def test_baseline_diff_writes_diff_outputs(self, tmp_path, paper_action, recordings):
        base = Path(paper_action.outputs["results-path"]).parent
        r = run_action(tmp_path, _inputs(recordings["clean"], baseline=str(base)))
        assert r.code == 0, r.stdout
        assert r.outputs["diff-status"] == "pass"  # clean head vs paper base: nothing regressed
        assert Path(r.outputs["diff-path"]).is_file()
        assert "Base vs head" in r.summary

    def test_live_mode_generates_then_audits(self, tmp_path, default_suite, monkeypatch):
        calls: list[tuple[str, str, str, Path]] = []

        def fake(inputs: _action.Inputs, out: Path) -> None:
            calls.append((inputs.suite, inputs.provider, inputs.model, out))
            write_recording_set(out, default_suite, lambda c: CLEAN)

        monkeypatch.setattr(_action, "generate_recordings", fake)
        monkeypatch.chdir(tmp_path)
        env = {**_action_env(Path("unused")), "FAIRNESS_MODE": "live", "FAIRNESS_MODEL": "Qwen/Qwen2.5-7B-Instruct"}
        assert _action.main(env, io.StringIO()) == 0
        out = Path("fairness-out")
        assert calls == [("fairness-cards/qwen-v0.1", "transformers", "Qwen/Qwen2.5-7B-Instruct", out / "recordings")]
        results = json.loads((out / "results.json").read_text())
        assert results["recordings"]["path"] == str(out / "recordings") and results["gate"]["state"] == "pass"


def _action_env(rec: Path) -> dict[str, str]:
    return {"FAIRNESS_RECORDINGS": str(rec), "FAIRNESS_OUT_DIR": "fairness-out", "FAIRNESS_BOOTSTRAP": "50",
            "FAIRNESS_PERMUTATIONS": "0"}


class TestRecordingsRequired:
    def test_empty_recordings_is_exit_2_with_how_to_record(self, tmp_path):
        r = run_action(tmp_path, {"bootstrap": "50"})
        assert r.code == 2, r.stdout
        assert r.outputs["gate-status"] == "error" and r.outputs["exit-code"] == "2"
        errors = r.named("error")
        assert len(errors) == 1 and errors[0].message == _action.NO_RECORDINGS
        assert "llm-fairness-check init" in errors[0].message and "generate" in errors[0].message

    def test_the_actions_own_recordings_are_not_a_fallback(self, tmp_path):
        rel = "recordings/fairness-cards/qwen-v0.1/SmolLM2-135M-Instruct-Q4_1"  # exists in the Action's checkout only
        r = run_action(tmp_path, {"recordings": rel, "bootstrap": "50"})
        assert r.code == 2 and r.outputs["gate-status"] == "error"
        assert r.named("error")[0].message == f"recordings directory `{rel}` does not exist or is not a directory"

    def test_action_yml_requires_it_without_a_default(self):
        spec = _load(REPO / "action.yml")["inputs"]["recordings"]
        assert spec["required"] is True and "default" not in spec


def test_committed_recordings_replay_through_the_action(tmp_path):
    r = run_action(tmp_path, {"recordings": str(DEFAULT_RECORDINGS), "bootstrap": "200", "permutations": "0"})
    # no family's interval settles the rule (see test_api); the default fail-on shows it as a warning and passes
    assert (r.code, r.outputs["gate-status"]) == (0, "inconclusive")
    assert Path(r.outputs["results-path"]).is_file()
    json.loads(r.outputs["worst-slices"])


# -- runner protocol ------------------------------------------------------------------


class TestProtocol:
    def test_escaping(self):
        assert _gha.escape_data("50%\r\n::x") == "50%25%0D%0A::x"
        assert _gha.escape_property("a:b,c%\n") == "a%3Ab%2Cc%25%0A"

    def test_command_and_log_lines_cannot_inject(self):
        out = io.StringIO()
        _gha.command("warning", "m\n::error::x", out, title="t:1,2")
        _gha.log("::error::y", out)
        _gha.log("  ::error::z\n::error::w", out)
        cmds = workflow_commands(out.getvalue())
        assert cmds == [Command("warning", {"title": "t:1,2"}, "m\n::error::x")]

    def test_outputs_round_trip_any_value(self, tmp_path):
        path = tmp_path / "out"
        values = {"a": "one", "multi": "line 1\nline 2\nghadelimiter_x\n", "empty": "", "json": '{"k": "v<<EOF"}'}
        _gha.write_outputs(path, values)
        assert parse_output_file(path.read_text()) == values

    def test_step_summary_stays_under_1_mib(self, tmp_path):
        path = tmp_path / "summary"
        path.write_text("x" * (1024 * 1024 - 5000))
        _gha.append_summary(path, "\n".join("y" * 100 for _ in range(2000)))
        assert path.stat().st_size <= 1024 * 1024

    def test_stop_commands_brackets_untrusted_output(self):
        out = io.StringIO()
        with _gha.stop_commands(out):
            print("::error::inside")
            print("::warning::err", file=sys.stderr)
        assert "::error::inside" in out.getvalue() and "::warning::err" in out.getvalue()  # stderr folded in, in order
        assert workflow_commands(out.getvalue()) == []


# -- JUnit ----------------------------------------------------------------------------


def _check(scope: str, state: str, **kw) -> dict:
    return {"rule": "stereotype-worst-slice", "scope": scope, "metric": "stereotype_kw_rate", "statistic": "worst_slice",
            "value": 0.1, "interval": [0.05, 0.2], "threshold": 0.05, "comparator": ">", "fired": state != "pass",
            "state": state, "reason": kw.get("reason", f"{state} <&\"'>"), "worst_slice": "woman_Muslim", "n": 800}


def test_junit_counts_and_escaping():
    from types import SimpleNamespace

    from fairness.audit._results import RuleCheck

    checks = [_check("family=F1", "fail"), _check("family=F2", "inconclusive"), _check("family=F3", "undefined"),
              _check("family=F4", "pass"), _check("family=F5", "fail")]
    run = SimpleNamespace(suite=SimpleNamespace(name="s"), recordings=SimpleNamespace(model_id="m<&>"),
                          gate=SimpleNamespace(state="fail", exit_code=1, passed=False), comparison=None,
                          rules=[RuleCheck(**c) for c in checks])
    root = ET.fromstring(junit_xml(run).encode())  # type: ignore[arg-type]
    assert (root.get("tests"), root.get("failures"), root.get("skipped"), root.get("errors")) == ("5", "2", "2", "0")
    cases = root.findall("./testsuite/testcase")
    assert (cases[0].get("classname"), cases[0].get("name")) == ("stereotype-worst-slice", "family=F1")
    assert len(root.findall(".//failure")) == 2 and len(root.findall(".//skipped")) == 2
    assert cases[0].find("failure").get("message") == "fail <&\"'>"
    assert cases[3].find("failure") is None and cases[3].find("skipped") is None


def test_run_cli_writes_junit(tmp_path, recordings):
    from fairness.cli import main

    code = main(["run", "--recordings", str(recordings["paper"]), "--out", str(tmp_path / "o"), "--bootstrap", "50",
                 "--permutations", "0", "--quiet", "--junit", str(tmp_path / "j" / "junit.xml")])
    root = ET.parse(tmp_path / "j" / "junit.xml").getroot()
    assert code == 1 and int(root.get("failures")) >= 1 and int(root.get("tests")) == 4


# -- sticky PR comment ----------------------------------------------------------------


BOT = "github-actions[bot]"


class FakeGitHub:
    """Issue comments of one repository, served on 127.0.0.1 with 2 comments a page.

    Like GitHub: `GET /user` answers a personal access token (listed in `users`) and refuses
    GITHUB_TOKEN (403), whose comments are by github-actions[bot]; editing someone else's
    comment is refused (403)."""

    PAGE = 2

    def __init__(self):
        self.comments: list[dict] = []
        self.calls: list[tuple[str, str]] = []
        self.deny: dict[str, int] = {}
        self.auth: set[str] = set()
        self.users: dict[str, str] = {}  # token -> login
        self.head_sha = "a" * 40
        fake = self

        class Handler(JsonHandler):
            def _handle(self, method: str):
                fake.calls.append((method, self.path))
                fake.auth.add(self.headers.get("Authorization", ""))
                if method in fake.deny:
                    return self.send_json(fake.deny[method], {"message": "Resource not accessible by integration"})
                url = urlsplit(self.path)
                body = self.read_json()
                token = self.headers.get("Authorization", "").removeprefix("Bearer ")
                login = fake.users.get(token, BOT)
                if method == "GET" and url.path == "/user":
                    if token in fake.users:
                        return self.send_json(200, {"login": login})
                    return self.send_json(403, {"message": "Resource not accessible by integration"})
                if method == "GET" and url.path == "/repos/o/r/pulls/7":
                    return self.send_json(200, {"number": 7, "head": {"sha": fake.head_sha}})
                if method == "GET" and url.path == "/repos/o/r/issues/7/comments":
                    page = int(parse_qs(url.query).get("page", ["1"])[0])
                    items = fake.comments[(page - 1) * fake.PAGE : page * fake.PAGE]
                    more = len(fake.comments) > page * fake.PAGE
                    link = {"Link": f'<{fake.url}/repos/o/r/issues/7/comments?per_page=100&page={page + 1}>; rel="next"'} if more else {}
                    return self.send_json(200, items, link)
                if method == "POST" and url.path == "/repos/o/r/issues/7/comments":
                    fake.comments.append({"id": 100 + len(fake.comments), "body": body["body"], "user": {"login": login}})
                    return self.send_json(201, fake.comments[-1])
                m = re.match(r"^/repos/o/r/issues/comments/(\d+)$", url.path)
                if method == "PATCH" and m:
                    c = next(c for c in fake.comments if c["id"] == int(m.group(1)))
                    if (c.get("user") or {}).get("login") != login:
                        return self.send_json(403, {"message": "Resource not accessible by integration"})
                    c["body"] = body["body"]
                    return self.send_json(200, c)
                return self.send_json(404, {"message": "Not Found"})

            def do_GET(self):
                self._handle("GET")

            def do_POST(self):
                self._handle("POST")

            def do_PATCH(self):
                self._handle("PATCH")

        self.server, self.url = serve(Handler)

    def close(self):
        stop(self.server)


@pytest.fixture
def github(tmp_path):
    fake = FakeGitHub()
    event = tmp_path / "event.json"
    event.write_text(json.dumps({"pull_request": {"number": 7}}))
    env = {"GITHUB_API_URL": fake.url, "GITHUB_REPOSITORY": "o/r", "GITHUB_EVENT_PATH": str(event)}
    yield fake, env
    fake.close()


def _ours(fake: FakeGitHub, tag: str = "default") -> list[dict]:
    return [c for c in fake.comments if c["body"].startswith(marker(tag) + "\n")]


class TestPRComment:
    def test_create_then_update_in_place(self, github):
        fake, env = github
        fake.comments = [{"id": i, "body": f"other {i}", "user": {"login": "alice"}} for i in range(1, 4)]
        assert upsert_comment("first", env, "tok") == "created"
        assert upsert_comment("second", env, "tok") == "updated"  # found on page 2
        (ours,) = _ours(fake)
        assert len(fake.comments) == 4 and "second" in ours["body"] and ours["user"]["login"] == BOT
        assert ("GET", "/repos/o/r/issues/7/comments?per_page=100&page=2") in fake.calls
        assert [m for m, _ in fake.calls].count("PATCH") == 1 and fake.auth == {"Bearer tok"}

    @pytest.mark.parametrize("method,status", [("POST", 403), ("GET", 403), ("GET", 404)])
    def test_forbidden_is_skipped_with_a_notice(self, github, method, status):
        fake, env = github
        fake.deny[method] = status
        with pytest.raises(CommentSkipped, match=str(status)):
            upsert_comment("x", env, "tok")
        out = io.StringIO()
        inputs = _action.read_inputs({"FAIRNESS_RECORDINGS": "rec", "FAIRNESS_COMMENT_ON_PR": "true", "FAIRNESS_GITHUB_TOKEN": "tok"})
        _action._comment("x", inputs, env, out)
        (cmd,) = workflow_commands(out.getvalue())
        assert cmd.name == "notice" and "skipping the pull-request comment" in cmd.message

    def test_a_human_comment_with_the_marker_is_never_touched(self, github):
        fake, env = github
        quoted = f"> {marker('default')}\n> the bot said this"
        pasted = f"{marker('default')}\ncopied the bot's comment"
        fake.comments = [{"id": 1, "body": quoted, "user": {"login": "alice"}},
                         {"id": 2, "body": pasted, "user": {"login": "alice"}}]
        out = io.StringIO()
        inputs = _action.read_inputs({"FAIRNESS_RECORDINGS": "rec", "FAIRNESS_COMMENT_ON_PR": "true",
                                      "FAIRNESS_GITHUB_TOKEN": "tok"})
        _action._comment("verdict", inputs, env, out)
        assert [c.name for c in workflow_commands(out.getvalue())] == []  # no notice: nothing was refused
        assert "pull-request comment created" in out.getvalue()
        assert [c["body"] for c in fake.comments[:2]] == [quoted, pasted]
        assert [c["id"] for c in _ours(fake) if c["user"]["login"] == BOT] == [102]
        assert "PATCH" not in [m for m, _ in fake.calls]

    def test_two_tags_keep_two_comments(self, github):
        fake, env = github
        assert upsert_comment("suite A v1", env, "tok", tag="suite-a") == "created"
        assert upsert_comment("suite B v1", env, "tok", tag="suite-b") == "created"
        assert upsert_comment("suite A v2", env, "tok", tag="suite-a") == "updated"
        assert [c["body"] for c in fake.comments] == [comment_body("suite A v2", "suite-a"),
                                                      comment_body("suite B v1", "suite-b")]

    def test_the_tag_defaults_to_the_job_id(self, github):
        fake, env = github
        assert upsert_comment("x", {**env, "GITHUB_JOB": "fairness"}, "tok") == "created"
        assert fake.comments[0]["body"].startswith("<!-- llm-fairness-check tag=fairness -->\n")

    def test_a_personal_token_updates_only_its_own_comment(self, github):
        fake, env = github
        fake.users["pat-1"] = "octocat"
        fake.comments = [{"id": 1, "body": comment_body("by the workflow"), "user": {"login": BOT}}]
        assert upsert_comment("by the PAT", env, "pat-1") == "created"
        assert upsert_comment("by the PAT again", env, "pat-1") == "updated"
        assert [(c["user"]["login"], c["body"]) for c in fake.comments] == [
            (BOT, comment_body("by the workflow")), ("octocat", comment_body("by the PAT again"))]
        assert ("GET", "/user") in fake.calls

    def test_comment_author_names_an_app_identity(self, github):
        fake, env = github
        fake.users["app-token"] = "our-app[bot]"  # stands in for an App token's posts
        fake.comments = [{"id": 1, "body": comment_body("old"), "user": {"login": "our-app[bot]"}}]
        assert upsert_comment("new", env, "app-token", author="our-app[bot]") == "updated"
        assert ("GET", "/user") not in fake.calls and fake.comments[0]["body"] == comment_body("new")

    def test_not_a_pull_request(self, github, tmp_path):
        _, env = github
        (tmp_path / "push.json").write_text(json.dumps({"ref": "refs/heads/main"}))
        with pytest.raises(CommentSkipped, match="not triggered by a pull request"):
            upsert_comment("x", {**env, "GITHUB_EVENT_PATH": str(tmp_path / "push.json")}, "tok")

    def test_long_bodies_are_cut_under_the_limit(self):
        body = comment_body("\n".join("z" * 99 for _ in range(2000)))
        assert body.startswith(marker("default")) and len(body) <= 65536 and "truncated" in body

    @pytest.mark.parametrize("tag", ["a b", "x-->", "", "-lead", "é"])
    def test_bad_tags_are_refused(self, tag):
        with pytest.raises(FairnessError, match="comment tag"):
            marker(tag)

    def test_entrypoint_posts_the_summary(self, tmp_path, recordings, github):
        fake, env = github
        env = {**env, "GITHUB_JOB": "fairness"}
        r = run_action(tmp_path, _inputs(recordings["clean"], **{"comment-on-pr": "true", "github-token": "tok-123456789"}), env)
        assert r.code == 0, r.stdout
        (comment,) = fake.comments
        assert comment["body"].startswith(marker("fairness") + "\n") and "**PASS**" in comment["body"]
        payload = json.loads((Path(r.outputs["results-path"]).parent / "pr-comment.json").read_text())
        assert (payload["pr"], payload["tag"], payload["repository"]) == (7, "fairness", "o/r")
        assert comment_body(payload["body"], "fairness") == comment["body"]
        assert r.outputs["artifact-name"] == "fairness-cards-qwen-v0.1"

    def test_bad_comment_tag_input_exits_2(self, tmp_path, recordings):
        r = run_action(tmp_path, _inputs(recordings["clean"], **{"comment-tag": "two words"}))
        assert r.code == 2 and r.outputs["gate-status"] == "error"
        (err,) = r.named("error")
        assert "comment tag 'two words'" in err.message


class TestHostileCommentAPI:
    """A GitHub API answering what the client cannot use: the comment is skipped with a warning
    after the verdict, which it never changes (issue 19)."""

    @pytest.mark.parametrize(("body", "content_type", "problem"), [
        (b"<!DOCTYPE html><html>Unicorn!</html>", "text/html", "the answer is not JSON (content-type text/html)"),
        (b'"hello"', "application/json", "expected a JSON array, got a string"),
        (b'{"a": 1}', "application/json", "expected a JSON array, got an object"),
    ], ids=["html", "string", "object"])
    def test_a_bad_answer_is_a_warning_not_the_verdict(self, tmp_path, recordings, body, content_type, problem):
        class Handler(JsonHandler):
            def do_GET(self):
                self.send_response(200)
                self.send_header("content-type", content_type)
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        server, url = serve(Handler)
        event = tmp_path / "event.json"
        event.write_text(json.dumps({"pull_request": {"number": 7}}))
        try:
            r = run_action(tmp_path, _inputs(recordings["clean"], **{"comment-on-pr": "true", "github-token": "tok-1234567",
                                                                     "comment-author": BOT}),
                           {"GITHUB_API_URL": url, "GITHUB_REPOSITORY": "o/r", "GITHUB_EVENT_PATH": str(event)})
        finally:
            stop(server)
        assert (r.code, r.outputs["gate-status"], r.outputs["exit-code"]) == (0, "pass", "0"), r.stdout
        (warning,) = [w for w in r.named("warning") if "pull-request comment" in w.message]
        assert warning.message == ("could not write the pull-request comment: "
                                   f"GitHub API GET /repos/o/r/issues/7/comments: {problem}")
        assert r.named("error") == [] and "Traceback" not in r.stderr + r.stdout


class TestForkComment:
    """The workflow_run recipe: the fork's run leaves pr-comment.json, a trusted run posts it."""

    @pytest.fixture
    def artifact(self, tmp_path, github):
        fake, env = github
        event = json.loads(Path(env["GITHUB_EVENT_PATH"]).read_text())
        event["pull_request"]["head"] = {"sha": fake.head_sha}
        Path(env["GITHUB_EVENT_PATH"]).write_text(json.dumps(event))
        art = tmp_path / "artifact"
        art.mkdir()
        assert write_payload(art, "**PASS** from the fork", {**env, "GITHUB_JOB": "check"}, "") == art / "pr-comment.json"
        return art

    def _cli(self, env: dict[str, str], *argv: str) -> subprocess.CompletedProcess:
        base = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "GH_")) and "proxy" not in k.lower()}
        return subprocess.run([sys.executable, "-m", "fairness.cli", "comment", *argv], cwd=REPO, capture_output=True,
                              text=True, check=False, timeout=60,
                              env={**base, "GITHUB_API_URL": env["GITHUB_API_URL"], "GITHUB_REPOSITORY": "o/r",
                                   "GITHUB_TOKEN": "tok"})

    def test_posts_when_the_head_commit_matches(self, github, artifact):
        fake, env = github
        proc = self._cli(env, "--from-artifact", str(artifact), "--head-sha", fake.head_sha)
        assert (proc.returncode, proc.stdout) == (0, "pull-request #7: comment created\n"), proc.stderr
        proc = self._cli(env, "--from-artifact", str(artifact), "--head-sha", fake.head_sha)
        assert (proc.returncode, proc.stdout) == (0, "pull-request #7: comment updated\n"), proc.stderr
        assert [c["body"] for c in fake.comments] == [comment_body("**PASS** from the fork", "check")]

    def test_refuses_a_pr_whose_head_is_another_commit(self, github, artifact):
        fake, env = github
        proc = self._cli(env, "--from-artifact", str(artifact), "--head-sha", "b" * 40)
        assert proc.returncode == 2 and "refusing to post" in proc.stderr and len(proc.stderr.splitlines()) == 1
        assert fake.comments == [] and "POST" not in [m for m, _ in fake.calls]

    def test_an_explicit_pr_must_match_the_artifact(self, github, artifact):
        fake, env = github
        proc = self._cli(env, "--from-artifact", str(artifact), "--pr", "8")
        assert proc.returncode == 2 and "is for pull request #7, not #8" in proc.stderr
        proc = self._cli(env, "--from-artifact", str(artifact), "--pr", "7", "--tag", "nightly")
        assert proc.returncode == 0, proc.stderr
        assert fake.comments[0]["body"] == comment_body("**PASS** from the fork", "nightly")

    def test_unverified_or_missing_artifacts_exit_2(self, github, artifact, tmp_path):
        _, env = github
        proc = self._cli(env, "--from-artifact", str(artifact))
        assert proc.returncode == 2 and "--head-sha" in proc.stderr
        proc = self._cli(env, "--from-artifact", str(tmp_path / "nowhere"), "--pr", "7")
        assert proc.returncode == 2 and "pr-comment.json not found" in proc.stderr
        (artifact / "pr-comment.json").write_text(json.dumps({"pr": "7", "head_sha": "", "tag": "t", "body": ""}))
        proc = self._cli(env, "--from-artifact", str(artifact), "--pr", "7")
        assert proc.returncode == 2 and "`pr` is missing or not a int" in proc.stderr

    def test_no_payload_outside_pull_requests(self, tmp_path):
        (tmp_path / "push.json").write_text(json.dumps({"ref": "refs/heads/main"}))
        assert write_payload(tmp_path, "x", {"GITHUB_EVENT_PATH": str(tmp_path / "push.json")}, "t") is None
        assert not (tmp_path / "pr-comment.json").exists()


class TestArtifact:
    WORKSPACE = "/home/runner/work/repo/repo"

    @pytest.mark.parametrize("job,suite,tag,name", [
        # the built-in suite: its own `fairness` word is not repeated after the prefix and the job
        ("fairness", "fairness-cards/qwen-v0.1", "fairness", "fairness-cards-qwen-v0.1"),
        ("fairness", "fairness-cards/qwen-v0.1", "", "fairness-cards-qwen-v0.1"),
        ("audit", "fairness-cards/qwen-v0.1", "default", "fairness-audit-cards-qwen-v0.1"),
        ("replay", "fairness-cards/qwen-v0.1", "replay-ubuntu-latest", "fairness-replay-cards-qwen-v0.1-ubuntu-latest"),
        ("replay", "fairness-cards/qwen-v0.1", "replay-macos-latest", "fairness-replay-cards-qwen-v0.1-macos-latest"),
        # a suite file at the root: no extension, no repeated prefix (was fairness-fairness-fairness-check-suite.yaml)
        ("fairness", "fairness-check-suite.yaml", "", "fairness-check-suite"),
        ("fairness", "fairness-check-suite.yaml", "fairness", "fairness-check-suite"),
        ("fairness", "fairness-check-suite.yaml", "gpt-4o", "fairness-check-suite-gpt-4o"),
        # a suite under .github: the hidden directory and the extension are dropped
        ("fairness", ".github/fairness/hiring.yml", "", "fairness-hiring"),
        ("audit", ".github/fairness/hiring.yml", "nightly", "fairness-audit-hiring-nightly"),
        ("audit", "./.github/fairness/hiring.yml", "nightly", "fairness-audit-hiring-nightly"),
        ("audit", f"{WORKSPACE}/.github/fairness/hiring.yml", "nightly", "fairness-audit-hiring-nightly"),
        # directories tell apart two files of one name; unsafe characters become `-`
        ("check", "team-a/hiring.yml", "", "fairness-check-team-a-hiring"),
        ("check", "team-b/hiring.yml", "", "fairness-check-team-b-hiring"),
        ("audit", "suites/our suite.yaml", "nightly", "fairness-audit-suites-our-suite-nightly"),
        ("", "C:\\x\\s.YAML", "default", "fairness-job-C-x-s"),
    ])
    def test_names_are_short_per_job_suite_and_tag_and_safe(self, job, suite, tag, name):
        assert artifact_name({"GITHUB_JOB": job, "GITHUB_WORKSPACE": self.WORKSPACE}, suite, tag) == name

    def test_upload_artifact_false_sets_no_name(self, tmp_path, recordings):
        r = run_action(tmp_path, _inputs(recordings["clean"], **{"upload-artifact": "false"}))
        assert r.code == 0 and "artifact-name" not in r.outputs

    def test_upload_artifact_must_be_boolean(self, tmp_path, recordings):
        r = run_action(tmp_path, _inputs(recordings["clean"], **{"upload-artifact": "yes"}))
        assert r.code == 2 and "input `upload-artifact` must be true or false" in r.named("error")[0].message


# -- action.yml, workflows, Dockerfile ------------------------------------------------


def _load(path: Path) -> dict:
    return yaml.safe_load(path.read_text())


def _steps(doc: dict) -> list[dict]:
    if "runs" in doc:
        return doc["runs"]["steps"]
    return [s for job in doc["jobs"].values() for s in job.get("steps", [])]


WORKFLOWS = sorted((REPO / ".github" / "workflows").glob("*.yml"))


class TestActionYml:
    def test_every_input_reaches_the_entrypoint_through_env(self):
        doc = _load(REPO / "action.yml")
        step = next(s for s in doc["runs"]["steps"] if s.get("id") == "fairness")
        assert set(doc["inputs"]) == set(_action.ENV)
        for name, var in _action.ENV.items():
            assert step["env"][var] == f"${{{{ inputs.{name} }}}}", name
        assert "entrypoint.py" in step["run"]

    def test_outputs_map_to_the_entrypoint_step(self):
        doc = _load(REPO / "action.yml")
        for name, spec in doc["outputs"].items():
            step = "upload" if name in ("artifact-id", "artifact-url") else "fairness"
            assert spec["value"] == f"${{{{ steps.{step}.outputs.{name} }}}}" and spec["description"]

    def test_the_card_is_uploaded_even_when_the_gate_fails(self):
        steps = _load(REPO / "action.yml")["runs"]["steps"]
        upload = next(s for s in steps if s.get("id") == "upload")
        assert upload["uses"].startswith("actions/upload-artifact@")
        assert upload["if"] == "always() && inputs.upload-artifact == 'true' && steps.fairness.outputs.artifact-name != ''"
        assert upload["with"] == {"name": "${{ steps.fairness.outputs.artifact-name }}", "path": "${{ inputs.out-dir }}",
                                  "if-no-files-found": "warn"}
        assert [s.get("id") for s in steps][-2:] == ["fairness", "upload"]

    def test_inputs_are_documented(self):
        doc = _load(REPO / "action.yml")
        assert all(spec.get("description") for spec in doc["inputs"].values())
        assert all("default" in spec for name, spec in doc["inputs"].items() if name != "recordings")
        assert doc["inputs"]["mode"]["default"] == "replay" and doc["inputs"]["comment-on-pr"]["default"] == "false"

    @pytest.mark.parametrize("path", [REPO / "action.yml", *WORKFLOWS], ids=lambda p: p.name)
    def test_no_expression_in_any_run_script(self, path):
        for step in _steps(_load(path)):
            assert "${{" not in step.get("run", ""), step.get("name")

    @pytest.mark.parametrize("path", [REPO / "action.yml", *WORKFLOWS], ids=lambda p: p.name)
    def test_third_party_actions_pinned_by_sha(self, path):
        for step in _steps(_load(path)):
            uses = step.get("uses")
            if uses and not uses.startswith("./"):
                assert re.fullmatch(r"[\w.-]+/[\w./-]+@[0-9a-f]{40}", uses), uses

    @pytest.mark.parametrize("path", WORKFLOWS, ids=lambda p: p.name)
    def test_workflows_have_minimal_permissions(self, path):
        doc = _load(path)
        assert doc["permissions"] == {}
        for job in doc["jobs"].values():
            assert "permissions" in job
            for step in job.get("steps", []):
                if str(step.get("uses", "")).startswith("actions/checkout@"):
                    assert step["with"]["persist-credentials"] is False


class TestDockerfile:
    def test_copied_paths_exist_and_are_not_ignored(self):
        lines = (REPO / "Dockerfile").read_text().splitlines()
        sources = [src for ln in lines if ln.startswith("COPY ") for src in ln.split()[1:-1] if not src.startswith("--")]
        assert sources
        allowed = [ln[1:].rstrip("/") for ln in (REPO / ".dockerignore").read_text().splitlines() if ln.startswith("!")]
        for src in sources:
            assert (REPO / src).exists(), src
            assert src.rstrip("/") in allowed, f"{src} is excluded by .dockerignore"

    def test_replay_by_default(self):
        """Root by default (GitHub's job containers need it; tests/test_release.py checks the rest)."""
        text = (REPO / "Dockerfile").read_text()
        stages = re.findall(r"^FROM \S+ AS (\w+)", text, re.MULTILINE)
        assert stages[-1] == "replay" and "live" in stages
        assert 'ENTRYPOINT ["python", "/opt/llm-fairness-check/entrypoint.py"]' in text


def _tool(name: str) -> str:
    path = shutil.which(name)
    if not path:
        pytest.skip(f"`{name}` is not installed (pip install '.[test]')")
    return path


class TestLinters:
    def test_actionlint(self):
        proc = subprocess.run([_tool("actionlint")], cwd=REPO, capture_output=True, text=True, check=False, timeout=120)
        assert proc.returncode == 0, proc.stdout + proc.stderr

    def test_example_workflows(self):
        examples = sorted(str(p) for p in (REPO / "docs" / "examples").glob("*.yml"))
        assert len(examples) == 2
        proc = subprocess.run([_tool("actionlint"), *examples], cwd=REPO, capture_output=True, text=True, check=False, timeout=120)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        proc = subprocess.run([_tool("zizmor"), "--offline", "--no-progress", *examples], cwd=REPO, capture_output=True,
                              text=True, check=False, timeout=120)
        assert proc.returncode == 0 and "No findings" in proc.stdout, proc.stdout + proc.stderr

    def test_zizmor(self):
        proc = subprocess.run([_tool("zizmor"), "--offline", "--no-progress", "."], cwd=REPO, capture_output=True, text=True, check=False, timeout=120)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert "No findings" in proc.stdout

    def test_hadolint(self):
        proc = subprocess.run([_tool("hadolint"), "Dockerfile"], cwd=REPO, capture_output=True, text=True, check=False, timeout=120)
        assert proc.returncode == 0, proc.stdout + proc.stderr
