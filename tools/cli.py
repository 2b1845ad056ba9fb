"""`kafkalog` command line: a thin shell over kafkalog.storage.

Each command lives in its own module ``kafkalog.tools.<module>`` that defines

* its one-line help is in :data:`COMMANDS` below;
* ``DESCRIPTION``: the longer text shown in ``kafkalog <command> --help`` (optional);
* ``add_arguments(parser)``: its options;
* ``run(args) -> int``: the exit code (0 ok, 1 findings/failure, 2 usage).

Errors derived from :class:`kafkalog.storage.errors.KafkaLogError` and operating-system errors (permission
denied, disk full...) become one line on stderr and exit 1. Anything else is a kafkalog bug: one line naming
it, exit 3 (``KAFKALOG_DEBUG=1`` shows the traceback).
"""

from __future__ import annotations

import argparse
import codecs
import importlib
import io
import os
import sys
from typing import cast

from kafkalog.storage.errors import KafkaLogError, missing_dependency
from kafkalog.storage.io.fs import local_path

#: command name -> (module under kafkalog.tools, one-line help). Only the chosen command's module is imported,
#: so ``kafkalog <command>`` starts fast; ``kafkalog --help`` lists the commands from this table.
COMMANDS: dict[str, tuple[str, str]] = {
    "dump": ("dump", "print the batches and records of .log files and every other data dir file (like kafka-dump-log.sh)"),
    "verify": ("verify", "check data dirs, partitions and files for corruption and inconsistencies (CRCs, indexes, checkpoints)"),
    "describe": ("describe", "per partition: size, segments, log start/end offsets, recovery point, epochs, topic id, formats"),
    "append": ("append", "append records (JSON Lines, as `dump --json --deep` prints) to a partition as the broker does"),
    "flush": ("flush", "fsync a data dir and write its checkpoints so a broker starts without recovery"),
    "repair": ("repair", "recover data dirs as the broker's startup would (truncate torn/corrupt tails, rebuild indexes...)"),
    "doctor": ("doctor", "predict the broker's next start: will it start, what it recovers and truncates, how long"),
    "reindex": ("reindex", "rebuild the indexes of partition dirs from their .log files (Kafka's recovery rule)"),
    "retain": ("retain", "delete segments exactly as the broker's retention would (retention.ms, retention.bytes, log start)"),
    "compact": ("compact", "compact partitions exactly as the broker's log cleaner would (one cleaning round each)"),
    "convert": ("convert", "rewrite v0/v1 segments as v2 (Kafka 4.0 cleaner rules) and/or recompress; --audit lists legacy segments"),
    "migrate": ("migrate", "copy partitions into another data dir (new topic name/id, checkpoints merged, crash-safe)"),
    "topic-id": ("topic_id", "show or set partitions' topic ids (partition.metadata)"),
    "checkpoints": ("checkpoints", "list or set recovery-point / log-start / replication / cleaner checkpoints"),
    "export": ("export", "export records (all fields) of data dirs/partitions as JSON Lines or Parquet"),
    "sql": ("sql", "run SQL (DuckDB, in process) over the records of data dirs, with predicates pushed into the reader"),
    "import": ("import_", "import records exported by `kafkalog export` (JSON Lines or Parquet) into a data dir, offsets kept"),
    "groups": ("groups", "consumer groups, committed offsets and lag from __consumer_offsets (like kafka-consumer-groups --describe)"),
    "transactions": ("transactions", "open and hanging transactions per partition, with the kafka-transactions.sh abort commands"),
    "diff": ("diff", "compare two data dirs, partitions or segments (files, batches or records)"),
    "remote": ("remote", "tiered storage: list, verify or dump the remote segments of a LocalTieredStorage store (KIP-405)"),
    "rehydrate": ("rehydrate", "rebuild local partitions from a tiered-storage remote store so a broker serves them"),
    "spark": ("spark_cli", "run verify / export / convert / compact on Spark, distributed per partition (local[*] by default)"),
    "conformance": ("conformance", "run the differential scenarios against a real Apache Kafka broker and print pass/fail"),
    "completion": ("completion", "print a shell completion script (bash, zsh or fish)"),
}

EXIT_OK, EXIT_FINDINGS, EXIT_USAGE, EXIT_BUG = 0, 1, 2, 3


def _load(name: str):
    module = f"kafkalog.tools.{COMMANDS[name][0]}"
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as e:
        if e.name == module:
            return None
        raise


def _version() -> str:
    from kafkalog import __version__ as v
    from kafkalog.storage.codec import compression, native

    inflate = "ISA-L" if compression._inflate.__name__ != "zlib" else "zlib"
    core = f"on, {native.describe()}" if native.core is not None else f"off, pure Python: {native.describe()}"
    if native.core is not None:  # compressing as Kafka's libraries do (byte-identical batches)
        lz4, zstd, snappy = native.core.codec_versions()
        codecs = f"gzip (inflate: {inflate}), snappy {snappy}, lz4 {lz4}, zstd {zstd}: Kafka's bytes"
    else:
        codecs = f"gzip (inflate: {inflate}), snappy, lz4, zstd"
    return f"{v} (Python {sys.version.split()[0]}; codecs: {codecs}; native record core: {core})"


