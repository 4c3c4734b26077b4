"""The command line builds the parser of the one command it is given, and of all for the rest."""

from __future__ import annotations

import subprocess
import sys

import pytest
from detemplate import cli


def _choices(parser: object) -> list[str]:
    sub = next(a for a in parser._actions if a.dest == "command")  # type: ignore[attr-defined]  # argparse's own
    return list(sub.choices)


def test_the_full_parser_has_every_command_in_the_listed_order() -> None:
    assert _choices(cli.build_parser()) == list(cli.COMMANDS)


@pytest.mark.parametrize("command", list(cli.COMMANDS))
def test_one_commands_parser_holds_it_and_only_what_its_module_registers_with_it(command: str) -> None:
    choices = _choices(cli.build_parser(command))
    assert command in choices
    assert all(cli.COMMANDS[c] == cli.COMMANDS[command] for c in choices)


@pytest.mark.parametrize(
    ("argv", "command"),
    [
        (["run", "in.jsonl", "-o", "out.jsonl"], "run"),
        (["-v", "worker"], "worker"),
        (["--verbose", "bench-stream", "--help"], "bench-stream"),
        (["run", "--help"], "run"),
        ([], None),
        (["-h"], None),
        (["--version"], None),
        (["-h", "run"], None),
        (["rn", "x"], None),
        (["-v"], None),
    ],
)
def test_the_command_is_the_first_argument_that_is_no_option(argv: list[str], command: str | None) -> None:
    assert cli.command_of(argv) == command


def test_a_command_imports_only_its_own_module() -> None:
    # A fresh interpreter: this one has imported the tools already.
    code = (
        "import sys\n"
        "from detemplate import cli\n"
        "cli.build_parser(cli.command_of(['run', '--help']))\n"
        "print(sorted(m for m in sys.modules if m.startswith(('detemplate.tools', 'detemplate.stream'))))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout
    assert out.strip() == "[]"


def test_an_unknown_command_is_told_with_every_command_listed(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        cli.main(["rn"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "invalid choice: 'rn'" in err
    assert all(f"'{c}'" in err for c in cli.COMMANDS)
