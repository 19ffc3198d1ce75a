"""Benchmarks: the full Synapsia say path against a bare Channels relay on the same stack.

``python -m bench`` (``make bench``) builds a throwaway database, seeds rooms through the real
services, serves a bare relay and the real app with Daphne on loopback ports, drives both from
a separate load-generator process, and prints throughput, latency, losses and database queries
per message. See ``docs/benchmarks.md``.
"""
