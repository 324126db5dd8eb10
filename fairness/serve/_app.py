"""The FastAPI application: routes, the one error shape, and the OpenAPI schema committed under docs/schema/.

Every refusal is a 4xx whose JSON body is `{"error": "<one line>"}` (an audit that failed answers its
own status, whose `error` is that line). The archive is the raw request body (`Content-Type:
application/gzip`), so no multipart parser reads untrusted input; it is counted while it streams
in, whatever its Content-Length says.
"""

from __future__ import annotations

import asyncio
import contextlib
import difflib
import shutil
import tempfile
import time
import typing
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Annotated, Any

from fastapi import Depends, FastAPI, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException

from fairness._version import __version__
from fairness.audit._results import FairnessRun
from fairness.serve._auth import token_check
from fairness.serve._errors import Refused
from fairness.serve._intake import UPLOAD, AuditQuery, intake
from fairness.serve._jobs import Job, Jobs, iso, log
from fairness.serve._models import AuditStatus, ErrorBody, Health, Links
from fairness.serve._settings import LIMITS, ServeSettings

GZIP_TYPES = ("application/gzip", "application/x-gzip")
FILES = {
    "results.json": "application/json",
    "card.html": "text/html; charset=utf-8",
    "card.md": "text/markdown; charset=utf-8",
    "card.yaml": "application/yaml; charset=utf-8",
    "summary.md": "text/markdown; charset=utf-8",
    "junit.xml": "application/xml; charset=utf-8",
}
"""The outputs a finished audit serves, with their media types."""
CARD_CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:; sandbox"
"""card.html is inline CSS and SVG only: nothing it holds may run or load anything."""


def _errors(*codes: int) -> dict[int | str, dict[str, Any]]:
    return {code: {"model": ErrorBody} for code in codes}


def status_of(job: Job) -> AuditStatus:
    base = f"/v1/audits/{job.id}"
    return AuditStatus(
        id=job.id, kind=job.kind, status=job.status, submitted_at=iso(job.submitted) or "",
        started_at=iso(job.started), finished_at=iso(job.finished), error=job.error,
        gate_state=job.gate_state, passed=job.passed,
        links=Links(audit=base, status=f"{base}/status", files={name: f"{base}/{name}" for name in FILES}),
    )


def output(job: Job, name: str) -> bytes:
    """A finished audit's output file; 404 if its retention ended while the request was answered."""
    try:
        return (job.out / name).read_bytes()
    except FileNotFoundError:
        raise Refused(404, f"no audit `{job.id}` (unknown, or removed after its retention)") from None


def _status_response(job: Job, code: int) -> JSONResponse:
    return JSONResponse(status_of(job).model_dump(mode="json"), status_code=code)


def _validation_line(exc: RequestValidationError) -> str:
    """The first problem of a request FastAPI refused, as one line naming the parameter."""
    first = exc.errors()[0]
    where, name = [*first.get("loc", ()), "", ""][:2]
    if first.get("type") == "extra_forbidden":
        close = difflib.get_close_matches(str(name), list(AuditQuery.model_fields), n=1)
        hint = f" (did you mean `{close[0]}`?)" if close else f" (known: {', '.join(AuditQuery.model_fields)})"
        return f"unknown {where} parameter `{name}`{hint}"
    got = f", got {first['input']!r}" if isinstance(first.get("input"), (str, int, float)) else ""
    return f"{where} parameter `{name}`: {first.get('msg', 'invalid')}{got}".replace("\n", " ")


