"""The test handler whose one defect is: approves-others (see _loop.py)."""

from _loop import main

main("approves-others")
