"""Pinned prover images: the lock, the offline base, reproducible builds, self-tests, verification.

`prooflock images base` builds the Debian base offline (debootstrap), `images build` builds each
prover image from `images/<name>/` and normalizes it so that the same pins give the same image ID,
`images verify` rebuilds without cache and compares with `manifests/images.lock.json`.
"""
