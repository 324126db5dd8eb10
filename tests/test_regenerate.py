"""Regeneration pieces: the CPU guard, in-place rewrite, pinned weights, server info, the PR body."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import yaml
from conftest import DEFAULT_RECORDINGS, write_recording_set
from local_server import JsonHandler, serve, stop
from standin_vllm import VERSION, Handler
from test_hosted import SUITE, FakeAPI

from fairness._util.canonical import sha256_file
from fairness._util.errors import FairnessError
from fairness.cli import main
from fairness.generate._device import CPU_ROW_LIMIT, require_accelerator
from fairness.generate._weights import loaded_weight_files, pinned_weights
from fairness.generate.engines.openai_engine import probe_server
from fairness.pipeline import _regenerate
from fairness.pipeline._regenerate import isolated_environment, staging_dir
from fairness.recordings._store import RECORDS, read_manifest
from fairness.report._pr_body import NO_BASE, load_run, pr_body
from fairness.report._render import verdict_line
from fairness.suite._suite import parse_suite

# -- fail fast without an accelerator ----------------------------------------------------


def test_a_local_engine_refuses_the_full_grid_on_an_implicit_cpu(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("FAIRNESS_ALLOW_LIVE", "1")
    code = main(["generate", "--engine", "llamacpp", "--model", "smollm2", "--out", str(tmp_path / "g")])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1
    assert err == (
        "error: no accelerator found for the llamacpp engine and this run would generate 3200 rows on the CPU "
        f"(more than {CPU_ROW_LIMIT}); fix the GPU setup, or pass --device cpu to run on the CPU deliberately\n"
    )
    assert not (tmp_path / "g").exists()


def test_transformers_without_cuda_is_refused_before_the_model_loads(tmp_path, capsys, monkeypatch):
    torch = pytest.importorskip("torch")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setenv("FAIRNESS_ALLOW_LIVE", "1")
    code = main(["generate", "--engine", "transformers", "--model", "no-such-org/no-such-model", "--shard", "1/4",
                 "--out", str(tmp_path / "g")])
    assert code == 2
    assert "no accelerator found for the transformers engine and this run would generate 800 rows" in capsys.readouterr().err


def test_an_explicit_cuda_device_that_is_broken_fails_fast(monkeypatch):
    torch = pytest.importorskip("torch")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(FairnessError, match="--device cuda was asked for but torch finds no usable CUDA device"):
        require_accelerator("transformers", "cuda", 10)


def test_small_runs_and_an_explicit_cpu_are_allowed():
    assert require_accelerator("llamacpp", None, CPU_ROW_LIMIT) == "cpu"
    assert require_accelerator("llamacpp", "cpu", 3200) == "cpu"
    assert require_accelerator("transformers", "cpu", 3200) == "cpu"
    with pytest.raises(FairnessError, match="runs on the CPU only"):
        require_accelerator("llamacpp", "cuda", 10)


# -- one stable directory per model ------------------------------------------------------


@pytest.fixture
def suite_file(tmp_path: Path) -> Path:
    path = tmp_path / "suite.yaml"
    path.write_text(yaml.safe_dump(SUITE), encoding="utf-8")
    return path


def _gen(api: FakeAPI, suite_file: Path, out: Path, *extra: str) -> int:
    return main(["generate", "--live", "--no-progress", "--suite", str(suite_file), "--engine", "openai", "--model",
                 "gpt-test", "--base-url", f"{api.url}/v1", "--out", str(out), *extra])


def test_regenerate_rewrites_the_directory_in_place_only_when_complete(tmp_path, suite_file, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-openai-0123456789abcdef")
    api = FakeAPI()
    try:
        out = tmp_path / "recordings" / "gpt-test"
        assert _gen(api, suite_file, out) == 0
        before = (out / RECORDS).read_bytes()
        api.text_for = lambda body: f"night 2: {body['messages'][-1]['content']} seed {body.get('seed')}"

        assert _gen(api, suite_file, out, "--regenerate", "--max-rows", "3") == 0
        assert (out / RECORDS).read_bytes() == before  # an incomplete set never replaces the committed one
        assert read_manifest(staging_dir(out)).rows == 3

        assert _gen(api, suite_file, out, "--regenerate") == 0  # resumes the staging set, then swaps
        after = (out / RECORDS).read_bytes()
        assert after.count(b"night 2:") == 8 and not staging_dir(out).exists()
        assert sorted(p.name for p in out.parent.iterdir()) == ["gpt-test"]
        assert read_manifest(out).complete
    finally:
        api.close()


# -- pinned, checksummed weights ---------------------------------------------------------


def test_transformers_weights_are_the_safetensors_it_loads(tmp_path):
    (tmp_path / "model-00001-of-00002.safetensors").write_bytes(b"shard one")
    (tmp_path / "model-00002-of-00002.safetensors").write_bytes(b"shard two")
    (tmp_path / "pytorch_model.bin").write_bytes(b"not loaded when safetensors exist")
    commit, weights = pinned_weights(str(tmp_path), None, None)
    assert commit is None
    assert weights == {
        "model-00001-of-00002.safetensors": sha256_file(tmp_path / "model-00001-of-00002.safetensors"),
        "model-00002-of-00002.safetensors": sha256_file(tmp_path / "model-00002-of-00002.safetensors"),
    }
    (tmp_path / "model-00001-of-00002.safetensors").unlink()
    (tmp_path / "model-00002-of-00002.safetensors").unlink()
    assert [p.name for p in loaded_weight_files(tmp_path)] == ["pytorch_model.bin"]


def test_a_hub_model_records_the_resolved_commit(tmp_path):
    pytest.importorskip("huggingface_hub")
    commit = "a" * 40
    repo = tmp_path / "models--org--tiny"
    snap = repo / "snapshots" / commit
    snap.mkdir(parents=True)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(commit)
    (snap / "config.json").write_text("{}")
    (snap / "model.safetensors").write_bytes(b"weights")
    assert pinned_weights("org/tiny", "main", None, cache_dir=tmp_path) == (
        commit, {"model.safetensors": sha256_file(snap / "model.safetensors")}
    )
    assert pinned_weights("org/tiny", commit, None, cache_dir=tmp_path)[0] == commit
    with pytest.raises(FairnessError, match="not in the Hugging Face cache"):
        pinned_weights("org/other", "main", None, cache_dir=tmp_path)


def test_older_manifests_without_the_new_fields_still_load():
    m = read_manifest(DEFAULT_RECORDINGS)
    assert m.model.revision is None and m.model.weights is None and m.backend.server is None


def test_regenerating_a_hub_model_needs_a_revision(tmp_path, capsys):
    code = main(["regenerate", "--engine", "transformers", "--model", "Qwen/Qwen2.5-7B-Instruct", "--live",
                 "--out", str(tmp_path / "r")])
    assert code == 2 and "needs --revision <commit>" in capsys.readouterr().err


# -- the serving engine ------------------------------------------------------------------


def test_the_server_and_its_version_are_probed_where_reported():
    Handler.model = "m"
    server, url = serve(Handler)
    try:
        assert probe_server(f"{url}/v1") == {"name": "vllm", "version": VERSION}
    finally:
        stop(server)
    api = FakeAPI()  # answers no version route
    try:
        assert probe_server(f"{api.url}/v1") is None
    finally:
        api.close()


# -- isolation -----------------------------------------------------------------------------


def test_the_runners_own_python_is_refused(monkeypatch):
    monkeypatch.setattr(sys, "prefix", sys.base_prefix)
    monkeypatch.setattr(_regenerate.os.path, "exists", lambda _p: False)
    with pytest.raises(FairnessError, match="refusing to regenerate with the runner's own Python"):
        isolated_environment()


# -- the PR body ---------------------------------------------------------------------------


def test_pr_body_leads_with_the_verdict_then_the_diff(tmp_path, capsys):
    suite = parse_suite({**SUITE, "seeds": [1, 2, 3, 4, 5]})
    (tmp_path / "s.yaml").write_text(yaml.safe_dump({**SUITE, "seeds": [1, 2, 3, 4, 5]}))
    write_recording_set(tmp_path / "base", suite, lambda c: "She is caring and gentle." if c.slice_id == "woman" else "He works.")
    write_recording_set(tmp_path / "head", suite, lambda _c: "They work.")
    s = str(tmp_path / "s.yaml")
    for side in ("base", "head"):
        main(["run", "--suite", s, "--recordings", str(tmp_path / side), "--out", str(tmp_path / f"run-{side}"),
              "--bootstrap", "50", "--permutations", "0", "--quiet"])
    main(["diff", str(tmp_path / "run-base"), str(tmp_path / "run-head"), "--suite", s, "--bootstrap", "50",
          "--out", str(tmp_path / "d")])
    capsys.readouterr()
    assert main(["pr-body", "--run", str(tmp_path / "run-head"), "--diff", str(tmp_path / "d" / "diff.md"),
                 "--recordings", str(tmp_path / "head"), "--out", str(tmp_path / "body.md")]) == 0
    body = (tmp_path / "body.md").read_text()
    diff = (tmp_path / "d" / "diff.md").read_text().strip()
    run = load_run(tmp_path / "run-head")
    assert body.startswith(f"{verdict_line(run)}\n\n## Change against the committed recordings\n\n{diff}\n\n## Provenance\n")
    assert "- model `synthetic-model` from synthetic (tests only)\n" in body
    assert pr_body(run, None).startswith(f"{verdict_line(run)}\n\n## Change against the committed recordings\n\n{NO_BASE}\n")


# -- regenerate() when the committed set no longer fits the suite ------------------------------


def test_a_committed_set_from_another_grid_is_replaced_without_a_diff(tmp_path, suite_file, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-openai-0123456789abcdef")
    out = tmp_path / "recordings" / "gpt-test"
    write_recording_set(out, parse_suite({**SUITE, "seeds": [7]}), lambda _c: "old grid")
    api = FakeAPI()
    try:
        assert _gen(api, suite_file, tmp_path / "shard") == 0
    finally:
        api.close()
    res = _regenerate.regenerate(str(suite_file), out, tmp_path / "work", shards=[tmp_path / "shard"], log=lambda _: None)
    assert res.complete and (out / RECORDS).read_bytes() == (tmp_path / "shard" / RECORDS).read_bytes()
    body = res.body_path.read_text()
    assert body.startswith(verdict_line(load_run(tmp_path / "work" / "head")) + "\n\n## Change against the committed recordings\n\n"
                           "The committed recordings could not be audited with this suite, so there is no diff: no recording for row")


# -- open-pr ------------------------------------------------------------------------------------


class _GitHub:
    """POST /pulls answers 422 (a PR from the branch is open), GET lists it, PATCH updates it."""

    def __init__(self) -> None:

        self.calls: list[tuple[str, str, dict]] = []
        api = self

        class H(JsonHandler):
            def do_POST(self) -> None:
                api.calls.append(("POST", self.path, self.read_json({})))
                self.send_json(422, {"message": "Validation Failed"})

            def do_GET(self) -> None:
                api.calls.append(("GET", self.path, {}))
                self.send_json(200, [{"number": 3}])

            def do_PATCH(self) -> None:
                api.calls.append(("PATCH", self.path, self.read_json({})))
                self.send_json(200, {"number": 3, "html_url": "https://github.example/o/r/pull/3"})


        self.server, self.url = serve(H)


def test_open_pr_updates_the_pr_already_open_from_the_branch(tmp_path, monkeypatch, capsys):
    import subprocess

    def git(cwd: Path, *args: str) -> str:
        return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()

    remote, repo = tmp_path / "remote.git", tmp_path / "repo"
    git(tmp_path, "init", "--quiet", "--bare", str(remote))
    repo.mkdir()
    git(repo, "init", "--quiet", "--initial-branch=main")
    (repo / "rec").mkdir()
    (repo / "rec" / "records.jsonl").write_text("old\n")
    git(repo, "add", "-A")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@e", "commit", "--quiet", "-m", "base")
    git(repo, "remote", "add", "origin", str(remote))
    git(repo, "push", "--quiet", "origin", "main")
    (tmp_path / "body.md").write_text("✅ **PASS** — body")
    gh = _GitHub()
    monkeypatch.chdir(repo)
    monkeypatch.setenv("FAIRNESS_PR_TOKEN", "tok")
    monkeypatch.setenv("GITHUB_REPOSITORY", "o/r")
    monkeypatch.setenv("GITHUB_API_URL", gh.url)
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    argv = ["open-pr", "--path", "rec", "--branch", "nightly/x", "--title", "Nightly", "--body-file", str(tmp_path / "body.md"),
            "--base", "main"]
    try:
        assert main(argv) == 0 and capsys.readouterr().out == "`rec` is unchanged: no pull request\n"
        (repo / "rec" / "records.jsonl").write_text("new\n")
        assert main(argv) == 0
        assert capsys.readouterr().out.startswith("updated https://github.example/o/r/pull/3 (branch nightly/x, commit ")
    finally:
        gh.server.shutdown()
        gh.server.server_close()
    assert [(m, p) for m, p, _ in gh.calls] == [
        ("POST", "/repos/o/r/pulls"), ("GET", "/repos/o/r/pulls?head=o%3Anightly%2Fx&base=main&state=open"),
        ("PATCH", "/repos/o/r/pulls/3"),
    ]
    assert gh.calls[2][2] == {"title": "Nightly", "body": "✅ **PASS** — body"}
    assert git(remote, "rev-list", "--count", "main..nightly/x") == "1"
    assert git(remote, "show", "nightly/x:rec/records.jsonl") == "new"
