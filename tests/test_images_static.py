"""The image definitions, checked without Docker: every input pinned, the lock in step with the
Dockerfiles, and the normalization that makes builds reproducible."""

from __future__ import annotations

import argparse
import io
import json
import os
import re
import shutil
import tarfile
from pathlib import Path
from types import SimpleNamespace

import pytest
from docker.errors import ImageNotFound

from runner.core import home
from runner.core.errors import InfraFailure, UserError
from runner.core.settings import Settings
from runner.images import api, base, context, machine
from runner.images.build import BuildPlan
from runner.images.closure import PackageDrift
from runner.images.commands import EXIT_FAILED, EXIT_OK, cmd_images
from runner.images.flags import add_image_commands
from runner.images.inputs import BuildInputs, host_mirror
from runner.images.layers import Squash, directory_nodes, write_layer
from runner.images.lock import ImagesLock, Kit, load_lock, lock_bytes
from runner.images.pin import TRANSPORT_ARGS, check_pins_match
from runner.images.reproduce import Reproduction
from runner.images.state import ImageState, image_id_of, is_current, locked_state, require_base

ROOT = Path(__file__).resolve().parent.parent
IMAGES = ROOT / "images"
LOCK = load_lock(ROOT / "manifests" / "images.lock.json")
NAMES = sorted(p.name for p in IMAGES.iterdir() if p.is_dir() and p.name != context.COMMON)
SHA256 = re.compile(r"^[0-9a-f]{64}$")
COMMIT = re.compile(r"^[0-9a-f]{40}$")
BUILD_INPUTS = BuildInputs(
    "http://mirror.invalid/debian", "http://mirror.invalid/debian-security", Path("/nonexistent")
)
DEBIAN_VERSION = re.compile(r"^[0-9][A-Za-z0-9.+~:-]*$")


def dockerfile(name: str) -> str:
    return (IMAGES / name / "Dockerfile").read_text()


def run_text(name: str) -> str:
    """The Dockerfile's RUN instructions with line continuations joined."""
    joined = dockerfile(name).replace("\\\n", " ")
    return "\n".join(line for line in joined.splitlines() if line.lstrip().startswith("RUN "))


def test_every_image_a_prover_may_run_in_is_defined_and_every_definition_locked():
    """Discovered, not listed: a new prover's images are its Dockerfiles and lock entries."""
    from runner import provers

    wanted = {
        image
        for name in provers.names()
        for image in (*provers.get(name).images, *provers.get(name).lines)
    }
    defined = sorted(p.parent.name for p in IMAGES.glob("*/Dockerfile"))
    assert defined == NAMES  # every image folder holds a Dockerfile
    assert wanted <= set(defined), sorted(wanted - set(defined))
    assert sorted(LOCK.images) == NAMES


@pytest.mark.parametrize("name", NAMES)
def test_a_self_test_with_a_known_good_and_a_known_bad_artifact(name):
    selftest = IMAGES / name / "selftest"
    assert (selftest / "run.sh").is_file()
    artifacts = [p.relative_to(selftest).as_posix() for p in selftest.rglob("*") if p.is_file()]
    assert any("good" in a for a in artifacts), artifacts
    assert any("bad" in a for a in artifacts), artifacts
    assert "SELFTEST PASSED" in (selftest / "run.sh").read_text()


@pytest.mark.parametrize("name", NAMES)
def test_the_lock_matches_the_dockerfile(name):
    entry = LOCK.entry(name)
    assert entry.dockerfile_sha256 == context.sha256_of(IMAGES / name / "Dockerfile"), (
        f"images/{name}/Dockerfile changed since the lock was written: rebuild it "
        f"(`prooflock images build {name}`) or, if it cannot be built here, `prooflock images pin {name}`"
    )
    assert entry.files == context.file_hashes(IMAGES, name)
    check_pins_match(IMAGES, name, LOCK)  # every ARG default equals the lock's pin, and back


