"""The pure core: models, lifecycle and rules. Standard library only, no I/O, no wall clock."""

__all__: list[str] = []
