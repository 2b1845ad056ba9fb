"""The JVM ``kafkalog`` source's call into kafkalog's planner, on the driver.

``Planner.java`` runs ``python -m kafkalog.tools.spark.jvm_plan --serve`` with the driver's Python (one process kept
for the Spark application's batch reads, one per stream query) and asks it one request per line, ``{"request":
"schema" | "plan", "options": {...}, "hadoop": {...}}`` (the read's options; the session's ``fs.s3a.*`` Hadoop
configuration, which gives the ``s3.*`` options the read does not: :func:`kafkalog.storage.io.fs.s3_options`, so
the planner reaches the server the scan reads), each answered by one JSON object on one line (without
``--serve``: one request on stdin, its answer on stdout):

* ``schema``: ``{"schema": DDL, "refusal": REASON | null, "streamSchemes": [...]}``: the schema of the options
  (the Python source's: :func:`kafkalog.tools.spark.schema.source_ddl`), whether the options alone give the read,
  or a stream, to the Python data source (:func:`kafkalog.tools.spark.jvm.option_refusal`) and the Hadoop
  FileSystem schemes a stream opens (:func:`~kafkalog.tools.spark.jvm.stream_schemes`: without one in the JVM, the
  Python stream reads it);
* ``stream`` (the JVM stream's questions, ``"op"`` and its fields in the request): :mod:`kafkalog.tools.spark.
  jvm_stream`;
* ``plan``: ``{"pieces": ..., "verifyCrc": ..., "includeControlRecords": ..., "scan": {...}}`` (the planned
  pieces, :func:`kafkalog.tools.spark.jvm.encode_pieces`, each with its segment's size, modification time and inode
  as planned, which the scan checks before reading it; ``"scan"``, more options of the scan: what it does with a
  segment replaced since (``failOnDataLoss`` and its words: :func:`~kafkalog.tools.spark.jvm.data_loss_options`)
  and, for pieces under a URL, :func:`~kafkalog.tools.spark.jvm.scan_options`, with ``"hadoopSchemes"``, the Hadoop
  FileSystem schemes it opens),
  or ``{"refusal": REASON}`` (:func:`~kafkalog.tools.spark.jvm.
  option_refusal`, :func:`~kafkalog.tools.spark.jvm.pieces_refusal`);
* ``{"error": "CorruptRecordError: ..."}``: the options or the files are bad; kafkalog's message (file and byte)
  fails the query.

The plan is the one of :mod:`kafkalog.tools.spark.plan`, as the Python data source's.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping

from kafkalog.storage.errors import KafkaLogError
from kafkalog.storage.io.fs import forget_listings, s3_options


def answer(request: str, options: Mapping[str, str], body: Mapping | None = None) -> dict:
    body = body or {}
    from .schema import source_ddl

    if request == "schema":
        from .jvm import option_refusal, stream_schemes

        why = option_refusal(options)
        return {"schema": source_ddl(options), "refusal": why, "streamSchemes": [] if why else stream_schemes(options)}
    if request == "stream":
        from . import jvm_stream

        return jvm_stream.answer(str(body.get("op")), options, body)
    if request == "plan":
        from .jvm import (
            data_loss_options,
            encode_pieces,
            hadoop_schemes,
            option_refusal,
            pieces_refusal,
            scan_options,
        )
        from .options import parse_read_options
        from .plan import plan

        why = option_refusal(options)
        if why is not None:
            return {"refusal": why}
        opts = parse_read_options(options)
        groups = plan(opts)
        why = pieces_refusal(groups)
        if why is not None:
            return {"refusal": why}
        out: dict[str, object] = {"pieces": encode_pieces(groups, opts), "verifyCrc": str(opts.verify_crc).lower(),
                                  "includeControlRecords": str(opts.include_control).lower()}
        schemes = hadoop_schemes(groups)
        out["scan"] = scan_options(groups) | data_loss_options(opts)  # (scan_options: none for local pieces)
        if schemes:
            out["hadoopSchemes"] = schemes
        return out
    return {"error": f"ConfigError: unknown request {request!r} (schema, plan or stream)"}


def respond(req: Mapping) -> dict:
    """The answer to one request (bad options or files are an answer too: ``{"error": ...}``)."""
    options = {str(k): str(v) for k, v in dict(req.get("options") or {}).items()}
    given = {k.lower() for k in options}
    hadoop = {str(k): str(v) for k, v in dict(req.get("hadoop") or {}).items()}
    options |= {k: v for k, v in s3_options(hadoop).items() if k not in given}
    try:
        out = answer(str(req.get("request")), options, req)
    except KafkaLogError as e:
        out = {"error": f"{type(e).__name__}: {e}"}
    except OSError as e:
        out = {"error": f"{type(e).__name__}: {e}"}
    return out


def main() -> int:
    """One request on stdin, its answer on stdout; with ``--serve``, one request per line until stdin is closed,
    each answered on one line (the JVM source keeps one planner for the Spark application, the JVM stream one for
    its query, so the imports are paid once). Each request lists the files as they are then
    (:func:`kafkalog.storage.io.fs.forget_listings`): segments appended or deleted since the last one are planned."""
    if sys.argv[1:] == ["--serve"]:
        for line in sys.stdin:
            if line.strip():
                forget_listings()
                sys.stdout.write(json.dumps(respond(json.loads(line))) + "\n")
                sys.stdout.flush()
        return 0
    json.dump(respond(json.load(sys.stdin)), sys.stdout)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
