"""What a run leaves: the hash-chained log, published bundles, their audit and their sources."""