def create_app(settings: ServeSettings | None = None) -> FastAPI:
    """The service for `settings` (default: 127.0.0.1 without a token and the default limits). Its
    folders and workers exist while it runs (the lifespan), not when it is built: `app.openapi()`
    needs neither."""
    settings = settings or ServeSettings()

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        root = Path(tempfile.mkdtemp(prefix="fairness-serve-"))
        app.state.jobs = Jobs(settings, root)
        app.state.jobs.start()
        log.info("serving audits: %d worker(s), queue of %d, token %s", settings.workers, settings.queue_size,
                 "required" if settings.token is not None else "not required")
        try:
            yield
        finally:
            app.state.jobs.stop()
            shutil.rmtree(root, ignore_errors=True)

    app = FastAPI(
        title="llm-fairness-check", version=__version__, lifespan=lifespan,
        description="Audit an LLM's recorded answers for demographic fairness: upload a recording set, read the verdict, "
                    "results.json and the Fairness Card. Every 4xx body is `{\"error\": \"<one line>\"}` (an audit that "
                    "failed answers its status instead, with `error`).",
        openapi_url="/v1/openapi.json", docs_url=None, redoc_url=None,
    )
    auth = [Depends(token_check(settings))]

    @app.exception_handler(Refused)
    async def refused(_request: Request, exc: Refused) -> JSONResponse:
        return JSONResponse({"error": exc.message}, status_code=exc.status, headers=exc.headers)

    @app.exception_handler(RequestValidationError)
    async def invalid(_request: Request, exc: RequestValidationError) -> JSONResponse:
        return JSONResponse({"error": _validation_line(exc)}, status_code=422)

    @app.exception_handler(HTTPException)
    async def http_error(_request: Request, exc: HTTPException) -> JSONResponse:
        return JSONResponse({"error": str(exc.detail)}, status_code=exc.status_code, headers=exc.headers)

    def jobs(request: Request) -> Jobs:
        return request.app.state.jobs

    @app.get("/v1/health", tags=["service"])
    def health(request: Request) -> Health:
        """Whether the service is up and how busy it is; needs no token."""
        j = jobs(request)
        return Health(status="ok", version=__version__, queued=j.queued, running=j.running,
                      queue_size=settings.queue_size, auth=settings.token is not None)

    @app.post(
        "/v1/audits", tags=["audits"], status_code=202, dependencies=auth, response_model=AuditStatus,
        responses={202: {"description": "Accepted and queued: the audit's status (`Location`: where to poll)."},
                   **_errors(400, 401, 408, 413, 415, 422, 429)},
        openapi_extra={"requestBody": {"required": True, "description": (
            "The recording set as a gzip'd tar (`tar czf set.tar.gz -C recordings/… .`, or with the set's folder as "
            "the archive's one top-level folder). Only regular files and folders; no absolute paths, `..`, links, "
            f"devices or duplicate entries. Limits (environment, defaults): {LIMITS['max_upload_bytes'][0]} "
            f"({LIMITS['max_upload_bytes'][1]:,} bytes of body), {LIMITS['max_unpacked_bytes'][0]} "
            f"({LIMITS['max_unpacked_bytes'][1]:,} bytes unpacked), {LIMITS['max_entries'][0]} "
            f"({LIMITS['max_entries'][1]:,} entries), {LIMITS['upload_seconds'][0]} ({LIMITS['upload_seconds'][1]} s "
            "for the body to arrive)."),
            "content": {t: {"schema": {"type": "string", "format": "binary"}} for t in GZIP_TYPES}}},
    )
    async def submit(request: Request, query: Annotated[AuditQuery, Query()]) -> JSONResponse:
        """Upload a recording set to audit: 202 and the queued audit's status (its `links.audit` to poll).

        Everything is checked before the audit is queued (the archive, the manifest's checksums, the suite and
        the options): a bad upload is a 4xx with one line, never a queued job. 429 when the queue is full."""
        started = time.monotonic()
        try:
            job = await _accept(request, query)
        except Refused as exc:
            log.info("upload refused: HTTP %d after %.0f ms", exc.status, 1000 * (time.monotonic() - started))
            raise
        log.info("audit %s queued (%d waiting)", job.id, jobs(request).queued)
        return JSONResponse(status_of(job).model_dump(mode="json"), status_code=202,
                            headers={"Location": f"/v1/audits/{job.id}"})

    async def _accept(request: Request, query: AuditQuery) -> Job:
        kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
        if kind not in GZIP_TYPES:
            raise Refused(415, f"send the recording set as the raw body with `Content-Type: application/gzip` "
                               f"(got `{kind or 'none'}`)")
        declared = request.headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > settings.max_upload_bytes:
            raise _too_large()
        queue = jobs(request)
        with queue.place() as job:
            try:
                size = await asyncio.wait_for(_receive(request, job.dir / UPLOAD), settings.upload_seconds)
            except asyncio.TimeoutError:
                raise Refused(408, f"the body took over {settings.upload_seconds} s to arrive, the limit "
                                   f"({LIMITS['upload_seconds'][0]})") from None
            unpacked = await run_in_threadpool(intake, job, query, settings)
            queue.submit(job)
        log.info("audit %s accepted: %d bytes uploaded, %d entries, %d bytes unpacked", job.id, size,
                 unpacked.entries, unpacked.bytes)
        return job

    def _too_large() -> Refused:
        return Refused(413, f"the body is over {settings.max_upload_bytes:,} bytes, the limit "
                            f"({LIMITS['max_upload_bytes'][0]})")

    async def _receive(request: Request, path: Path) -> int:
        """Stream the body into `path`, counting: refused the moment it passes the limit."""
        size = 0
        with open(path, "wb") as fh:
            async for chunk in request.stream():
                size += len(chunk)
                if size > settings.max_upload_bytes:
                    raise _too_large()
                fh.write(chunk)
        if size == 0:
            raise Refused(400, "the request has no body: send the recording set as a .tar.gz")
        return size

    @app.get("/v1/audits/{audit_id}", tags=["audits"], dependencies=auth, response_model=None,
             responses={200: {"model": FairnessRun, "description": "The audit is done: its results.json (the results "
                                                                  "schema, with `gate.state` and `gate.passed`)."},
                        202: {"model": AuditStatus, "description": "Queued or running: its status."},
                        422: {"model": AuditStatus, "description": "The audit failed: its status, with `error`."},
                        **_errors(401, 404)})
    def get_audit(request: Request, audit_id: str) -> Response:
        """An audit's results.json once done; its status (202) while queued or running, or (422) if it failed."""
        job = jobs(request).get(audit_id)
        if job.status == "done":
            return Response(output(job, "results.json"), media_type="application/json")
        return _status_response(job, 422 if job.status == "failed" else 202)

    @app.get("/v1/audits/{audit_id}/status", tags=["audits"], dependencies=auth, responses=_errors(401, 404))
    def get_status(request: Request, audit_id: str) -> AuditStatus:
        """An audit's status, whatever its state."""
        return status_of(jobs(request).get(audit_id))

    for name, media in FILES.items():
        _file_route(app, name, media, auth, jobs)
    app.openapi = _documented(app)  # type: ignore[method-assign]
    return app


