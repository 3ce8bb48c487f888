"""Drift, told and survived, with no Debian mirror involved: a made-up package moves on.

Given a test mirror on loopback (made here with `dpkg-deb --build`) that serves `prooflock-demo-app`
1.0, which depends on `prooflock-demo-lib`, and lib at version 1, a test image `demo` is built on
the locked base and relocked: its closure names lib 1. Then the mirror moves on (it serves lib 2
only), and:

- `images build demo` exits 1 saying `prooflock-demo-lib 1 → 2`, builds nothing, writes no lock;
- `--allow-drift` exits 0, tags the drifted image, records the drift in this machine's state file,
  and the docker backend then runs checks in it, saying so once;
- with lib 1 back in the store (`images vendor` while the old mirror stood), a mirror that does
  not answer at all still gives the locked image ID, twice;
- a closure vendored to S3 (moto on loopback) rebuilds the locked ID from there alone.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import http.server
import json
import shutil
import subprocess
import threading
from collections.abc import Iterator
from functools import partial
from pathlib import Path

import pytest

from runner.backends.docker import DockerBackend
from runner.core.settings import Settings
from runner.images import machine
from runner.images.commands import EXIT_FAILED, EXIT_OK, cmd_images
from runner.images.flags import add_image_commands
from runner.images.lock import DebFile, ImageEntry, load_lock, save_lock
from runner.images.resolver import LockedImages
from runner.images.state import discard, image_id_of
from runner.storage.s3_settings import load_s3_settings
from tests.support.s3_endpoint import endpoint_env, raw_client

pytestmark = [pytest.mark.docker, pytest.mark.slow]

ROOT = Path(__file__).resolve().parent.parent
TAG = "prooflock/test-demo:1"
DEAD = "http://127.0.0.1:9/debian"  # the discard port: nothing answers there
DOCKERFILE = """\
ARG BASE={base}
FROM ${{BASE}}
ARG APT_MIRROR={dead}
ARG APT_SECURITY_MIRROR={dead}
ARG SOURCE_DATE_EPOCH={epoch}
ARG DEMO_VERSION=1.0
COPY build/ /tmp/build/
RUN sh /tmp/build/apt-install "prooflock-demo-app=${{DEMO_VERSION}}" && sh /tmp/build/finish
USER prover
WORKDIR /work
CMD ["sh"]
"""
SELFTEST = """\
#!/bin/sh
prooflock-demo-app | grep -q "demo app" || { echo "SELFTEST FAILED"; exit 1; }
echo "SELFTEST PASSED"
"""


def deb(out: Path, package: str, version: str, *, depends: str = "", script: str = "") -> Path:
    """A tiny binary package made with dpkg-deb."""
    root = out / f"{package}-{version}"
    (root / "DEBIAN").mkdir(parents=True)
    control = [
        f"Package: {package}",
        f"Version: {version}",
        "Architecture: all",
        "Maintainer: prooflock tests <tests@prooflock.invalid>",
        f"Description: {package}, made for a test",
    ]
    if depends:
        control.append(f"Depends: {depends}")
    (root / "DEBIAN/control").write_text("\n".join(control) + "\n")
    tool = root / "usr/bin" / package
    tool.parent.mkdir(parents=True)
    tool.write_text(script or f"#!/bin/sh\necho {package} {version}\n")
    tool.chmod(0o755)
    target = out / f"{package}_{version}_all.deb"
    subprocess.run(
        ["dpkg-deb", "--root-owner-group", "-Zgzip", "--build", str(root), str(target)],
        check=True,
        capture_output=True,
        env={"SOURCE_DATE_EPOCH": "1700000000", "PATH": "/usr/bin:/bin"},
    )
    return target


def pool_path(path: Path) -> str:
    return f"pool/main/p/{path.name.split('_')[0]}/{path.name}"


def as_locked(path: Path) -> DebFile:
    """The closure entry of a test package, as relock would record it from the index."""
    name, version, _ = path.name.split("_")
    data = path.read_bytes()
    return DebFile(
        version=version,
        architecture="all",
        filename=pool_path(path),
        sha256=hashlib.sha256(data).hexdigest(),
        size=len(data),
        priority="optional",
    )


def publish(mirror: Path, debs: list[Path]) -> None:
    """`mirror` becomes a one-suite Debian archive (unsigned) holding exactly `debs`."""
    shutil.rmtree(mirror, ignore_errors=True)
    stanzas = []
    for path in debs:
        pool = pool_path(path)
        (mirror / pool).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(path, mirror / pool)
        fields = subprocess.run(
            ["dpkg-deb", "-f", str(path)], check=True, capture_output=True, text=True
        ).stdout
        data = path.read_bytes()
        stanzas.append(
            f"{fields}Priority: optional\nFilename: {pool}\nSize: {len(data)}\n"
            f"SHA256: {hashlib.sha256(data).hexdigest()}\n"
        )
    index = gzip.compress("\n".join(stanzas).encode(), mtime=0)
    dists = mirror / "dists/bookworm"
    (dists / "main/binary-amd64").mkdir(parents=True)
    (dists / "main/binary-amd64/Packages.gz").write_bytes(index)
    digest = hashlib.sha256(index).hexdigest()
    (dists / "Release").write_text(
        f"Suite: bookworm\nCodename: bookworm\nComponents: main\nArchitectures: amd64\n"
        f"SHA256:\n {digest} {len(index)} main/binary-amd64/Packages.gz\n"
    )


@pytest.fixture(scope="module")
def mirror(tmp_path_factory) -> Iterator[tuple[str, Path, dict[str, list[Path]]]]:
    """A test mirror on loopback, and the packages of its two states: `before` and `after`."""
    root = tmp_path_factory.mktemp("mirror")
    debs = root / "debs"
    debs.mkdir()
    app = deb(
        debs,
        "prooflock-demo-app",
        "1.0",
        depends="prooflock-demo-lib",
        script="#!/bin/sh\necho demo app; prooflock-demo-lib\n",
    )
    states = {
        "before": [app, deb(debs, "prooflock-demo-lib", "1")],
        "after": [app, deb(debs, "prooflock-demo-lib", "2")],
    }
    served = root / "served"
    publish(served, states["before"])
    handler = partial(_Quiet, directory=str(served))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", served, states
    finally:
        server.shutdown()
        server.server_close()


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format, *args):  # noqa: A002
        pass


@pytest.fixture(scope="module")
def kit(tmp_path_factory, client, mirror) -> Iterator[Path]:
    """A kit with one test image, `demo`, on the locked base, whose closure names lib 1 (not
    built yet); returns its lock's path."""
    lock = load_lock(ROOT / "manifests" / "images.lock.json")
    if image_id_of(client, lock.base.tag) != lock.base.image_id:
        pytest.fail("the locked base image is missing: run `prooflock images base` first")
    root = tmp_path_factory.mktemp("kit")
    shutil.copytree(ROOT / "images" / "common", root / "images" / "common")
    demo = root / "images" / "demo"
    (demo / "selftest").mkdir(parents=True)
    (demo / "Dockerfile").write_text(
        DOCKERFILE.format(
            base=lock.base.registry_reference, dead=DEAD, epoch=lock.source_date_epoch
        )
    )
    (demo / "selftest" / "run.sh").write_text(SELFTEST)
    (root / "manifests").mkdir()
    shutil.copy(ROOT / "manifests" / "base.Packages", root / "manifests")
    lock.transport = {"APT_MIRROR": DEAD, "APT_SECURITY_MIRROR": DEAD, "PIP_INDEX_URL": ""}
    lock.images = {"demo": ImageEntry(tag=TAG, dockerfile_sha256="")}
    lock_path = root / "manifests" / "images.lock.json"
    save_lock(lock, lock_path)
    assert images_command("pin", "demo", "--lock", str(lock_path)) == EXIT_OK
    lock = load_lock(lock_path)
    own = {path.name.split("_")[0]: as_locked(path) for path in mirror[2]["before"]}
    lock.images["demo"].closure = {**lock.base.closure, **own}
    lock.images["demo"].packages = sorted(
        [*lock.base.packages, *(f"{name}={deb.version}" for name, deb in own.items())]
    )
    save_lock(lock, lock_path)
    yield lock_path
    for image in client.images.list(name="prooflock/test-demo"):
        client.images.remove(image.id, force=True)
    discard(client, "prooflock-build/test-demo:1", untag=True)


