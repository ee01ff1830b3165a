"""Pure mapping between domain objects and the documented JSON of each api-version."""
