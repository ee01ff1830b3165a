"""Pure mapping between domain objects and the documented JSON of each api-version.

Nothing is imported from the package itself: each module maps one part of the wire.
"""

__all__: list[str] = []