@pytest.mark.parametrize("name", NAMES)
def test_every_build_argument_has_a_default(name):
    args = context.dockerfile_args(IMAGES / name / "Dockerfile")
    missing = [arg for arg, value in args.items() if value is None]
    assert not missing, f"ARG without default in images/{name}/Dockerfile: {missing}"
    for arg in ("BASE", "SOURCE_DATE_EPOCH", "APT_MIRROR", "APT_SECURITY_MIRROR"):
        assert arg in args


@pytest.mark.parametrize("name", NAMES)
def test_the_base_is_a_digest_and_no_tag_floats(name):
    text = dockerfile(name)
    froms = re.findall(r"^FROM\s+(\S+)", text, re.MULTILINE)
    assert froms == ["${BASE}"]
    base = LOCK.base_named(LOCK.base_of(name))
    assert re.fullmatch(r"[a-z0-9./-]+(:[\w.-]+)?@sha256:[0-9a-f]{64}", base.registry_reference)
    assert ":latest" not in text and "/latest/" not in text


def test_the_default_mirrors_are_one_dated_debian_snapshot():
    snapshot = r"http://snapshot\.debian\.org/archive/debian(-security)?/(\d{8}T\d{6}Z)"
    main = re.fullmatch(snapshot, LOCK.transport["APT_MIRROR"])
    security = re.fullmatch(snapshot, LOCK.transport["APT_SECURITY_MIRROR"])
    assert main and security and main.group(2) == security.group(2)
    assert set(LOCK.transport) == set(TRANSPORT_ARGS)


@pytest.mark.parametrize("name", NAMES)
def test_every_remote_input_carries_a_checksum_or_a_commit(name):
    args = {k: v or "" for k, v in context.dockerfile_args(IMAGES / name / "Dockerfile").items()}
    for arg, value in args.items():
        if arg.endswith("_URL") and arg != "PIP_INDEX_URL":
            prefix = arg.removesuffix("_URL")
            pinned_by_sha = SHA256.match(args.get(f"{prefix}_SHA256", ""))
            pinned_by_commit = any(COMMIT.match(part) for part in value.split("/"))
            assert pinned_by_sha or pinned_by_commit, f"{arg}={value} has no sha256 and no commit"
            assert f"${arg}" in run_text(name) and f"${prefix}_SHA256" in run_text(name)
        if arg.endswith("_REPOSITORY"):
            commit = args.get(arg.removesuffix("_REPOSITORY") + "_COMMIT", "")
            assert COMMIT.match(commit), f"{arg} is checked out without a pinned commit"
    for word in ("curl ", "wget ", "git clone", "pip install", "apt-get install"):
        assert word not in run_text(name), (
            f"images/{name}: `{word.strip()}` bypasses the pinned helpers"
        )


@pytest.mark.parametrize("name", NAMES)
def test_debian_packages_are_installed_at_exact_versions(name):
    args = {k: v or "" for k, v in context.dockerfile_args(IMAGES / name / "Dockerfile").items()}
    requested = re.findall(r"\"?([a-z0-9][a-z0-9.+-]+)=\$\{(\w+)\}\"?", run_text(name))
    assert requested, f"images/{name} installs no pinned Debian package"
    for package, arg in requested:
        assert DEBIAN_VERSION.match(args[arg]), f"{package}: {arg}={args[arg]!r} is not a version"
    for call in re.findall(r"apt-install((?:\s+\"?[^&\s]+\"?)+)", run_text(name)):
        for word in call.split():
            assert "=" in word or word.startswith("$"), f"images/{name}: {word} has no version"


@pytest.mark.parametrize("name", [n for n in NAMES if (IMAGES / n / "requirements.txt").exists()])
def test_python_requirements_are_pinned_by_hash(name):
    text = (IMAGES / name / "requirements.txt").read_text().replace("\\\n", " ")
    lines = [line for line in text.splitlines() if line.strip() and not line.startswith("#")]
    assert lines
    for line in lines:
        assert re.match(r"^[a-z0-9-]+==[\w.]+ ", line), line
        assert re.search(r"--hash=sha256:[0-9a-f]{64}", line), line
    assert "pip-install" in run_text(name)


