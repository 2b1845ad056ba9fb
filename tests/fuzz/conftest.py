"""Fuzz targets for every parser of the record layer (see fuzz_targets.py)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))  # fuzz_targets
