"""``python -m kafkalog ...``: the ``kafkalog`` command."""

import sys

from kafkalog.tools.cli import main

if __name__ == "__main__":
    sys.exit(main())
