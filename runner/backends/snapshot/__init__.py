"""Snapshots of booted servers, for servers whose boot costs minutes (HOL Light's worker).

Such a server is dumped once, right after its boot and before it has seen any request. Every later
sandbox starts from that dump instead of booting again.

- `criu.py`: the CRIU the containers run, and the guard every snapshotted server runs under. It
  is Debian trixie's CRIU, with its own libraries and loader, so it runs in any image.
- `store.py`: where snapshots live, by key (image ID, server spec, CRIU), written atomically.

A snapshot is a cache, never evidence. Its key names everything the booted state depends on. A
restored server answers exactly as the booted one would. Any failure to dump or restore falls back
to booting, said so in one line.
"""
