"""`make bench`: every benchmark, one after the other, at the scales the README quotes (each prints its own
ratios against its peer). ``--scale F`` multiplies them; ``--only NAME`` runs one (e.g. ``--only compact``)."""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
SCALES = {"records": 0.25, "arrow": 0.25, "verify": 0.25, "repair": 0.25, "compact": 0.05, "migration": 0.1, "spark": 0.25,
          "scale": 0.1}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--scale", type=float, default=1.0, help="multiplies every benchmark's default scale")
    ap.add_argument("--only", choices=sorted(SCALES), action="append", help="run only these")
    args = ap.parse_args()
    failed = []
    for name, scale in SCALES.items():
        if args.only and name not in args.only:
            continue
        print(f"\n===== bench_{name}.py --scale {scale * args.scale:g}", flush=True)
        rc = subprocess.call([sys.executable, str(HERE / f"bench_{name}.py"), "--scale", f"{scale * args.scale:g}"])
        if rc:
            failed.append(name)
    if failed:
        print(f"\nfailed: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
