"""A pytest session that runs a plan: collection, protocol, preps, stages, metrics."""