@pytest.mark.parametrize("name", NAMES)
def test_the_image_keeps_the_runtime_conventions(name):
    text = dockerfile(name)
    assert "sh /tmp/build/finish" in text  # user prover (1000), /work, build leftovers removed
    assert re.search(r"^USER prover$", text, re.MULTILINE)
    assert re.search(r"^WORKDIR /work$", text, re.MULTILINE)
    assert "HOME=/work" in text and "XDG_CACHE_HOME=/tmp/.cache" in text


@pytest.mark.parametrize("name", NAMES)
def test_a_built_image_is_fully_recorded(name):
    entry = LOCK.entry(name)
    if entry.status == "not built":
        assert entry.image_id is None and not entry.diff_ids and not entry.packages
        return
    assert entry.image_id and entry.image_id.startswith("sha256:")
    base = LOCK.base_named(entry.base)  # its own suite's base
    assert entry.diff_ids[: len(base.diff_ids)] == base.diff_ids
    assert len(entry.diff_ids) == len(base.diff_ids) + 1  # one squashed, normalized layer
    installed = dict(p.split("=", 1) for p in entry.packages)
    args = context.dockerfile_args(IMAGES / name / "Dockerfile")
    for package, arg in re.findall(r"\"?([a-z0-9][a-z0-9.+-]+)=\$\{(\w+)\}\"?", run_text(name)):
        if package in installed or entry.inputs.get("WITH_OLYMPIAD_ASY") != "no":
            assert installed.get(package) == args[arg], (
                f"{package} installed {installed.get(package)}"
            )
    assert_closure_is_the_package_list(entry.closure, entry.packages)


def assert_closure_is_the_package_list(closure, packages):
    """Every installed package is in the closure at its version, by pool path, sha256 and size."""
    assert {f"{name}={deb.version}" for name, deb in closure.items()} == set(packages)
    for name, deb in closure.items():
        assert deb.filename.startswith(("pool/main/", "pool/updates/main/")), name
        assert deb.filename.endswith(f"_{deb.architecture}.deb") and deb.size > 0, name


@pytest.mark.parametrize("base", LOCK.base_names())
def test_each_base_records_its_closure_and_the_stanzas_debootstrap_copies(base):
    entry = LOCK.base_named(base)
    assert_closure_is_the_package_list(entry.closure, entry.packages)
    assert all(deb.priority for deb in entry.closure.values())  # debootstrap selects by it
    index = Kit.open(ROOT / "manifests" / "images.lock.json").for_base(base).base_index()
    assert index is not None and index.endswith("\n\n")
    listed = dict(re.findall(r"^Package: (\S+)\nVersion: (\S+)$", index, re.MULTILINE))
    listed.update(re.findall(r"^Package: (\S+)\nSource: .*\nVersion: (\S+)$", index, re.MULTILINE))
    assert listed == {name: deb.version for name, deb in entry.closure.items()}


def test_an_image_builds_on_its_own_base_and_a_rebased_kit_writes_its_base_back(tmp_path):
    lock_path = kit_copy(tmp_path)
    kit = Kit.open(lock_path)
    assert BuildPlan.of(kit, "rocq", BUILD_INPUTS).lock.base.suite == "bookworm"
    assert BuildPlan.of(kit, "rocq-8.20", BUILD_INPUTS).lock.base.suite == "trixie"
    assert BuildPlan.of(kit, "rocq-9.2", BUILD_INPUTS).lock.base.suite == "forky"
    trixie = kit.for_image("rocq-8.20")
    assert trixie.lock.base.suite == "trixie" and trixie.base_index_path.name == (
        "base-trixie.Packages"
    )
    bookworm_id = kit.lock.base.image_id
    trixie.lock.base = trixie.lock.base.model_copy(update={"image_id": OTHER_ID})
    trixie.save()
    saved = load_lock(lock_path)
    assert saved.bases["base-trixie"].image_id == OTHER_ID
    assert saved.base.image_id == bookworm_id and saved.base.suite == "bookworm"
    assert kit.lock.base_named("base-trixie").image_id == OTHER_ID  # the same lock, in step
    trixie.for_base("base").save()  # back to the lock's own base: nothing else is written
    assert load_lock(lock_path) == saved
    assert sorted(saved.bases) == ["base-forky", "base-trixie"]
    with pytest.raises(UserError, match="no base 'base-sid'.*bases: base, base-forky, base-trixie"):
        kit.for_base("base-sid")


