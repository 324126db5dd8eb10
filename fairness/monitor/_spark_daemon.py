"""The Spark engine's Python daemon: PySpark's own, with the scoring code imported once before it forks.

Spark starts one daemon per session (`spark.python.daemon.module`) and forks a Python worker from
it for each task. PySpark's daemon forks bare and each worker then imports pyarrow, pandas, numpy
and the rubric itself (~75 MB of private heap per worker, measured). Imported here first, those
pages are the daemon's and every forked worker shares them copy-on-write: the process tree's
proportional memory (PSS) counts them once. `gc.freeze()` keeps the collector from writing to
the imported objects, which would copy their pages into each worker.

PySpark imports the worker module after the fork because a thread started before a fork does not
exist in the child. Nothing imported here starts one: the session gives the daemon
OPENBLAS_NUM_THREADS=1 and no jemalloc background thread (`_spark.CONF`; numpy is already imported
with the `fairness` package, so setting them here would be too late), and pyarrow's pools start on
first use, in each worker.
"""

from __future__ import annotations

import gc


def preload() -> None:
    """Import what every worker of a monitor scan imports, then freeze those objects out of the collector."""
    try:
        import numpy  # noqa: F401
        import pandas  # noqa: F401  (PySpark's Arrow UDF path imports it in every worker)
        import pyarrow
        import pyarrow.compute  # noqa: F401
        import pyspark.worker  # noqa: F401

        import fairness.monitor._engine  # noqa: F401
        from fairness.score._compiled import paper_rubric

        paper_rubric()
    except ImportError:  # a worker that needs the module says so itself, in the task's error
        pass
    gc.collect()
    gc.freeze()


if __name__ == "__main__":
    preload()
    from pyspark.daemon import manager

    manager()
