"""What a run leaves: the hash-chained checkpoint log, published bundles, their audit, and where bundles are read from."""
