"""Adapters that speak HTTP: the VM-facing endpoint and the control API."""
