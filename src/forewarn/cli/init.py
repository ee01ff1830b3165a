"""``forewarn init``: the example fleet, agent configuration and hooks, for a new project.

The help texts point at ``examples/``, which only a source checkout has; these are the same
files (``examples/`` links to them), shipped inside the package.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

import click

__all__ = ["init"]


def _files() -> list[tuple[str, bytes, bool]]:
    """(relative path, content, executable) for every starter file."""
    root = resources.files("forewarn").joinpath("starter")
    found: list[tuple[str, bytes, bool]] = []
    for name in ("fleet.yaml", "agent.yaml", "agent-local.yaml"):
        found.append((name, root.joinpath(name).read_bytes(), False))
    for hook in sorted(root.joinpath("hooks").iterdir(), key=lambda item: item.name):
        if hook.name.endswith(".sh"):
            found.append((f"hooks/{hook.name}", hook.read_bytes(), True))
    return found


@click.command()
@click.argument("directory", type=click.Path(file_okay=False, path_type=Path), default=".")
@click.option("--force", is_flag=True, help="Overwrite files that exist already.")
def init(directory: Path, force: bool) -> None:
    """Write an example fleet (fleet.yaml), agent configurations (agent-local.yaml to try
    beside forewarn serve, agent.yaml for a real VM) and hooks (hooks/*.sh) into DIRECTORY."""
    files = _files()
    existing = [name for name, _, _ in files if (directory / name).exists()]
    if existing and not force:
        raise click.ClickException(
            f"{', '.join(existing)} exist already in {directory}: pass --force to overwrite"
        )
    for name, content, executable in files:
        path = directory / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content)
        if executable:
            path.chmod(0o755)
        click.echo(f"wrote {path}")
    click.echo(
        f"next: forewarn serve --fleet {directory / 'fleet.yaml'}, then beside it: "
        f"forewarn agent --config {directory / 'agent-local.yaml'}; "
        f"on a real VM: forewarn agent --config {directory / 'agent.yaml'}"
    )
