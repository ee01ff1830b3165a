"""Configuration files: the fleet description, validated before anything starts."""
