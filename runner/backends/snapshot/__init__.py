"""Snapshots of booted servers: a server whose boot costs minutes (HOL Light's worker) is dumped
once, right after its boot and before it has seen any request, and every later sandbox starts
from that dump instead of booting again.

- `criu.py`: the CRIU the containers run (Debian trixie's, with its own libraries and loader, so
  it runs in any image), and the guard every snapshotted server runs under.
- `store.py`: where snapshots live, by key (image ID, server spec, CRIU), written atomically.

A snapshot is a cache, never evidence: its key names everything the booted state depends on, a
restored server answers exactly as the booted one would, and any failure to dump or restore falls
back to booting, said so in one line.
"""
