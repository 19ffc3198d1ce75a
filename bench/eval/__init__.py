"""``make eval``: the reference negotiators in generated scenarios with exhaustive ground
truth (``bench.eval.run``)."""
