"""`kafkalog` command line: a thin shell over kafkalog.storage.

Each command lives in its own module ``kafkalog.tools.<module>`` that defines

* ``HELP``: one line shown in ``kafkalog --help``;
* ``DESCRIPTION``: the longer text shown in ``kafkalog <command> --help`` (optional);
* ``add_arguments(parser)``: its options;
* ``run(args) -> int``: the exit code (0 ok, 1 findings/failure, 2 usage).

Errors derived from :class:`kafkalog.storage.errors.KafkaLogError` become one line on stderr and exit 1.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from kafkalog.storage.errors import KafkaLogError

#: command name -> module (under kafkalog.tools). Commands whose module is absent are not offered.
COMMANDS: dict[str, str] = {
    "dump": "dump",
    "verify": "verify",
    "describe": "describe",
    "append": "append",
    "flush": "flush",
    "repair": "repair",
    "reindex": "reindex",
    "retain": "retain",
    "compact": "compact",
    "convert": "convert",
    "migrate": "migrate",
    "topic-id": "topic_id",
    "checkpoints": "checkpoints",
    "export": "export",
    "import": "import_",
    "diff": "diff",
    "spark": "spark_cli",
    "conformance": "conformance",
}

EXIT_OK, EXIT_FINDINGS, EXIT_USAGE = 0, 1, 2


def _load(name: str):
    try:
        return importlib.import_module(f"kafkalog.tools.{COMMANDS[name]}")
    except ModuleNotFoundError as e:
        if e.name == f"kafkalog.tools.{COMMANDS[name]}":
            return None
        raise


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kafkalog",
        description="Work on Apache Kafka broker log directories offline: dump, verify, repair, compact, "
        "apply retention, convert, migrate. Exit codes: 0 ok, 1 findings or failure, 2 usage error.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS:
        mod = _load(name)
        if mod is None:
            continue
        p = sub.add_parser(
            name,
            help=mod.HELP,
            description=getattr(mod, "DESCRIPTION", mod.HELP),
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        mod.add_arguments(p)
        p.set_defaults(_run=mod.run)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "_run", None):
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    try:
        return int(args._run(args) or 0)
    except KafkaLogError as e:
        print(f"kafkalog {args.command}: error: {e}", file=sys.stderr)
        return EXIT_FINDINGS
    except BrokenPipeError:
        return EXIT_OK
    except KeyboardInterrupt:
        print("kafkalog: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
