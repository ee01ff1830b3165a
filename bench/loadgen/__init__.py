"""The compiled load generator: ``poller.c``, built at bench run time, and its Python side.

A Python generator spends more CPU per poll than the server it measures; this one is C, one
thread on epoll, and is compiled with ``gcc -O2`` into a cache folder the first time it is
needed (the binary is never committed).
"""
