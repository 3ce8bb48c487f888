"""Pinned prover images: the lock, the offline base, reproducible builds, self-tests, verification.

`prooflock images base` builds the Debian base offline (debootstrap), `images build` builds each
prover image from `images/<name>/` and normalizes it so that the same pins give the same image ID,
`images verify` rebuilds without cache and compares with `manifests/images.lock.json`.

    api        the verbs as Python functions (the CLI in `commands` only parses and prints)
    lock       the lock's model, its file, and `Kit`: a lock with the definitions beside it
    state      what this daemon holds: `image_id_of`, is the locked image present and current
    build      one image build (`BuildPlan`): docker build, normalize, self-test, tag
    record     what a build writes into the lock
    pin        the Dockerfiles' pins, checked against the lock or recorded in it
    verify     rebuild without cache and explain any difference
    base       the offline base by debootstrap
    inputs, context, normalize, layers, archive, selftest, containers: the parts of a build
    wheel      setuptools' build step that puts images/ and the lock into the wheel (runner/kit/)
"""
