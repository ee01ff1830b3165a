"""Ctrl-C as a terminal delivers it, whatever started the suite.

A shell without job control starts a background command (``.ci/run &``, ``( pytest ... & )``)
with SIGINT and SIGQUIT ignored (POSIX, Shell Command Language, "Asynchronous Lists"), and an
ignored signal stays ignored across ``exec``: every process a test starts would then ignore
Ctrl-C. Tests that press Ctrl-C on ``forewarn record`` or ``forewarn verify`` mean a terminal's
Ctrl-C, so the suite gives its processes the dispositions an interactive shell gives a
foreground command. Only a test process that ran an in-process server restored them before
(asyncio puts back Python's default handler when it removes its own), which made those tests
pass or hang by which worker they landed on.
"""

from __future__ import annotations

import signal


def ctrl_c_as_in_a_terminal() -> None:
    """SIGINT raises ``KeyboardInterrupt`` and SIGQUIT has its default action, in this process
    and every process it starts from now on."""
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    if signal.getsignal(signal.SIGQUIT) is signal.SIG_IGN:
        signal.signal(signal.SIGQUIT, signal.SIG_DFL)


__all__ = ["ctrl_c_as_in_a_terminal"]
