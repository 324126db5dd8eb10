"""`llm-fairness-check serve`: a real uvicorn on 127.0.0.1 audits an uploaded recording set exactly as `run`
does, and refuses each hostile upload with its 4xx and one line.

Every server here is the real command (`python -m fairness.cli serve --port 0`) in a subprocess, its
temporary folders under the test's own TMPDIR, its log read back from its stderr.
"""

from __future__ import annotations

import gzip
import http.client
import io
import json
import os
import re
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from conftest import DEFAULT_RECORDINGS, REPO
from monitor_logs import MAPPING, MARKER, make_records, write_logs

from fairness.cli import main
from fairness.report._schema import schema_text
from fairness.serve._errors import Refused

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

SET = DEFAULT_RECORDINGS.name
TOKEN = "s3cret-token-for-tests-0123456789"
LIMITS = {
    "FAIRNESS_SERVE_MAX_UPLOAD_BYTES": str(2 * 1024 * 1024),
    "FAIRNESS_SERVE_MAX_UNPACKED_BYTES": str(8 * 1024 * 1024),
    "FAIRNESS_SERVE_MAX_ENTRIES": "50",
    "FAIRNESS_SERVE_UPLOAD_TIMEOUT_S": "3",
}


class Server:
    """`llm-fairness-check serve` on a free port of 127.0.0.1, with its environment, temp root and log."""

    def __init__(self, tmp: Path, env: dict[str, str], args: tuple[str, ...] = ()) -> None:
        self.tmp = tmp / "tmp"
        self.tmp.mkdir(parents=True)
        self.log = tmp / "server.log"
        clean = {k: v for k, v in os.environ.items() if not k.startswith("FAIRNESS_SERVE_")}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "fairness.cli", "serve", "--port", "0", *args], cwd=REPO,
            env={**clean, "PYTHONPATH": str(REPO), "TMPDIR": str(self.tmp), **env},
            stdout=subprocess.PIPE, stderr=self.log.open("wb"), text=True,
        )
        line = self.proc.stdout.readline() if self.proc.stdout else ""
        match = re.fullmatch(r"llm-fairness-check serve: listening on http://127\.0\.0\.1:(\d+) \(token (.+)\)\n", line)
        assert match, (line, self.log.read_text())
        self.port = int(match.group(1))
        deadline = time.monotonic() + 30
        while call(self, "GET", "/v1/health")[0] != 200:
            assert time.monotonic() < deadline and self.proc.poll() is None, self.log.read_text()
            time.sleep(0.05)

    @property
    def root(self) -> Path:
        """The server's temp root (its one `fairness-serve-*` folder)."""
        (root,) = self.tmp.glob("fairness-serve-*")
        return root

    def stop(self) -> str:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        return self.log.read_text()


def call(server: Server, method: str, path: str, body: bytes | None = None, headers: dict[str, str] | None = None,
         ) -> tuple[int, dict[str, str], bytes]:
    """One request on its own connection: (status, headers with lower-case names, body)."""
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
    try:
        conn.request(method, path, body=body, headers=headers or {})
        resp = conn.getresponse()
        return resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read()
    finally:
        conn.close()


GZ = {"Content-Type": "application/gzip"}


def upload(server: Server, body: bytes, query: str = "", headers: dict[str, str] | None = None) -> tuple[int, dict]:
    status, _, data = call(server, "POST", f"/v1/audits{query}", body, {**GZ, **(headers or {})})
    return status, json.loads(data)


def wait_done(server: Server, audit_id: str, headers: dict[str, str] | None = None, timeout: float = 180) -> tuple[int, dict]:
    """Poll `GET /v1/audits/{id}` until it stops answering 202."""
    deadline = time.monotonic() + timeout
    while True:
        status, _, data = call(server, "GET", f"/v1/audits/{audit_id}", headers=headers)
        if status != 202:
            return status, json.loads(data)
        assert time.monotonic() < deadline, f"audit {audit_id} still {json.loads(data)['status']}"
        time.sleep(0.1)


