"""Benchmarks of the VM-facing endpoint, measured side by side with nginx in one run.

Every VM polls its endpoint about once a second
(learn.microsoft.com/azure/virtual-machines/linux/scheduled-events, "Polling frequency": "we
recommend that you poll the service once per second"), and many clients open a new connection for
each poll, so the endpoint's speed decides how many VMs one process can serve. Absolute figures
depend on the machine; only ratios measured in the same run count, which is why nginx serving the
same bytes is started beside forewarn every time.

``python -m bench`` runs everything (a few minutes); ``python -m bench --smoke`` runs a
seconds-long version that CI uses so the suite never rots.
"""
