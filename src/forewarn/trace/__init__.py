"""Traces: what a VM was shown, recorded (``forewarn record``), served back (``forewarn
replay``) and turned into scenarios (``forewarn scenario from-trace``).

:mod:`forewarn.trace.format` is the file format, :mod:`forewarn.trace.recorder` the
recorder a VM runs (both light: no server is loaded on a VM), and
:mod:`forewarn.trace.to_scenario` the conversion; the replay server is
:mod:`forewarn.server.trace_replay`.
"""

from __future__ import annotations