def test_a_suite_newer_than_the_hosts_debootstrap_bootstraps_with_its_sid_script(
    tmp_path, monkeypatch
):
    """bookworm's debootstrap knows no `forky`: the forky base is bootstrapped with the script
    newer debootstraps link `forky` to; a suite it knows uses its own."""
    (tmp_path / "trixie").write_text("")
    monkeypatch.setattr(base, "SCRIPTS", tmp_path)
    forky, trixie = LOCK.base_named("base-forky"), LOCK.base_named("base-trixie")
    argv = base.debootstrap_argv(forky, tmp_path / "root", "http://mirror")
    assert argv[-4:] == ["forky", str(tmp_path / "root"), "http://mirror", str(tmp_path / "sid")]
    argv = base.debootstrap_argv(trixie, tmp_path / "root", "http://mirror")
    assert argv[-3:] == ["trixie", str(tmp_path / "root"), "http://mirror"]


def test_the_lock_keeps_no_machine_provenance_and_one_line_per_closure_package():
    text = (ROOT / "manifests" / "images.lock.json").read_text()
    for word in ("built_with", "ca_bundle", 'docker"', "apt_mirror"):
        assert word not in text
    assert lock_bytes(LOCK) == text.encode()  # what `relock` and `pin` write, key-sorted
    closure_lines = [line for line in text.splitlines() if '"sha256": ' in line]
    entries = [LOCK.base, *LOCK.bases.values(), *LOCK.images.values()]
    downloads = sum(len(e.downloads) for e in LOCK.images.values())
    assert len(closure_lines) == sum(len(e.closure) for e in entries) + downloads


def test_a_schema_1_lock_from_an_older_bundle_is_read_without_its_provenance():
    old = json.loads((ROOT / "tests/artifacts/legacy-bundle/images.lock.json").read_text())
    assert old["schema_version"] == 1 and "built_with" in old["images"]["rocq"]
    old["images"]["alphageometry"] = {
        **old["images"]["newclid"],
        "built_with": {"files": {"ag4masses.bundle": "0" * 64}, "docker": "20.10"},
    }
    read = ImagesLock.model_validate(old)
    assert (
        read.schema_version == 2
        and read.images["rocq"].image_id == old["images"]["rocq"]["image_id"]
    )
    assert read.images["alphageometry"].vendored == ["ag4masses.bundle"]
    assert read.images["rocq"].closure == {} and read.images["rocq"].vendored == []


def test_the_images_that_cannot_be_built_here_say_so():
    for name in ("alphageometry", "lean", "isabelle"):
        assert "NOT BUILT in this project's CI" in dockerfile(name)


def test_a_tag_for_each_image_and_a_clear_error_for_an_unknown_one():
    assert LOCK.tag("rocq").startswith("prooflock/rocq:")
    with pytest.raises(UserError, match="no image 'coq'.*known: alphageometry"):
        LOCK.tag("coq")


# -- normalization: the same files give the same layer bytes ---------------------------------


def make_tree(root: Path, mtime: int) -> None:
    (root / "usr/bin").mkdir(parents=True)
    (root / "var/log").mkdir(parents=True)
    (root / "usr/bin/tool").write_text("#!/bin/sh\necho hi\n")
    (root / "usr/bin/tool").chmod(0o755)
    os.link(root / "usr/bin/tool", root / "usr/bin/tool-alias")
    (root / "usr/bin/sh").symlink_to("dash")
    (root / "var/log/dpkg.log").write_text(f"installed at {mtime}\n")  # volatile
    for path in [*root.rglob("*"), root]:
        os.utime(path, (mtime, mtime), follow_symlinks=False)


def layer_of(root: Path, epoch: int) -> tuple[str, bytes]:
    buffer = io.BytesIO()
    diff_id, _ = write_layer(directory_nodes(root), buffer, epoch)
    return diff_id, buffer.getvalue()