@pytest.fixture(autouse=True)
def machine_of_its_own(tmp_path_factory, monkeypatch):
    """One cache (store and state file) for the module's story, none of the machine's."""
    cache = Path(str(tmp_path_factory.getbasetemp())) / "demo-cache"
    monkeypatch.setenv("PROOFLOCK_CACHE_DIR", str(cache))
    return cache


def images_command(*argv: str) -> int:
    parser = argparse.ArgumentParser()
    add_image_commands(parser.add_subparsers(dest="command"))
    return cmd_images(parser.parse_args(["images", *argv]), Settings(), load_s3_settings())


def state_file() -> Path:
    """This machine's image state, under the cache dir the environment names."""
    return machine.state_path(Settings().cache_dir)


def against(url: str) -> list[str]:
    return ["--apt-mirror", url, "--apt-security-mirror", url]


def test_a_closure_that_moved_on_is_refused_explained_allowed_and_restored(
    client, kit, mirror, capsys, monkeypatch
):
    url, served, states = mirror
    lock = ["--lock", str(kit)]

    # Locked while the mirror serves lib 1: built from the closure, then relocked.
    assert images_command("build", "demo", *lock, *against(url)) == EXIT_OK
    assert images_command("relock", "demo", *lock, *against(url)) == EXIT_OK
    locked = load_lock(kit).images["demo"]
    assert locked.image_id and locked.closure["prooflock-demo-lib"].version == "1"
    assert images_command("vendor", "demo", *lock, *against(url)) == EXIT_OK
    store = Path(str(Settings().cache_dir)) / "debs" / "sha256"
    lib1 = store / locked.closure["prooflock-demo-lib"].sha256
    kept = lib1.read_bytes()
    lib1.unlink()  # as on a machine that never vendored it
    capsys.readouterr()

    # The mirror moves on: lib 2 only.
    publish(served, states["after"])
    before = kit.read_bytes()
    assert images_command("build", "demo", "--rebuild", *lock, *against(url)) == EXIT_FAILED
    err = capsys.readouterr().err
    assert "prooflock-demo-lib 1 → 2: the mirror moved on; vendor the closure" in err
    assert "nothing was built" in err
    assert kit.read_bytes() == before

    assert (
        images_command("build", "demo", "--rebuild", "--allow-drift", *lock, *against(url))
        == EXIT_OK
    )
    out = capsys.readouterr().out
    assert f"NOT the locked {locked.image_id}" in out
    assert "prooflock-demo-lib 1 → 2" in out
    assert kit.read_bytes() == before
    (drifted,) = [b for b in machine.load_state(state_file()).builds.values() if not b.exact]
    assert [str(d) for d in drifted.package_drift()] == ["prooflock-demo-lib 1 → 2"]
    assert image_id_of(client, TAG) == drifted.image_id != locked.image_id

    # On a machine without the locked image, the docker backend runs checks in the drifted
    # rebuild, and says so once.
    client.images.remove(locked.image_id, force=True)
    monkeypatch.setenv("PROOFLOCK_HOME", str(kit.parent.parent))
    backend = DockerBackend(Settings(backend="docker"), LockedImages(Settings()))
    try:
        assert backend.environment("demo", {})["image_id"] == drifted.image_id
        backend.environment("demo", {})
    finally:
        backend.close()
    said = capsys.readouterr().err
    assert said.count("a drifted rebuild") == 1 and "prooflock-demo-lib 1 → 2" in said

    # Lib 1 back in the store: the locked ID with no mirror answering, twice.
    lib1.write_bytes(kept)
    for flags in (["--rebuild"], ["--rebuild", "--no-cache"]):
        assert images_command("build", "demo", *flags, *lock, *against(DEAD)) == EXIT_OK
        assert "the locked image ID" in capsys.readouterr().out
        assert image_id_of(client, TAG) == locked.image_id


