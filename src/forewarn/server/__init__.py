"""Adapters that speak HTTP: the VM-facing endpoint and the control API.

Nothing is imported from the package itself: each module is its own entry point
(:mod:`~forewarn.server.imds`, :mod:`~forewarn.server.control`, :mod:`~forewarn.server.runner`...);
the ``_``-prefixed ones are its internals.
"""

__all__: list[str] = []