def tar_gz(entries: list[tuple[tarfile.TarInfo, bytes | None]]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for info, content in entries:
            tar.addfile(info, io.BytesIO(content) if content is not None else None)
    return buf.getvalue()


def entry(name: str, content: bytes = b"x", kind: bytes = tarfile.REGTYPE, link: str = "") -> tuple[tarfile.TarInfo, bytes | None]:
    info = tarfile.TarInfo(name)
    info.type, info.linkname = kind, link
    if kind == tarfile.REGTYPE:
        info.size = len(content)
        return info, content
    return info, None


def set_entries(directory: Path = DEFAULT_RECORDINGS, edit: Callable[[str, bytes], bytes] = lambda n, b: b,
                ) -> list[tuple[tarfile.TarInfo, bytes | None]]:
    """The recording set at `directory` as archive entries under its folder's name, `edit` applied to each file."""
    return [entry(f"{SET}/{p.name}", edit(p.name, p.read_bytes())) for p in sorted(directory.iterdir())]


@pytest.fixture(scope="module")
def server(tmp_path_factory) -> Iterator[Server]:
    srv = Server(tmp_path_factory.mktemp("serve"), LIMITS)
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def committed_set() -> bytes:
    """The committed recording set as a .tar.gz, the way `tar czf set.tar.gz -C <parent> <set>` makes it."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        tar.add(DEFAULT_RECORDINGS, arcname=SET)
    return buf.getvalue()


@pytest.fixture(scope="module")
def cli_run(tmp_path_factory) -> Path:
    """`llm-fairness-check run` on the committed set: what the service must answer."""
    out = tmp_path_factory.mktemp("cli") / "out"
    assert main(["run", "--recordings", str(DEFAULT_RECORDINGS), "--out", str(out), "--junit", str(out / "junit.xml"),
                 "--quiet"]) == 3
    return out


class TestAudit:
    def test_an_uploaded_set_gets_the_results_of_run(self, server, committed_set, cli_run):
        status, accepted = upload(server, committed_set)
        assert status == 202
        assert accepted["status"] in ("queued", "running") and accepted["kind"] == "recordings"
        assert re.fullmatch(r"[0-9a-f]{32}", accepted["id"])
        base = f"/v1/audits/{accepted['id']}"
        assert accepted["links"] == {"audit": base, "status": f"{base}/status", "files": {
            name: f"{base}/{name}" for name in ("results.json", "card.html", "card.md", "card.yaml", "summary.md",
                                                "junit.xml")}}

        status, served = wait_done(server, accepted["id"])
        assert status == 200
        expected = json.loads((cli_run / "results.json").read_text())
        assert served["recordings"]["path"] == SET  # as the archive names it, not the server's folder
        for run in (served, expected):
            del run["recordings"]["path"]
        assert served == expected
        assert served["gate"]["state"] == "inconclusive" and served["gate"]["passed"] is False

        status, _, body = call(server, "GET", f"{base}/status")
        done = json.loads(body)
        assert (status, done["status"], done["gate_state"], done["passed"], done["error"]) == (
            200, "done", "inconclusive", False, None)

    def test_the_card_and_the_other_files_are_served(self, server, committed_set, cli_run):
        _, accepted = upload(server, committed_set)
        wait_done(server, accepted["id"])
        base = f"/v1/audits/{accepted['id']}"
        status, headers, html = call(server, "GET", f"{base}/card.html")
        assert status == 200 and headers["content-type"] == "text/html; charset=utf-8"
        assert headers["content-security-policy"] == "default-src 'none'; style-src 'unsafe-inline'; img-src data:; sandbox"
        expected_html = (cli_run / "card.html").read_text(encoding="utf-8")
        # the one difference: the card (its recordings row and replay command) names the set as the archive does
        cli_path = os.path.relpath(DEFAULT_RECORDINGS, Path.cwd())
        assert cli_path in expected_html
        assert html.decode() == expected_html.replace(cli_path, SET)
        status, headers, xml = call(server, "GET", f"{base}/junit.xml")
        assert (status, headers["content-type"], xml.decode()) == (
            200, "application/xml; charset=utf-8", (cli_run / "junit.xml").read_text(encoding="utf-8"))
        for name, media in (("card.md", "text/markdown"), ("card.yaml", "application/yaml"), ("summary.md", "text/markdown")):
            status, headers, _ = call(server, "GET", f"{base}/{name}")
            assert (status, headers["content-type"]) == (200, f"{media}; charset=utf-8")
        status, _, body = call(server, "GET", f"{base}/monitor.json")
        assert (status, json.loads(body)) == (404, {"error": f"audit `{accepted['id']}` is a recordings audit: it has no "
                                                             "monitor.json (its files: results.json, card.html, card.md, "
                                                             "card.yaml, summary.md, junit.xml)"})

    def test_a_suite_file_inside_the_archive_is_used(self, server, cli_run):
        suite_yaml = (REPO / "fairness" / "suite" / "builtin" / "qwen-v0.1.yaml").read_bytes()
        body = tar_gz([entry("suites/mine.yaml", suite_yaml), *set_entries()])
        status, accepted = upload(server, body, "?suite_file=./suites/mine.yaml&fail_on=fail")
        assert status == 202
        status, served = wait_done(server, accepted["id"])
        expected = json.loads((cli_run / "results.json").read_text())
        assert status == 200 and served["suite"] == expected["suite"] and served["metrics"] == expected["metrics"]
        # fail_on=fail: an inconclusive verdict passes
        assert (served["gate"]["state"], served["gate"]["passed"], served["gate"]["fail_on"]) == ("inconclusive", True, "fail")
        card = call(server, "GET", f"/v1/audits/{accepted['id']}/card.md")[2].decode()
        assert f"llm-fairness-check run --suite suites/mine.yaml --recordings {SET} --fail-on fail --out out" in card

    def test_a_set_the_audit_refuses_is_a_failed_job_with_one_line(self, server, tmp_path):
        """The checksums match (resealed after the edit) but a grid row has no recording: the audit itself refuses."""
        lines = (DEFAULT_RECORDINGS / "records.jsonl").read_bytes().splitlines(keepends=True)
        short = b"".join(lines[:-1])
        manifest = json.loads((DEFAULT_RECORDINGS / "manifest.json").read_text())
        import hashlib

        manifest["files"][0].update(sha256=hashlib.sha256(short).hexdigest(), rows=len(lines) - 1)
        body = tar_gz([entry(f"{SET}/manifest.json", json.dumps(manifest).encode()), entry(f"{SET}/records.jsonl", short)])
        status, accepted = upload(server, body)
        assert status == 202
        status, failed = wait_done(server, accepted["id"])
        assert status == 422 and failed["status"] == "failed"
        last = json.loads(lines[-1])
        assert re.fullmatch(rf"no recording for row `{re.escape(last['row_id'])}` \(.*\) in `{SET}`; nearest recorded row .*",
                            failed["error"])
        status, _, body = call(server, "GET", f"/v1/audits/{accepted['id']}/card.html")
        assert (status, json.loads(body)) == (409, {"error": f"audit `{accepted['id']}` is failed: it has no card.html (see its status)"})

    def test_an_unknown_audit_is_404(self, server):
        status, _, body = call(server, "GET", "/v1/audits/0123456789abcdef0123456789abcdef")
        assert (status, json.loads(body)) == (
            404, {"error": "no audit `0123456789abcdef0123456789abcdef` (unknown, or removed after its retention)"})

    def test_the_log_holds_aggregates_only(self, server, committed_set):
        _, accepted = upload(server, committed_set)
        wait_done(server, accepted["id"])
        log = server.log.read_text()
        assert re.search(rf"audit {accepted['id']} accepted: {len(committed_set)} bytes uploaded, 3 entries, \d+ bytes unpacked", log)
        assert re.search(rf"audit {accepted['id']} done: inconclusive \(passed=False\), 3200 rows, [\d.]+s", log)
        outputs = [json.loads(line)["output"] for line in (DEFAULT_RECORDINGS / "records.jsonl").read_text().splitlines()]
        assert not [o for o in outputs if len(o) > 30 and o[:30] in log]
        assert SET not in log and "manifest" not in log


def log_files(directory: Path, fmt: str = "jsonl", users_per_slice: int = 40) -> list[Path]:
    """Generated logs (tests/monitor_logs.py, planted rates and drift) in two files of `fmt` under `directory`."""
    write_logs(directory, make_records(users_per_slice=users_per_slice)[0], fmt)
    return sorted(directory.iterdir())


def batch_entries(fmt: str = "jsonl", mapping: str = MAPPING, name: str = "mapping.yaml",
                  ) -> list[tuple[tarfile.TarInfo, bytes | None]]:
    """A small monitor batch as archive entries: two log files of `fmt` and the mapping at the archive's top."""
    with tempfile.TemporaryDirectory() as tmp:
        return [entry(name, mapping.encode()), *(entry(p.name, p.read_bytes()) for p in log_files(Path(tmp), fmt, 3))]


@pytest.fixture(scope="module")
def batch(tmp_path_factory) -> tuple[Path, list[Path]]:
    """Generated logs (two JSONL files) and their mapping, as `monitor` reads them."""
    root = tmp_path_factory.mktemp("batch")
    (root / "mapping.yaml").write_text(MAPPING, encoding="utf-8")
    return root, log_files(root / "logs")


def monitor_cli(root: Path, out: Path, *extra: str) -> Path:
    """`llm-fairness-check monitor` on the batch at `root`: what the service must answer."""
    assert main(["monitor", str(root / "logs"), "--mapping", str(root / "mapping.yaml"), "--out", str(out), "--quiet",
                 *extra]) == 1
    return out


def served_files(server: Server, audit_id: str) -> dict[str, bytes]:
    base = f"/v1/audits/{audit_id}"
    files = {}
    for name, media in (("monitor.json", "application/json"), ("summary.md", "text/markdown; charset=utf-8"),
                        ("junit.xml", "application/xml; charset=utf-8")):
        status, headers, files[name] = call(server, "GET", f"{base}/{name}")
        assert (status, headers["content-type"]) == (200, media)
    return files


class TestMonitorBatch:
    def test_a_batch_gets_the_outputs_of_monitor(self, server, batch, tmp_path):
        root, logs = batch
        expected = monitor_cli(root, tmp_path / "cli")
        body = tar_gz([entry("mapping.yaml", (root / "mapping.yaml").read_bytes()),
                       *(entry(p.name, p.read_bytes()) for p in logs)])
        status, accepted = upload(server, body, "?kind=monitor")
        assert status == 202 and accepted["kind"] == "monitor"
        base = f"/v1/audits/{accepted['id']}"
        assert accepted["links"] == {"audit": base, "status": f"{base}/status", "files": {
            name: f"{base}/{name}" for name in ("monitor.json", "summary.md", "junit.xml")}}

        status, served = wait_done(server, accepted["id"])
        cli = json.loads((expected / "monitor.json").read_text(encoding="utf-8"))
        assert status == 200 and served == cli
        assert served["source"]["files"] == 2 and served["source"]["format"] == "jsonl" and served["drift"] == ["2026-03-05"]
        files = served_files(server, accepted["id"])
        assert files == {name: (expected / name).read_bytes() for name in ("monitor.json", "summary.md", "junit.xml")}
        done = json.loads(call(server, "GET", f"{base}/status")[2])
        assert (done["status"], done["gate_state"], done["passed"]) == ("done", cli["gate"]["state"], cli["gate"]["passed"])

        for name in ("card.html", "card.md", "card.yaml", "results.json"):
            status, _, answer = call(server, "GET", f"{base}/{name}")
            assert (status, json.loads(answer)) == (404, {"error": f"audit `{accepted['id']}` is a monitor audit: it has "
                                                                   f"no {name} (its files: monitor.json, summary.md, junit.xml)"})
        # aggregates only: no log text in any answer or in the service's log
        assert not [name for name, data in files.items() if MARKER.encode() in data]
        log = server.log.read_text()
        assert MARKER not in log and "request_id" not in log
        assert re.search(rf"audit {accepted['id']} done: {cli['gate']['state']} \(passed={cli['gate']['passed']}\), "
                         rf"{cli['source']['rows_sampled']} rows, [\d.]+s", log)

    def test_the_options_suite_file_and_a_named_mapping_are_those_of_monitor(self, server, batch, tmp_path):
        root, logs = batch
        options = ("--sample", "3", "--reference", "window:2026-03-02", "--gate-on", "point", "--fail-on", "fail")
        suite_yaml = REPO / "fairness" / "suite" / "builtin" / "qwen-v0.1.yaml"
        expected = monitor_cli(root, tmp_path / "cli", *options, "--suite", str(suite_yaml))
        body = tar_gz([entry("batch/map.yaml", (root / "mapping.yaml").read_bytes()),
                       entry("batch/suite.yaml", suite_yaml.read_bytes()),
                       *(entry(f"batch/{p.stem}.parquet", _parquet(p)) for p in logs)])
        status, accepted = upload(server, body, "?kind=monitor&mapping=batch/map.yaml&suite_file=batch/suite.yaml&sample=3"
                                                "&reference=window:2026-03-02&gate_on=point&fail_on=fail")
        assert status == 202
        status, served = wait_done(server, accepted["id"])
        cli = json.loads((expected / "monitor.json").read_text(encoding="utf-8"))
        assert status == 200 and served["source"]["format"] == "parquet"
        assert served["source"]["sample"] == 3 and (served["reference"]["kind"], served["reference"]["window"]) == (
            "window", "2026-03-02")
        assert (served["gate"]["gate_on"], served["gate"]["fail_on"]) == ("point", "fail")
        served["source"]["format"] = "jsonl"  # the one difference: the same records sent as Parquet
        assert served == cli

    def test_a_mapping_field_not_in_the_logs_is_a_failed_job_with_one_line(self, server, batch):
        _, logs = batch
        body = tar_gz([entry("mapping.yaml", MAPPING.replace("text: output", "text: answer").encode()),
                       *(entry(p.name, p.read_bytes()) for p in logs)])
        status, accepted = upload(server, body, "?kind=monitor")
        assert status == 202
        status, failed = wait_done(server, accepted["id"])
        assert (status, failed["status"], failed["error"]) == (
            422, "failed", "mapping `text`: field `answer` is not in the logs (fields: gender, output, religion, "
                           "request_id, ts, user)")
        status, _, answer = call(server, "GET", f"/v1/audits/{accepted['id']}/monitor.json")
        assert (status, json.loads(answer)) == (
            409, {"error": f"audit `{accepted['id']}` is failed: it has no monitor.json (see its status)"})


    def test_a_server_without_the_monitor_extra_refuses_a_batch_before_queueing(self, tmp_path):
        shadow = tmp_path / "no-duckdb" / "duckdb"
        shadow.mkdir(parents=True)
        (shadow / "__init__.py").write_text("raise ImportError('duckdb is not installed here')\n", encoding="utf-8")
        srv = Server(tmp_path, {"PYTHONPATH": f"{shadow.parent}{os.pathsep}{REPO}"})
        try:
            assert upload(srv, tar_gz(batch_entries()), "?kind=monitor") == (
                422, {"error": "the DuckDB engine needs the `monitor` extra: pip install 'llm-fairness-check[monitor]'"})
            assert sorted(p.name for p in srv.root.iterdir()) == []  # nothing queued, nothing left behind
        finally:
            srv.stop()


def _parquet(jsonl: Path) -> bytes:
    import pyarrow as pa
    import pyarrow.parquet as pq

    buf = io.BytesIO()
    rows = [json.loads(line) for line in jsonl.read_text(encoding="utf-8").splitlines()]
    pq.write_table(pa.Table.from_pylist(rows), buf)
    return buf.getvalue()


def _bad_checksum(name: str, data: bytes) -> bytes:
    return data.replace(b'"output":"', b'"output":"Edited. ', 1) if name == "records.jsonl" else data


HOSTILE: dict[str, tuple[Callable[[], bytes], str, int, str]] = {
    "not gzip": (lambda: b"PK\x03\x04 a zip file", "", 415,
                 "the body is not gzip data: send the recording set as a .tar.gz"),
    "gzip but not tar": (lambda: gzip.compress(b"hello " * 200), "", 400, "the body is gzip data but not a tar archive"),
    "truncated gzip": (lambda: tar_gz(set_entries())[:4000], "", 400,
                       "the body is not a complete gzip stream (truncated or corrupt)"),
    "gzip bomb": (lambda: tar_gz([entry("zeros", bytes(16 * 1024 * 1024))]), "", 413,
                  "the archive unpacks to over 8,388,608 bytes, the limit (FAIRNESS_SERVE_MAX_UNPACKED_BYTES)"),
    "bomb within its declared sizes": (lambda: tar_gz([entry("zeros", bytes(8 * 1024 * 1024 - 100))]), "", 413,
                                       "the archive unpacks to over 8,388,608 bytes, the limit (FAIRNESS_SERVE_MAX_UNPACKED_BYTES)"),
    "too many entries": (lambda: tar_gz([entry(f"{SET}/{i}.txt") for i in range(51)]), "", 413,
                         "the archive holds over 50 entries, the limit (FAIRNESS_SERVE_MAX_ENTRIES)"),
    "absolute path": (lambda: tar_gz([*set_entries(), entry("/tmp/planted.txt")]), "", 422,
                      "entry `/tmp/planted.txt` has an absolute path; names must be relative to the archive"),
    "dot-dot traversal": (lambda: tar_gz([entry(f"{SET}/../../planted.txt"), *set_entries()]), "", 422,
                          f"entry `{SET}/../../planted.txt` climbs out of the archive with `..`"),
    "symlink": (lambda: tar_gz([entry(f"{SET}/records.jsonl", kind=tarfile.SYMTYPE, link="/etc/passwd")]), "", 422,
                f"entry `{SET}/records.jsonl` is a symbolic link: links are refused"),
    "hard link": (lambda: tar_gz([entry("a.txt"), entry(f"{SET}/records.jsonl", kind=tarfile.LNKTYPE, link="a.txt")]), "",
                  422, f"entry `{SET}/records.jsonl` is a hard link: links are refused"),
    "character device": (lambda: tar_gz([entry(f"{SET}/null", kind=tarfile.CHRTYPE)]), "", 422,
                         f"entry `{SET}/null` is a device: only files and folders are accepted"),
    "fifo": (lambda: tar_gz([entry(f"{SET}/pipe", kind=tarfile.FIFOTYPE)]), "", 422,
             f"entry `{SET}/pipe` is a FIFO: only files and folders are accepted"),
    "duplicate entry": (lambda: tar_gz([*set_entries(), entry(f"./{SET}/manifest.json", b"{}")]), "", 422,
                        f"entry `{SET}/manifest.json` appears twice in the archive"),
    "no manifest": (lambda: tar_gz([e for e in set_entries() if e[0].name.endswith("records.jsonl")]), "", 422,
                    "the archive has no manifest.json at its top level or in a top-level folder: it is not a recording set"),
    "checksum mismatch": (lambda: tar_gz(set_entries(edit=_bad_checksum)), "", 422,
                          f"data file `{SET}/records.jsonl` does not match the sha256 in its manifest (edited or corrupted)"),
    "unknown suite": (lambda: tar_gz(set_entries()), "?suite=/etc/passwd", 422,
                      "unknown suite `/etc/passwd`: name a built-in suite (fairness-cards/qwen-v0.1) or send a suite file "
                      "inside the archive as `suite_file`"),
    "suite file outside the archive": (lambda: tar_gz(set_entries()), "?suite_file=../suite.yaml", 422,
                                       "suite_file `../suite.yaml` climbs out of the archive with `..`"),
    "suite file not in the archive": (lambda: tar_gz(set_entries()), "?suite_file=suite.yaml", 422,
                                      "suite_file `suite.yaml` is not a file in the archive"),
    "unsupported kind": (lambda: tar_gz(set_entries()), "?kind=batch", 422,
                         "query parameter `kind`: Input should be 'recordings' or 'monitor', got 'batch'"),
    "a monitor option for a recording set": (lambda: tar_gz(set_entries()), "?window=week", 422,
                                             "`window` is an option of kind=monitor, not of kind=recordings"),
    "a recording-set option for a batch": (lambda: tar_gz(batch_entries()), "?kind=monitor&permutations=10", 422,
                                           "`permutations` is an option of kind=recordings, not of kind=monitor"),
    "examples are not offered": (lambda: tar_gz(batch_entries()), "?kind=monitor&examples=3", 422,
                                 "unknown query parameter `examples` (did you mean `sample`?)"),
    "the engine is not offered": (lambda: tar_gz(batch_entries()), "?kind=monitor&engine=spark", 422,
                                  "unknown query parameter `engine` (known: kind, suite, suite_file, fail_on, gate_on, "
                                  "threshold, scorer_mode, min_group_size, allow_small_samples, bootstrap, permutations, "
                                  "seed, evaluators, allow_incomplete, mapping, sample, window, reference)"),
    "a bad mapping": (lambda: tar_gz(batch_entries(mapping=MAPPING.replace("unit:", "unti:"))), "?kind=monitor", 422,
                      "mapping `mapping.yaml`: unknown key `unti` (did you mean `unit`?)"),
    "a batch without its mapping": (lambda: tar_gz(batch_entries(name="map.yaml")), "?kind=monitor", 422,
                                    "the archive has no mapping.yaml at its top level: add the mapping there, or name "
                                    "the mapping file inside the archive with `mapping`"),
    "a mapping outside the archive": (lambda: tar_gz(batch_entries()), "?kind=monitor&mapping=../mapping.yaml", 422,
                                      "mapping `../mapping.yaml` climbs out of the archive with `..`"),
    "a mapping not in the archive": (lambda: tar_gz(batch_entries()), "?kind=monitor&mapping=/etc/passwd", 422,
                                     "mapping `/etc/passwd` has an absolute path; names must be relative to the archive"),
    "a mixed-format batch": (lambda: tar_gz([*batch_entries("jsonl"), *batch_entries("csv")[1:]]), "?kind=monitor", 422,
                             "the logs mix formats (csv, jsonl); monitor one format at a time"),
    "a batch with another file": (lambda: tar_gz([*batch_entries(), entry("notes.txt", b"hello")]), "?kind=monitor", 422,
                                  "entry `notes.txt` is not a log file (.jsonl[.gz], .ndjson[.gz], .json[.gz], .parquet "
                                  "or .csv[.gz]), the mapping or the suite file"),
    "a batch without logs": (lambda: tar_gz(batch_entries()[:1]), "?kind=monitor", 422,
                             "the archive holds no log file (.jsonl[.gz], .ndjson[.gz], .json[.gz], .parquet or .csv[.gz])"),
    "a grid reference": (lambda: tar_gz(batch_entries()), "?kind=monitor&reference=/srv/results.json", 422,
                         "reference `/srv/results.json`: give `previous` or `window:LABEL` (a grid audit's results.json "
                         "is not offered over REST)"),
    "a bad window": (lambda: tar_gz(batch_entries()), "?kind=monitor&window=fortnight", 422,
                     "monitor: --window must be day, week or a positive number of records, got `fortnight`"),
    "a bad sample": (lambda: tar_gz(batch_entries()), "?kind=monitor&sample=0", 422,
                     "monitor: `sample`: Input should be greater than or equal to 1"),
    "an unknown suite for a batch": (lambda: tar_gz(batch_entries()), "?kind=monitor&suite=mine", 422,
                                     "unknown suite `mine`: name a built-in suite (fairness-cards/qwen-v0.1) or send a "
                                     "suite file inside the archive as `suite_file`"),
    "misspelt option": (lambda: tar_gz(set_entries()), "?fail_onn=fail", 422,
                        "unknown query parameter `fail_onn` (did you mean `fail_on`?)"),
    "bad option value": (lambda: tar_gz(set_entries()), "?permutations=-1", 422,
                         "`permutations` must be an integer in [0, 100000], got -1"),
    "empty body": (lambda: b"", "", 400, "the request has no body: send the recording set as a .tar.gz"),
}


class TestHostileUploads:
    @pytest.mark.parametrize("case", list(HOSTILE))
    def test_each_is_refused_with_its_status_and_one_line(self, server, case):
        make, query, code, message = HOSTILE[case]
        before = sorted(p.name for p in server.root.iterdir())
        status, body = upload(server, make(), query)
        assert (status, body) == (code, {"error": message})
        assert sorted(p.name for p in server.root.iterdir()) == before  # nothing queued, nothing left behind
        assert not list(server.tmp.parent.rglob("planted.txt"))

    def test_a_wrong_content_type_is_415(self, server):
        status, _, body = call(server, "POST", "/v1/audits", b"--boundary", {"Content-Type": "multipart/form-data; boundary=x"})
        assert (status, json.loads(body)) == (415, {"error": "send the recording set as the raw body with "
                                                             "`Content-Type: application/gzip` (got `multipart/form-data`)"})

    def test_a_declared_body_over_the_limit_is_refused_before_it_is_read(self, server):
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
        try:
            conn.putrequest("POST", "/v1/audits")
            conn.putheader("Content-Type", "application/gzip")
            conn.putheader("Content-Length", str(3 * 1024 * 1024))
            conn.endheaders()  # no body sent: the answer must not wait for it
            resp = conn.getresponse()
            assert (resp.status, json.loads(resp.read())) == (
                413, {"error": "the body is over 2,097,152 bytes, the limit (FAIRNESS_SERVE_MAX_UPLOAD_BYTES)"})
        finally:
            conn.close()

    def test_a_body_that_trickles_in_is_refused_after_the_upload_timeout(self, server, committed_set):
        before = sorted(p.name for p in server.root.iterdir())
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
        try:
            conn.putrequest("POST", "/v1/audits")
            conn.putheader("Content-Type", "application/gzip")
            conn.putheader("Content-Length", str(len(committed_set)))
            conn.endheaders(committed_set[:1000])  # the rest never comes
            started = time.monotonic()
            resp = conn.getresponse()
            assert (resp.status, json.loads(resp.read())) == (
                408, {"error": "the body took over 3 s to arrive, the limit (FAIRNESS_SERVE_UPLOAD_TIMEOUT_S)"})
            assert 2.5 < time.monotonic() - started < 20
        finally:
            conn.close()
        assert sorted(p.name for p in server.root.iterdir()) == before  # its place and folder are released

    def test_a_chunked_body_is_counted_as_it_streams(self, server):
        chunk = gzip.compress(b"") + bytes(64 * 1024)
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
        try:
            conn.request("POST", "/v1/audits", body=iter([chunk] * 33), headers=GZ, encode_chunked=True)
            resp = conn.getresponse()
            assert (resp.status, json.loads(resp.read())) == (
                413, {"error": "the body is over 2,097,152 bytes, the limit (FAIRNESS_SERVE_MAX_UPLOAD_BYTES)"})
        finally:
            conn.close()


class TestTokenAndQueue:
    def test_a_token_is_required_when_set_and_finished_audits_are_bounded(self, tmp_path, committed_set):
        srv = Server(tmp_path, {"FAIRNESS_SERVE_TOKEN": TOKEN, "FAIRNESS_SERVE_KEEP_JOBS": "1"})
        try:
            auth = {"Authorization": f"Bearer {TOKEN}"}
            assert upload(srv, committed_set) == (401, {"error": "this server needs a bearer token: send "
                                                                 "`Authorization: Bearer <token>`"})
            assert upload(srv, committed_set, headers={"Authorization": "Bearer not-the-token"}) == (
                401, {"error": "the bearer token is not this server's"})
            status, _, body = call(srv, "GET", "/v1/audits/0123456789abcdef0123456789abcdef")
            assert status == 401
            status, _, body = call(srv, "GET", "/v1/health")
            assert status == 200 and json.loads(body)["auth"] is True

            status, first = upload(srv, committed_set, headers=auth)
            assert status == 202 and wait_done(srv, first["id"], auth)[0] == 200
            status, second = upload(srv, committed_set, headers=auth)
            assert status == 202 and wait_done(srv, second["id"], auth)[0] == 200
            # keep_jobs=1: the older finished audit and its folder are gone
            status, _, body = call(srv, "GET", f"/v1/audits/{first['id']}", headers=auth)
            assert (status, json.loads(body)) == (
                404, {"error": f"no audit `{first['id']}` (unknown, or removed after its retention)"})
            assert sorted(p.name for p in srv.root.iterdir()) == [second["id"]]
            assert sorted(p.name for p in (srv.root / second["id"]).iterdir()) == ["out"]  # the upload is removed
        finally:
            log = srv.stop()
        assert TOKEN not in log
        assert list(srv.tmp.iterdir()) == []  # the temp root goes with the service

    def test_the_queue_is_bounded(self, tmp_path, committed_set):
        srv = Server(tmp_path, {"FAIRNESS_SERVE_QUEUE": "1", "FAIRNESS_SERVE_WORKERS": "1"})
        try:
            slow = "?permutations=100000&bootstrap=100000&evaluators=all"
            status, running = upload(srv, committed_set, slow)
            assert status == 202
            deadline = time.monotonic() + 30
            while json.loads(call(srv, "GET", f"/v1/audits/{running['id']}/status")[2])["status"] == "queued":
                assert time.monotonic() < deadline
                time.sleep(0.02)
            status, waiting = upload(srv, committed_set)
            assert status == 202
            status, headers, body = call(srv, "POST", "/v1/audits", committed_set, GZ)
            assert (status, json.loads(body), headers["retry-after"]) == (
                429, {"error": "the queue is full (room for 1 audits waiting or being uploaded); retry later"}, "10")
            states = [json.loads(call(srv, "GET", f"/v1/audits/{a['id']}/status")[2])["status"] for a in (running, waiting)]
            assert states == ["running", "queued"]
            health = json.loads(call(srv, "GET", "/v1/health")[2])
            assert (health["queued"], health["running"], health["queue_size"]) == (1, 1, 1)
        finally:
            srv.stop()


class TestRetention:
    def test_finished_audits_go_after_the_retention_and_beyond_the_count(self, tmp_path):
        from fairness.serve._jobs import Jobs
        from fairness.serve._settings import ServeSettings

        jobs = Jobs(ServeSettings(retention_seconds=60, keep_jobs=2), tmp_path)
        made = []
        for _ in range(4):
            with jobs.place() as job:
                jobs.submit(job)
            made.append(job)
        now = time.time()
        for job, finished in zip(made, (now - 100, now - 30, now - 20, None), strict=True):  # the last still runs
            job.finished = finished
        jobs.prune(now=now)  # the first is past its 60 s; two finished are within keep_jobs=2
        assert sorted(p.name for p in tmp_path.iterdir()) == sorted(j.id for j in made[1:])
        jobs.prune(now=now + 35)  # the second is past its 60 s too
        assert sorted(p.name for p in tmp_path.iterdir()) == sorted(j.id for j in made[2:])
        made[3].finished = now + 30
        with jobs.place() as extra:
            jobs.submit(extra)
        extra.finished = now + 31  # three finished within the retention: the oldest goes (keep_jobs=2)
        jobs.prune(now=now + 35)
        assert sorted(p.name for p in tmp_path.iterdir()) == sorted(j.id for j in (made[3], extra))
        with pytest.raises(Refused) as refused:
            jobs.get(made[2].id)
        assert (refused.value.status, refused.value.message) == (
            404, f"no audit `{made[2].id}` (unknown, or removed after its retention)")


class TestCommand:
    def test_listening_beyond_this_machine_without_a_token_is_exit_2(self, capsys, monkeypatch):
        monkeypatch.delenv("FAIRNESS_SERVE_TOKEN", raising=False)
        assert main(["serve", "--host", "0.0.0.0", "--port", "0"]) == 2
        assert capsys.readouterr().err == (
            "error: refusing to listen on `0.0.0.0` without a token: set FAIRNESS_SERVE_TOKEN (clients send it as "
            "`Authorization: Bearer …`) or bind to 127.0.0.1\n")

    def test_a_short_token_is_exit_2(self, capsys, monkeypatch):
        monkeypatch.setenv("FAIRNESS_SERVE_TOKEN", "short")
        assert main(["serve", "--port", "0"]) == 2
        assert capsys.readouterr().err == "error: FAIRNESS_SERVE_TOKEN must be at least 16 characters without spaces\n"

    def test_a_bad_limit_is_exit_2(self, capsys, monkeypatch):
        monkeypatch.setenv("FAIRNESS_SERVE_QUEUE", "lots")
        assert main(["serve", "--port", "0"]) == 2
        assert capsys.readouterr().err == (
            "error: FAIRNESS_SERVE_QUEUE must be a positive whole number of queued audits, got 'lots'\n")

    def test_a_port_in_use_is_exit_2(self, server, capsys):
        assert main(["serve", "--port", str(server.port)]) == 2
        assert capsys.readouterr().err == f"error: cannot listen on 127.0.0.1:{server.port}: Address already in use\n"


class TestOpenAPI:
    def test_the_committed_document_matches_the_app(self, capsys):
        """Regenerate with `llm-fairness-check schema openapi > docs/schema/openapi.json`."""
        assert main(["schema", "openapi"]) == 0
        printed = capsys.readouterr().out
        assert printed == schema_text("openapi")
        assert (REPO / "docs" / "schema" / "openapi.json").read_text(encoding="utf-8") == printed

    def test_the_server_publishes_it(self, server):
        status, _, body = call(server, "GET", "/v1/openapi.json")
        assert (status, json.loads(body)) == (200, json.loads((REPO / "docs" / "schema" / "openapi.json").read_text()))

    def test_every_4xx_is_the_error_body_and_results_are_the_results_schema(self):
        doc = json.loads((REPO / "docs" / "schema" / "openapi.json").read_text())
        get = doc["paths"]["/v1/audits/{audit_id}"]["get"]["responses"]
        assert get["200"]["content"]["application/json"]["schema"] == {"oneOf": [
            {"$ref": "#/components/schemas/FairnessRun"}, {"$ref": "#/components/schemas/MonitorRun"}]}
        monitor_json = doc["paths"]["/v1/audits/{audit_id}/monitor.json"]["get"]["responses"]["200"]
        assert monitor_json["content"]["application/json"]["schema"] == {"$ref": "#/components/schemas/MonitorRun"}
        # the two result shapes are told apart by their keys: neither admits the other's
        components = doc["components"]["schemas"]
        for a, b in (("FairnessRun", "MonitorRun"), ("MonitorRun", "FairnessRun")):
            assert components[a]["additionalProperties"] is False
            assert set(components[b]["required"]) - set(components[a]["properties"])
        assert get["202"]["content"]["application/json"]["schema"] == {"$ref": "#/components/schemas/AuditStatus"}
        post = doc["paths"]["/v1/audits"]["post"]
        assert post["responses"]["202"]["content"]["application/json"]["schema"] == {
            "$ref": "#/components/schemas/AuditStatus"}
        assert sorted(post["requestBody"]["content"]) == ["application/gzip", "application/x-gzip"]
        assert [p["name"] for p in post["parameters"]][:3] == ["kind", "suite", "suite_file"]
        assert post["parameters"][0]["schema"]["enum"] == ["recordings", "monitor"]
        assert [p["name"] for p in post["parameters"]][-4:] == ["mapping", "sample", "window", "reference"]
        refs = {r["content"]["application/json"]["schema"]["$ref"].rsplit("/", 1)[1]
                for op in (o for p in doc["paths"].values() for o in p.values())
                for code, r in op["responses"].items() if code.startswith("4")}
        assert refs == {"ErrorBody", "AuditStatus"}
        assert "HTTPValidationError" not in doc["components"]["schemas"]
        gate = doc["components"]["schemas"]["Gate"]["properties"]
        assert gate["passed"]["description"] == "Whether the process exits 0 (the state under the `fail_on` policy)."
