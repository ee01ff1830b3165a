"""What ``--help`` lists is whole sentences (docs/platform.md: the CLI's verbs).

Seen by a newcomer: ``forewarn clock --help`` listed ``advance  Move a manual clock forward,
e.g.``: click cuts a command's one-line help at its first full stop, and "e.g." is one.
"""

from __future__ import annotations

import shlex
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


# -- what every --help says (a newcomer found examples only under `fault set`) ----------------

OPTIONS = [
    (path, param)
    for path, command in sorted(COMMANDS.items())
    for param in command.params
    if isinstance(param, click.Option) and not param.hidden
]
#: The options that take an address, each written HOST:PORT.
ADDRESS_OPTIONS = ("bind", "control", "control_tls", "metrics_address")
#: The commands a newcomer reaches for first: each shows examples.
WITH_EXAMPLES = (
    "forewarn serve",
    "forewarn events create",
    "forewarn vm restart",
    "forewarn scenario run",
    "forewarn record",
    "forewarn eventgrid subscribe",
    "forewarn verify",
)


def test_every_option_says_what_it_is_for() -> None:
    bare = [f"{path} {'/'.join(param.opts)}" for path, param in OPTIONS if not param.help]
    assert bare == []


def test_every_option_with_a_default_shows_it() -> None:
    """An option that takes a value and has one when not given says which, in click's
    ``[default: ...]`` or its help's own words (``--log-level``: "default: info")."""
    silent = []
    for path, param in OPTIONS:
        if param.is_flag or param.count or param.multiple or not _has_default(param):
            continue
        record = param.get_help_record(click.Context(COMMANDS[path], info_name=path))
        assert record is not None, path
        if "default" not in record[1]:
            silent.append(f"{path} {'/'.join(param.opts)} (default {param.default!r})")
    assert silent == []


def _has_default(param: click.Option) -> bool:
    default = param.default
    return default is not None and default != "" and "UNSET" not in repr(default)


def test_choices_are_listed_in_one_case() -> None:
    """Lower case throughout, Azure's own names (``Reboot``, ``Platform``) included; those
    are taken in any case (test_events_create_list_show_cancel sends ``User``)."""
    choices = {
        f"{path} {'/'.join(param.opts)}": list(param.type.choices)
        for path, param in OPTIONS
        if isinstance(param.type, click.Choice)
    }
    assert len(choices) > 10
    mixed = {key: values for key, values in choices.items() if values != _lower(values)}
    assert mixed == {}


def _lower(values: list[object]) -> list[str]:
    return [str(value).lower() for value in values]


def test_addresses_are_written_host_port_and_urls_url() -> None:
    addresses = {
        f"{path} {'/'.join(param.opts)}": param.metavar
        for path, param in OPTIONS
        if param.name in ADDRESS_OPTIONS
    }
    seen = {"forewarn serve --bind", "forewarn replay --control", "forewarn vm list --control"}
    assert seen <= set(addresses)
    other = {key: metavar for key, metavar in addresses.items() if "HOST:PORT" not in str(metavar)}
    assert other == {}
    endpoints = [
        param
        for path, param in OPTIONS
        if param.name == "endpoint" and path.startswith("forewarn events")
    ]
    assert endpoints
    assert all("HOST:PORT" in (p.metavar or "") for p in endpoints)
    # Every other endpoint or store is a URL, and says so.
    urls = {
        f"{path} {'/'.join(param.opts)}": param.metavar
        for path, param in OPTIONS
        if param.name in ("endpoint", "store") and not path.startswith("forewarn events")
    }
    assert {"forewarn eventgrid subscribe --endpoint", "forewarn serve --store"} <= set(urls)
    assert {key: metavar for key, metavar in urls.items() if metavar != "URL"} == {}


def test_every_control_option_says_how_the_token_is_found() -> None:
    controls = [(path, param.help or "") for path, param in OPTIONS if param.name == "control"]
    assert len(controls) > 30
    silent = [path for path, text in controls if "FOREWARN_TOKEN" not in text or "file" not in text]
    assert silent == []


def test_the_two_approvals_say_which_is_which() -> None:
    as_the_vm = COMMANDS["forewarn events approve"].help or ""
    for_the_vm = COMMANDS["forewarn vm approve"].help or ""
    assert "as the VM itself" in as_the_vm
    assert "VM-facing endpoint" in as_the_vm
    assert "`vm approve`" in as_the_vm
    assert "through the control API" in for_the_vm
    assert "`events" in for_the_vm


def _examples(command: click.Command) -> list[str]:
    epilog = command.epilog or ""
    assert epilog.startswith("Examples:"), epilog
    return [line.strip() for line in epilog.splitlines()[1:] if line.strip() not in ("", "\b")]


def test_the_commands_met_first_show_examples() -> None:
    for path in WITH_EXAMPLES:
        assert len(_examples(COMMANDS[path])) >= 2, path
    shown = CliRunner().invoke(main, ["vm", "restart", "--help"], terminal_width=100).output
    assert "Examples:\n\n    forewarn vm restart --name vm0" in shown  # kept as written


@pytest.mark.parametrize("path", sorted(p for p, c in COMMANDS.items() if c.epilog))
def test_every_example_is_a_command_line_its_command_accepts(path: str) -> None:
    """Each example is parsed as a shell would split it, and its arguments by the command's
    own parser (options, types, required ones), without running it."""
    command = COMMANDS[path]
    for line in _examples(command):
        words = shlex.split(line, comments=True)
        assert words[: len(path.split())] == path.split(), line
        arguments = words[len(path.split()) :]
        with command.make_context(path, arguments) as context:
            assert context.params, line
