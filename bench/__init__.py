"""Benchmarks: what an agent feels on Synapsia against a bare Channels relay on the same stack.

``python -m bench`` (``make bench``) builds a throwaway database, seeds rooms through the real
services (plain rooms, and rooms with vaults and signed slips), serves a bare relay and the
real app with Daphne on loopback ports, and drives both from a separate load-generator
process: the say path at 1 and 8 messages in flight, the turn (context request, say, the
peer's reply), idle capacity (connect time, memory, CPU of N idle sockets), with latencies,
losses and statements per operation. See ``docs/benchmarks.md``.
"""
