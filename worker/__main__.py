"""`python -m detemplate`: the command line, as the `detemplate` command runs it."""

from .cli import entry

if __name__ == "__main__":
    entry()