def _documented(app: FastAPI) -> Any:
    """`app.openapi` with each results property described by its field's docstring, as in docs/schema/."""
    from fairness.report._schema import field_docs

    build = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            schema = build()
            _own_422(schema)
            for name, component in schema.get("components", {}).get("schemas", {}).items():
                cls = _MODELS.get(name)
                properties = component.get("properties", {}) if cls is not None else {}
                for field, doc in field_docs(cls).items() if cls is not None else ():
                    if field in properties and "description" not in properties[field]:
                        properties[field]["description"] = doc
            app.openapi_schema = schema
        return app.openapi_schema

    return openapi


def _own_422(schema: dict[str, Any]) -> None:
    """FastAPI documents its own 422 body on every route with parameters; this service answers `ErrorBody`."""
    ours = {"$ref": "#/components/schemas/ErrorBody"}
    for operation in (op for path in schema.get("paths", {}).values() for op in path.values()):
        content = operation.get("responses", {}).get("422", {}).get("content", {}).get("application/json", {})
        if content.get("schema", {}).get("$ref", "").endswith("/HTTPValidationError"):
            content["schema"] = ours
    for name in ("HTTPValidationError", "ValidationError"):
        schema.get("components", {}).get("schemas", {}).pop(name, None)


def _model_classes(root: type[BaseModel]) -> dict[str, type[BaseModel]]:
    """Every model class `root` reaches through its fields' annotations, by name."""
    found: dict[str, type[BaseModel]] = {}
    todo: list[Any] = [root]
    while todo:
        ann = todo.pop()
        if isinstance(ann, type) and issubclass(ann, BaseModel):
            if ann.__name__ not in found:
                found[ann.__name__] = ann
                todo += [f.annotation for f in ann.model_fields.values()]
        else:
            todo += list(typing.get_args(ann))
    return found


_MODELS = _model_classes(FairnessRun)


def _file_route(app: FastAPI, name: str, media: str, auth: list, jobs: Any) -> None:
    def get_file(request: Request, audit_id: str) -> Response:
        job = jobs(request).get(audit_id)
        if job.status != "done":
            raise Refused(409, f"audit `{job.id}` is {job.status}: it has no {name}"
                               + (" (see its status)" if job.status == "failed" else " until it is done"))
        headers = {"X-Content-Type-Options": "nosniff"}
        if name == "card.html":
            headers["Content-Security-Policy"] = CARD_CSP
        return Response(output(job, name), media_type=media, headers=headers)

    get_file.__doc__ = f"The finished audit's {name}."
    app.add_api_route(f"/v1/audits/{{audit_id}}/{name}", get_file, methods=["GET"], tags=["files"], dependencies=auth,
                      name=f"get_{name.replace('.', '_')}", response_class=Response,
                      responses={200: {"content": {media.split(";")[0]: {}}}, **_errors(401, 404, 409)})
