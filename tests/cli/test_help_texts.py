"""What ``--help`` lists is whole sentences (README "Driving the platform": the CLI's verbs).

Seen by a newcomer: ``forewarn clock --help`` listed ``advance  Move a manual clock forward,
e.g.``: click cuts a command's one-line help at its first full stop, and "e.g." is one.
"""

from __future__ import annotations

from collections.abc import Iterator

import click
import pytest
from click.testing import CliRunner

from forewarn.cli import COMMANDS as CLI_COMMANDS
from forewarn.cli import main


def _commands(command: click.Command, path: str) -> Iterator[tuple[str, click.Command]]:
    """Every command under ``command``, asked as ``--help`` asks (the top level loads its
    commands only when listed)."""
    if isinstance(command, click.Group):
        context = click.Context(command)
        for name in command.list_commands(context):
            sub = command.get_command(context, name)
            assert sub is not None, f"{path} {name}"
            yield from _commands(sub, f"{path} {name}")
    yield path, command


COMMANDS = dict(_commands(main, "forewarn"))


def test_every_command_is_checked() -> None:
    """Each top-level command, and the verbs under it, are among those checked below."""
    top = {path.split()[1] for path in COMMANDS if path != "forewarn"}
    assert top == set(CLI_COMMANDS)
    assert len(COMMANDS) > 2 * len(CLI_COMMANDS)  # the groups' verbs too


@pytest.mark.parametrize("path", sorted(COMMANDS))
def test_the_listed_help_is_cut_only_at_the_end_of_a_sentence(path: str) -> None:
    command = COMMANDS[path]
    listed = command.get_short_help_str(limit=10_000)
    first = " ".join((command.help or "").split("\n\n")[0].split())
    assert first.startswith(listed.removesuffix("...")), (listed, first)
    rest = first[len(listed) :]
    # Whatever follows the listed part starts a new sentence.
    assert not rest or (rest.startswith(" ") and rest[1:2].isupper()), (path, listed, rest)


def test_clock_help_lists_advance_whole() -> None:
    output = CliRunner().invoke(main, ["clock", "--help"], terminal_width=200).output
    (line,) = [line for line in output.splitlines() if line.strip().startswith("advance")]
    assert (
        line.split(None, 1)[1]
        == "Move a manual clock forward by DURATION (90, 90s, 15m, 1h30m, 7d)."
    )
