"""The README's main job: verify and describe every bundled real-Kafka fixture data dir.

``python -m kafkalog.tools.quickstart [DIR...]`` (default: every data dir under ./fixtures) runs
``kafkalog verify`` and ``kafkalog describe`` on them, as a new user would, and exits non-zero if any
data dir has an error.
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

from kafkalog.tools.cli import main as cli_main


def fixture_data_dirs(root: Path) -> list[Path]:
    """Data dirs under ``root``: directories that hold a meta.properties or partition dirs with .log files."""
    found: list[Path] = []
    for meta in sorted(root.rglob("meta.properties")):
        found.append(meta.parent)
    if not found:
        for log in sorted(root.rglob("*.log")):
            dd = log.parent.parent
            if dd not in found:
                found.append(dd)
    return found


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    dirs = [Path(a) for a in args] or fixture_data_dirs(Path("fixtures"))
    if not dirs:
        print("kafkalog quickstart: no data dirs found under ./fixtures (run from the repository root)",
              file=sys.stderr)
        return 2
    names = [str(d) for d in dirs]
    # each fixture is a different broker: not one broker's JBOD log.dirs, hence --independent
    verify, describe = ["verify", "--independent", *names], ["describe", *names]
    print(f"== kafkalog {shlex.join(verify)}", flush=True)  # exactly what runs, ready to paste
    rc_verify = cli_main(verify)
    print(f"\n== kafkalog {shlex.join(describe)}", flush=True)
    rc_describe = cli_main(describe)
    return max(rc_verify, rc_describe)


if __name__ == "__main__":
    sys.exit(main())