def test_two_trees_built_at_different_times_give_the_same_layer(tmp_path):
    make_tree(tmp_path / "a", mtime=2_000_000_000)
    make_tree(tmp_path / "b", mtime=2_100_000_000)
    epoch = 1_795_910_400
    (id_a, data), (id_b, _) = layer_of(tmp_path / "a", epoch), layer_of(tmp_path / "b", epoch)
    assert id_a == id_b
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        members = {m.name: m for m in tar}
    assert "var/log/dpkg.log" not in members and "var/log" in members
    assert {m.mtime for m in members.values()} == {epoch}
    assert (
        members["usr/bin/tool-alias"].islnk()
        and members["usr/bin/tool-alias"].linkname == "usr/bin/tool"
    )
    assert layer_of(tmp_path / "a", epoch - 1)[0] != id_a  # the epoch is a pin


def layer_tar(entries: list[tuple[str, bytes | None]]) -> tarfile.TarFile:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for name, data in entries:
            info = tarfile.TarInfo(name)
            if data is None:
                info.type = tarfile.DIRTYPE
                tar.addfile(info)
            else:
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    buffer.seek(0)
    return tarfile.open(fileobj=buffer)


def test_squashing_drops_files_a_later_step_deleted_and_keeps_needed_whiteouts():
    squash = Squash(lower={"etc", "etc/motd", "usr", "usr/share"})
    first = layer_tar(
        [("tmp", None), ("tmp/ca.crt", b"secret"), ("opt", None), ("opt/tool", b"v1")]
    )
    second = layer_tar(
        [
            ("tmp", None),
            ("tmp/.wh.ca.crt", b""),
            ("etc", None),
            ("etc/.wh.motd", b""),
            ("opt/tool", b"v2"),
        ]
    )
    squash.apply(first, 0)
    squash.apply(second, 1)
    names = {node.path: node for node in squash.result()}
    assert "tmp/ca.crt" not in names and "tmp/.wh.ca.crt" not in names  # never reached the base
    assert "etc/.wh.motd" in names  # hides a base file
    assert names["opt/tool"].open_data().read() == b"v2"


def test_the_host_mirror_is_read_from_this_machines_apt_sources(tmp_path):
    (tmp_path / "sources.list.d").mkdir()
    (tmp_path / "sources.list.d" / "debian.sources").write_text(
        "Types: deb\nURIs: http://mirror.example/debian\nSuites: bookworm bookworm-updates\n"
        "Components: main\n\nTypes: deb\nURIs: http://mirror.example/debian-security/\n"
        "Suites: bookworm-security\nComponents: main\n"
    )
    assert host_mirror("bookworm", tmp_path) == "http://mirror.example/debian"
    assert host_mirror("bookworm-security", tmp_path) == "http://mirror.example/debian-security"
    # A suite the host does not list comes from the same Debian mirror (it carries every suite).
    assert host_mirror("forky", tmp_path) == "http://mirror.example/debian"
    assert host_mirror("forky-security", tmp_path) == "http://mirror.example/debian-security"
    (tmp_path / "sources.list.d" / "debian.sources").write_text(
        "Types: deb\nURIs: https://packages.example.com/apt\nSuites: cloud-sdk\n"
    )
    with pytest.raises(UserError, match="no `trixie` entry, nor a Debian mirror"):
        host_mirror("trixie", tmp_path)


# -- what this machine holds, and which lock a build may write (a fake daemon) ----------------


class FakeDaemon:
    """Image references → IDs, as a Docker daemon would answer for them (and tag, and remove)."""

    def __init__(self, tags: dict[str, str | None]):
        self.tags = {tag: image_id for tag, image_id in tags.items() if image_id}
        self.loaded: set[str] = set(self.tags.values())
        self.images = self

    def get(self, reference: str) -> SimpleNamespace:
        image_id = self.tags.get(reference, reference if reference in self.loaded else None)
        if image_id is None:
            raise ImageNotFound(reference)
        tags = [t for t, i in self.tags.items() if i == image_id]

        def tag(repository: str, version: str) -> None:
            self.tags[f"{repository}:{version}"] = image_id

        return SimpleNamespace(id=image_id, tags=tags, tag=tag)

    def remove(self, reference: str, noprune: bool = False) -> None:
        self.loaded.discard(reference)

    def version(self) -> dict[str, str]:
        return {"Version": "fake"}


