"""The test handler whose one defect is: dies-on-500 (see _loop.py)."""

from _loop import main

main("dies-on-500")
