"""Driving many checks: resumable runs, replays, progress, the daemon, executors."""