def test_the_state_file_is_outside_the_checkout_and_says_how_this_machine_built(kit):
    state = json.loads(state_file().read_text())
    assert not state_file().is_relative_to(ROOT)
    builds = [b for b in state["builds"].values() if b["name"] == "demo"]
    assert builds and all("apt_mirror" in b["provenance"] for b in builds)
    assert all("docker" in b["provenance"] for b in builds)


def test_a_closure_vendored_to_s3_rebuilds_the_locked_id_with_no_mirror_and_no_local_store(
    client, kit, s3_endpoint, s3_bucket, monkeypatch, capsys
):
    for key, value in endpoint_env(s3_endpoint).items():
        monkeypatch.setenv(key, value)
    remote = f"s3://{s3_bucket}/store"
    locked = load_lock(kit).images["demo"]
    lock = ["--lock", str(kit)]

    assert images_command("vendor", "demo", "--to", remote, *lock, *against(DEAD)) == EXIT_OK
    assert "2 copied to" in capsys.readouterr().out  # app and lib: the base has the rest
    keys = [o["Key"] for o in raw_client(s3_endpoint).list_objects_v2(Bucket=s3_bucket)["Contents"]]
    assert sorted(keys) == sorted(
        f"store/debs/sha256/{locked.closure[name].sha256}"
        for name in ("prooflock-demo-app", "prooflock-demo-lib")
    )

    shutil.rmtree(Path(str(Settings().cache_dir)) / "debs")
    monkeypatch.setenv("PROOFLOCK_DEB_STORE", remote)
    assert images_command("build", "demo", "--rebuild", *lock, *against(DEAD)) == EXIT_OK
    assert "the locked image ID" in capsys.readouterr().out
    assert image_id_of(client, TAG) == locked.image_id
