"""The test handler whose one defect is: no-timeout (see _loop.py)."""

from _loop import main

main("no-timeout")
