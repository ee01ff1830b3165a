"""Unit tests of the VM-facing endpoint; a package so its conftest has a name of its own."""
