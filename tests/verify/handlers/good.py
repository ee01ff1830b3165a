"""The test handler with no defect (see _loop.py)."""

from _loop import main

main(None)
