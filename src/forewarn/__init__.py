"""forewarn: the Azure Instance Metadata Service Scheduled Events system, runnable anywhere."""

from __future__ import annotations

__all__ = ["__version__"]

__version__ = "0.1.0"