def kit_copy(root: Path) -> Path:
    """A copy of the kit's definitions and lock at `root`; returns the lock's path."""
    shutil.copytree(IMAGES, root / "images")
    (root / "manifests").mkdir(parents=True)
    for index in sorted((ROOT / "manifests").glob("*.Packages")):
        shutil.copy(index, root / "manifests")
    return Path(shutil.copy(ROOT / "manifests" / "images.lock.json", root / "manifests"))


def images_command(*argv: str) -> int:
    parser = argparse.ArgumentParser()
    add_image_commands(parser.add_subparsers(dest="command"))
    return cmd_images(parser.parse_args(["images", *argv]), Settings(), None)


def rebuilt(name: str, image_id: str, daemon: FakeDaemon, drift=()) -> Reproduction:
    """What a rebuild of the locked `name` gave: `image_id`, with these package changes."""
    entry = LOCK.base if name == "base" else LOCK.entry(name)
    versions = entry.versions()
    for item in drift:
        versions[item.package] = item.built
    daemon.loaded.add(image_id)
    return Reproduction(
        name,
        entry.tag,
        entry.image_id,
        image_id,
        built_from="the locked closure",
        drift=list(drift),
        packages=sorted(f"{n}={v}" for n, v in versions.items()),
    )


OTHER_ID = "sha256:" + "1" * 64


def test_the_locked_image_is_current_only_as_tagged_on_the_locked_base_from_unchanged_files(
    tmp_path,
):
    lock_path = kit_copy(tmp_path)
    root, lock = tmp_path / "images", load_lock(lock_path)
    rocq, base = lock.entry("rocq"), lock.base
    assert rocq.image_id and base.image_id, "the lock records a rocq build"
    here = {base.tag: base.image_id, rocq.tag: rocq.image_id}

    assert locked_state(FakeDaemon(here), lock, "rocq", root) is ImageState.PRESENT
    assert is_current(FakeDaemon(here), lock, "base", root)
    assert image_id_of(FakeDaemon(here), rocq.tag) == rocq.image_id
    assert image_id_of(FakeDaemon(here), "prooflock/rocq:nope") is None
    assert locked_state(FakeDaemon({base.tag: base.image_id}), lock, "rocq", root) is (
        ImageState.MISSING
    )
    assert locked_state(FakeDaemon({**here, rocq.tag: OTHER_ID}), lock, "rocq", root) is (
        ImageState.STALE
    )
    assert locked_state(FakeDaemon({**here, base.tag: OTHER_ID}), lock, "rocq", root) is (
        ImageState.STALE
    )
    assert locked_state(FakeDaemon(here), lock, "lean", root) is ImageState.NOT_BUILT
    with (root / "rocq" / "Dockerfile").open("a") as dockerfile:
        dockerfile.write("# edited since the build\n")
    assert locked_state(FakeDaemon(here), lock, "rocq", root) is ImageState.STALE


def test_a_line_is_current_on_its_own_suites_base_and_a_missing_one_names_its_command(tmp_path):
    lock_path = kit_copy(tmp_path)
    root, lock = tmp_path / "images", load_lock(lock_path)
    line, trixie = lock.entry("rocq-8.20"), lock.bases["base-trixie"]
    assert line.base == "base-trixie" and line.image_id and trixie.image_id
    here = {trixie.tag: trixie.image_id, line.tag: line.image_id}  # no bookworm base at all
    assert locked_state(FakeDaemon(here), lock, "rocq-8.20", root) is ImageState.PRESENT
    moved = {**here, trixie.tag: OTHER_ID}
    assert locked_state(FakeDaemon(moved), lock, "rocq-8.20", root) is ImageState.STALE
    with pytest.raises(
        UserError, match="prooflock/base:trixie is missing: run `prooflock images base base-trixie`"
    ):
        require_base(
            FakeDaemon({lock.base.tag: lock.base.image_id}),
            lock.rebased("base-trixie"),
            tmp_path / "state.json",
        )


