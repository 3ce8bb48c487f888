"""Pinned prover images: the lock, exact closures, the offline base, reproducible builds, archives,
self-tests, verification.

`prooflock images base` builds the Debian base offline (debootstrap). `images build` builds each
prover image from `images/<name>/`. Both install exactly the closure the lock records. Both
normalize the result, so the same pins give the same image ID. The host fetches every input into the
store. A locked image's build runs with no network; its context carries its inputs. A build never
writes the lock. Another ID is refused with its drift, or recorded on this machine only
(`--allow-drift`). `images relock` and `images pin` are the lock's only writers.

    api        the verbs as Python functions (the CLI in `commands` only parses and prints)
    lock       the lock's model, its file, and `Kit`: a lock with the definitions beside it
    machine    this machine's state file: its builds, their drift and provenance
    state      what this daemon holds: `image_id_of`, the locked image or a drifted rebuild
    usable     `usable_image(name)`: what a check runs in (the docker backend, replay)
    resolver   `LockedImages`: the lock as the docker backend's image resolver
    reproduce  one locked image rebuilt from its closure, or drifted when allowed
    build      one docker build (`BuildPlan`): build, normalize, self-test
    base       the offline base by debootstrap
    debian     a mirror's Release and Packages indexes; Debian version order
    closure    a build's package list as the lock's closure; package drift
    store      the content-addressed input store (.debs, wheels, sources, ...) and its sources
    downloads  an image's inputs that are not .debs: fetched by the host, carried in the context
    exact      the sources of a build, its repository, the words for what cannot be had
    localrepo  a repository holding exactly a closure (a build's context carries it)
    relock     `images relock`: this machine's build, its closure and wheels into the lock
    vendor     `images vendor`: every input of images into the store, here or in S3
    archives   `sha256-<hex>.tar.gz` image archives: save, check, load, fetch
    pin        the Dockerfiles' pins, checked against the lock or recorded in it
    verify     rebuild without cache and explain any difference
    inputs, context, normalize, layers, archive, selftest: the parts of a build
    wheel      setuptools' build step that puts images/ and the lock into the wheel (runner/kit/)

Containers run under runner.backends.policy: the one hardening policy and Docker connection.
"""
