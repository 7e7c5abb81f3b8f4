"""`python -m hil.devicefarm` is `devicefarm-cli`."""

import sys

from hil.devicefarm.cli import main

if __name__ == "__main__":
    sys.exit(main())
