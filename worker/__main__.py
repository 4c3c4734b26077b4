"""`python -m detemplate`: the command line, as the `detemplate` command runs it."""

import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())
