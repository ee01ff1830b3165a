"""Configuration files: the fleet description, validated before anything starts.

Nothing is imported from the package itself: :mod:`forewarn.config.fleet` is the entry point.
"""

__all__: list[str] = []
