"""Usage errors that say what to do, where click's own words say only what failed.

``forewarn serve --port 8080`` was answered "Did you mean one of: '--start', '--store'?",
the closest spellings, where the port is part of ``--bind HOST:PORT``; and a bad value from
an environment variable (``FOREWARN_SERVE_PROFILE=slow``) was reported as if ``--profile``
had been typed, naming no variable. The top-level group passes every usage error of every
command through :func:`explained` (:class:`forewarn.cli._LazyGroup`), so each command gets
these without a class of its own.
"""

from __future__ import annotations

import os

import click
from click.core import ParameterSource

__all__ = ["ADDRESS_GUESSES", "explained"]

#: Options people try for an address that forewarn takes as one ``HOST:PORT`` value.
ADDRESS_GUESSES = ("--port", "-p", "--host", "--listen", "--address", "--addr")


def explained(error: click.UsageError) -> click.UsageError:
    """``error``, or one in its place that says what to do instead."""
    if isinstance(error, click.NoSuchOption):
        return _address_option(error) or error
    if isinstance(error, click.BadParameter):
        _name_the_variable(error)
    return error


def _address_option(error: click.NoSuchOption) -> click.NoSuchOption | None:
    """``--port`` and its kin, on a command that takes an address as ``--bind HOST:PORT``
    (a server) or ``--control HOST:PORT`` (a client of the control API)."""
    context = error.ctx
    if context is None or error.option_name not in ADDRESS_GUESSES:
        return None
    names = {param.name for param in context.command.params}
    option = "--bind" if "bind" in names else "--control" if "control" in names else None
    if option is None:
        return None
    return click.NoSuchOption(
        error.option_name,
        f"No such option {error.option_name!r}: the port goes with the host, as "
        f"{option} HOST:PORT (e.g. {option} 127.0.0.1:8080)",
        ctx=context,
    )


def _name_the_variable(error: click.BadParameter) -> None:
    """When the refused value came from the environment, say which variable holds it."""
    param, context = error.param, error.ctx
    if (
        error.param_hint is not None
        or context is None
        or not isinstance(param, click.Option)
        or param.name is None
        or context.get_parameter_source(param.name) is not ParameterSource.ENVIRONMENT
    ):
        return
    names = [param.envvar] if isinstance(param.envvar, str) else list(param.envvar or ())
    if not names and context.auto_envvar_prefix:
        names = [f"{context.auto_envvar_prefix}_{param.name.upper()}"]
    variable = next((name for name in names if name in os.environ), None)
    if variable is not None:
        error.param_hint = f"{param.get_error_hint(context)} (from {variable})"
