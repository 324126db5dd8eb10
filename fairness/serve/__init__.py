"""`llm-fairness-check serve`: the audit as a REST service (FastAPI on uvicorn).

A client uploads a recording set as a gzip'd tar (`POST /v1/audits`), polls the job and reads
the same results.json and card files `run` writes. Each upload is unpacked by `_archive` (sizes,
entry count and paths checked, no links), verified and resolved before it is queued (`_jobs`: a
bounded queue, worker threads calling `fairness.pipeline.run_audit`, bounded retention). The
settings come from the environment (`_settings`), the bearer token too (`_auth`). fastapi and
uvicorn are imported only here, never by the replay path.
"""

SERVE_EXTRA = "pip install 'llm-fairness-check[serve]'"
"""What to install for `serve` (the `serve` extra: fastapi and uvicorn)."""
