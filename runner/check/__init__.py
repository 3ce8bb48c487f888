"""The Checker and its parts: requests, environment keys, cache, pools, scheduling."""
