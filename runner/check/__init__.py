"""Checking: requests resolved, environment keys, the result cache, warm server pools, scheduling and batching, the Checker."""