class _Parser(argparse.ArgumentParser):
    """The top-level parser, which keeps each command's own parser (``commands``), for its usage."""

    commands: dict[str, argparse.ArgumentParser]


def build_parser(only: str | None = None) -> _Parser:
    """The parser; with ``only`` set, only that command's module is imported (the others are listed)."""
    parser = _Parser(
        prog="kafkalog",
        description="Work on Apache Kafka broker log directories offline: dump, verify, repair, compact, "
        "apply retention, convert, migrate. Exit codes: 0 ok, 1 findings or failure (including a missing "
        "optional package: the message says what to install), 2 usage error, 3 internal error (a kafkalog bug; "
        "KAFKALOG_DEBUG=1 shows the traceback), 4 `doctor`: the broker will not start. "
        "Run `kafkalog COMMAND --help` for a command's options.",
    )
    commands: dict[str, argparse.ArgumentParser] = {}
    parser.commands = commands
    parser.add_argument("--version", action="store_true",
                        help="print kafkalog's version (and its Python, codecs, native core) and exit")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (_module, help_text) in COMMANDS.items():
        if only is not None and name != only:
            sub.add_parser(name, help=help_text, add_help=False)
            continue
        mod = _load(name)
        if mod is None:
            continue
        p = sub.add_parser(
            name,
            help=help_text,
            description=getattr(mod, "DESCRIPTION", help_text),
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        mod.add_arguments(p)
        p.set_defaults(_run=mod.run)
        commands[name] = p
    return parser


def _error_words(e: KafkaLogError) -> str:
    """An error's one line: its message; a refused plan's (``PlanError.errors``, codes and facts) worded by
    ``kafkalog.facts`` (``kafkalog.tools.plan_output.invalid_plan``)."""
    if not getattr(e, "errors", None):
        return str(e)
    # imported on this path only: the CLI starts without the engines
    from kafkalog.storage.engine.plan import PlanError
    from kafkalog.tools.plan_output import invalid_plan

    return invalid_plan(e) if isinstance(e, PlanError) else str(e)


def _tolerant_output() -> None:
    """A strict stdout/stderr (Python's under a UTF-8 locale, or PYTHONIOENCODING) prints a file name that is not
    UTF-8 (a lone surrogate) as its bytes on a UTF-8 stream, as the C locale's ``surrogateescape`` does, and escaped
    on another encoding, instead of failing mid-output."""
    for stream in (sys.stdout, sys.stderr):
        if isinstance(stream, io.TextIOWrapper) and stream.errors == "strict":
            utf8 = codecs.lookup(stream.encoding).name == "utf-8"
            stream.reconfigure(errors="surrogateescape" if utf8 else "backslashreplace")


def main(argv: list[str] | None = None) -> int:
    _tolerant_output()
    # a file:// URL is the local path it names, for every command and option that takes a path
    argv = [cast(str, local_path(a)) for a in (sys.argv[1:] if argv is None else argv)]
    chosen = next((a for a in argv if not a.startswith("-")), None)
    parser = build_parser(chosen if chosen in COMMANDS else None)
    args, unknown = parser.parse_known_args(argv)
    if unknown:  # the command's usage, not the top level's (argparse hands a sub-command's leftovers up)
        owner = parser.commands.get(getattr(args, "command", None) or "", parser)
        owner.error(f"unrecognized arguments: {' '.join(unknown)}")
    if getattr(args, "version", False) and not getattr(args, "_run", None):
        print(f"kafkalog {_version()}")
        return EXIT_OK
    if not getattr(args, "_run", None):
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    try:
        return int(args._run(args) or 0)
    except KafkaLogError as e:
        print(f"kafkalog {args.command}: error: {_error_words(e)}", file=sys.stderr)
        return EXIT_FINDINGS
    except BrokenPipeError:
        return EXIT_OK
    except ImportError as e:  # an optional package missing where no require() said so: still not a bug
        missing = missing_dependency(e)
        if missing is None:
            if os.environ.get("KAFKALOG_DEBUG"):
                raise
            print(f"kafkalog {args.command}: internal error (a kafkalog bug, please report it with "
                  f"KAFKALOG_DEBUG=1 output): {type(e).__name__}: {e}", file=sys.stderr)
            return EXIT_BUG
        print(f"kafkalog {args.command}: error: {missing}", file=sys.stderr)
        return EXIT_FINDINGS
    except KeyboardInterrupt:
        print("kafkalog: interrupted", file=sys.stderr)
        return 130
    except OSError as e:
        where = f"{e.filename}: " if e.filename else ""
        print(f"kafkalog {args.command}: error: {where}{e.strerror or e}", file=sys.stderr)
        return EXIT_FINDINGS
    except MemoryError:
        print(f"kafkalog {args.command}: error: out of memory", file=sys.stderr)
        return EXIT_FINDINGS
    except Exception as e:  # a bug: say so in one line, keep the traceback for whoever debugs it
        if os.environ.get("KAFKALOG_DEBUG"):
            raise
        print(f"kafkalog {args.command}: internal error (a kafkalog bug, please report it with "
              f"KAFKALOG_DEBUG=1 output): {type(e).__name__}: {e}", file=sys.stderr)
        return EXIT_BUG


if __name__ == "__main__":
    sys.exit(main())
