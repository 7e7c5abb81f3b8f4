"""`python -m hil` is the `hil` command."""

import sys

from hil.cli import main

if __name__ == "__main__":  # not when a spawned worker re-imports it
    sys.exit(main())
