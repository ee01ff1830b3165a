"""``forewarn serve`` keeps the options the README documents."""

from __future__ import annotations

import click

from forewarn.cli import load_command, main


def test_serve_options_are_the_documented_ones() -> None:
    """docs/serve.md, "`forewarn serve` options": --bind, --control, --fleet, --clock, --scale,
    --start, --profile, --timing, --data-dir, --store, --rate-limit, --seed, --impact, --impact-hook,
    --impact-hook-timeout, --control-tls, --tls-cert, --tls-key, --dead-letter-dir,
    --eventgrid-timeout, --workers, --token, --config, --print-config, --log-level, --log-format, with
    their documented
    defaults (no --profile means documented, or what the data directory was created with)."""
    serve = load_command("serve")
    context = click.Context(serve)
    options: dict[str, object] = {}
    for param in serve.params:
        if isinstance(param, click.Option) and param.opts[0] != "--help":
            default = param.get_default(context)
            # click marks "no default" with its own sentinel; the README says "none" too.
            options[param.opts[0]] = default if isinstance(default, str | float) else None
    assert options == {
        "--config": None,
        "--print-config": None,
        "--log-level": "info",
        "--log-format": "text",
        "--bind": "127.0.0.1:16954",
        "--control": "127.0.0.1:16955",
        "--fleet": None,
        "--clock": "system",
        "--scale": 60.0,
        "--start": None,
        "--profile": None,
        "--timing": None,
        "--data-dir": None,
        "--store": None,
        "--rate-limit": 5.0,
        "--seed": None,
        "--impact": None,
        "--impact-hook": None,
        "--impact-hook-timeout": 30.0,
        "--control-tls": None,
        "--tls-cert": None,
        "--tls-key": None,
        "--dead-letter-dir": None,
        "--eventgrid-timeout": 30.0,
        "--workers": "1",
        "--token": None,
    }


def test_start_moves_only_a_clock_that_can_be_moved() -> None:
    """README.md: ``--start`` is where a manual or scaled clock starts; a system clock reads
    the real time, and is refused one before anything listens."""
    from click.testing import CliRunner

    result = CliRunner().invoke(main, ["serve", "--start", "2026-04-20T22:11:57Z"])
    assert result.exit_code == 2
    assert "Invalid value for --start: a system clock reads the real time" in result.stderr
    bad = CliRunner().invoke(main, ["serve", "--clock", "manual", "--start", "yesterday"])
    assert bad.exit_code == 2
    assert "'yesterday' is not an ISO 8601 time" in bad.stderr