def test_images_list_json_names_the_lock_it_read_and_says_when_no_daemon_answers(
    monkeypatch, capsys
):
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    monkeypatch.delenv("PROOFLOCK_HOME", raising=False)

    assert images_command("list", "--json") == EXIT_OK

    listing = json.loads(capsys.readouterr().out)
    assert listing["schema"] == "prooflock.images/1"
    assert listing["lock"] == str(ROOT / "manifests" / "images.lock.json")
    assert listing["images_root"] == str(IMAGES) and listing["lock_writable"] is True
    rows = {row["name"]: row for row in listing["images"]}
    assert list(rows) == [*LOCK.base_names(), *NAMES]
    assert rows["rocq"] == {
        "name": "rocq",
        "tag": LOCK.tag("rocq"),
        "image_id": LOCK.images["rocq"].image_id,
        "state": "unchecked",
    }
    assert rows["lean"]["state"] == "not built" and rows["lean"]["image_id"] is None


@pytest.fixture
def rocq_missing_here(monkeypatch, tmp_path):
    """A daemon holding the locked base but no rocq image; a rebuild gives what `result` says.
    This machine's state file is the test's own."""
    monkeypatch.setenv("PROOFLOCK_CACHE_DIR", str(tmp_path / "cache"))
    daemon = FakeDaemon({LOCK.base.tag: LOCK.base.image_id})
    cups = PackageDrift("libcups2", "2.4.2-3+deb12u9", "2.4.2-3+deb12u10")
    result = {"image_id": OTHER_ID, "drift": [cups]}
    monkeypatch.setattr(api, "connect_for_builds", lambda: daemon)
    monkeypatch.setattr(
        api,
        "reproduce_image",
        lambda client, plan, out: rebuilt("rocq", result["image_id"], daemon, result["drift"]),
    )
    return result, daemon


def test_a_rebuild_to_another_id_is_refused_with_its_drift_and_the_lock_is_never_written(
    tmp_path, capsys, rocq_missing_here
):
    _, daemon = rocq_missing_here
    lock_path = kit_copy(tmp_path / "checkout")
    before = lock_path.read_bytes()

    assert images_command("build", "rocq", "--lock", str(lock_path)) == EXIT_FAILED

    err = capsys.readouterr().err
    assert f"rocq: built {OTHER_ID}, not the locked {LOCK.images['rocq'].image_id}" in err
    assert "libcups2 2.4.2-3+deb12u9 → 2.4.2-3+deb12u10: the mirror moved on" in err
    assert LOCK.tag("rocq") not in daemon.tags and OTHER_ID not in daemon.loaded
    assert lock_path.read_bytes() == before
    assert machine.load_state(machine.state_path(Settings().cache_dir)).builds == {}


def test_with_allow_drift_the_rebuild_is_tagged_and_recorded_on_this_machine_only(
    tmp_path, capsys, rocq_missing_here
):
    _, daemon = rocq_missing_here
    lock_path = kit_copy(tmp_path / "checkout")
    before = lock_path.read_bytes()

    assert images_command("build", "rocq", "--allow-drift", "--lock", str(lock_path)) == EXIT_OK

    out = capsys.readouterr().out
    assert f"NOT the locked {LOCK.images['rocq'].image_id}" in out
    assert "libcups2 2.4.2-3+deb12u9 → 2.4.2-3+deb12u10" in out
    assert daemon.tags[LOCK.tag("rocq")] == OTHER_ID
    assert lock_path.read_bytes() == before
    (recorded,) = machine.load_state(machine.state_path(Settings().cache_dir)).builds.values()
    assert recorded.image_id == OTHER_ID
    assert recorded.locked_id == LOCK.images["rocq"].image_id
    assert [str(d) for d in recorded.package_drift()] == [
        "libcups2 2.4.2-3+deb12u9 → 2.4.2-3+deb12u10"
    ]
    assert recorded.provenance["docker"] == "fake" and "apt_mirror" in recorded.provenance

    assert images_command("build", "rocq", "--allow-drift", "--lock", str(lock_path)) == EXIT_OK
    assert "this machine's drifted rebuild of the locked" in capsys.readouterr().out  # reused


def test_the_locked_id_is_tagged_and_an_installed_copy_is_never_written(
    tmp_path, monkeypatch, capsys, rocq_missing_here
):
    result, daemon = rocq_missing_here
    result.update(image_id=LOCK.images["rocq"].image_id, drift=[])
    installed = tmp_path / "site-packages" / "runner" / "kit"
    lock_path = kit_copy(installed)
    monkeypatch.setattr(home, "PACKAGED", installed)
    before = lock_path.read_bytes()

    assert images_command("build", "rocq", "--lock", str(lock_path)) == EXIT_OK
    assert "the locked image ID" in capsys.readouterr().out
    assert daemon.tags[LOCK.tag("rocq")] == LOCK.images["rocq"].image_id

    with pytest.raises(UserError, match="installed with the package and is never written"):
        images_command("pin", "rocq", "--lock", str(lock_path))
    with pytest.raises(UserError, match="installed with the package and is never written"):
        images_command("relock", "rocq", "--lock", str(lock_path), "--apt-mirror", "file:///x")
    assert lock_path.read_bytes() == before


@pytest.fixture
def checkout_without_images(tmp_path, monkeypatch):
    """PROOFLOCK_HOME at a copy of the kit; a daemon that holds none of its images."""
    kit_copy(tmp_path)
    monkeypatch.setenv("PROOFLOCK_HOME", str(tmp_path))
    monkeypatch.setenv("PROOFLOCK_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("PROOFLOCK_APT_MIRROR", "http://127.0.0.1:9/debian")
    daemon = FakeDaemon({})
    monkeypatch.setattr(api, "connect_for_builds", lambda: daemon)
    return daemon


def fake_base_build(daemon: FakeDaemon, image_id: str):
    def reproduce_base(client, kit, inputs, *, allow_drift, out):
        print("base: I: Retrieving Release", file=out, flush=True)
        return rebuilt("base", image_id, daemon)

    return reproduce_base


def test_build_missing_builds_the_locked_base_first_and_reports_progress(
    checkout_without_images, monkeypatch
):
    daemon = checkout_without_images
    monkeypatch.setattr(api, "reproduce_base", fake_base_build(daemon, LOCK.base.image_id or ""))

    def reproduce_image(client, plan, *, out):
        assert daemon.tags[LOCK.base.tag] == LOCK.base.image_id  # the base came first
        print("rocq: Step 1/9 : ARG BASE", file=out, flush=True)
        return rebuilt("rocq", LOCK.images["rocq"].image_id or "", daemon)

    monkeypatch.setattr(api, "reproduce_image", reproduce_image)
    said: list[str] = []

    api.build_locked("rocq", Settings(), said.append)

    assert said == [
        f"building the locked base {LOCK.base.tag} first (debootstrap: minutes)",
        "base: I: Retrieving Release",
        f"built {LOCK.base.tag}: {LOCK.base.image_id}",
        f"building the locked image {LOCK.tag('rocq')} (minutes; build inputs from PROOFLOCK_*)",
        "rocq: Step 1/9 : ARG BASE",
        f"built {LOCK.tag('rocq')}: {LOCK.images['rocq'].image_id}",
    ]


def test_build_missing_stops_when_the_base_is_not_the_locked_one(
    checkout_without_images, monkeypatch
):
    monkeypatch.setattr(api, "reproduce_base", fake_base_build(checkout_without_images, OTHER_ID))
    monkeypatch.setattr(
        api, "reproduce_image", lambda *a, **k: pytest.fail("built on another base")
    )

    with pytest.raises(InfraFailure, match=f"rebuilt to {OTHER_ID}, not the locked"):
        api.build_locked("rocq", Settings(), lambda message: None)
