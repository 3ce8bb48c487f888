"""The image definitions, checked without Docker: every input pinned, the lock in step with the
Dockerfiles, and the normalization that makes builds reproducible."""

from __future__ import annotations

import io
import os
import re
import tarfile
from pathlib import Path

import pytest

from runner.errors import UserError
from runner.images import context
from runner.images.build import TRANSPORT_ARGS, check_pins_match
from runner.images.inputs import host_mirror
from runner.images.layers import Squash, directory_nodes, write_layer
from runner.images.lock import load_lock

ROOT = Path(__file__).resolve().parent.parent
IMAGES = ROOT / "images"
LOCK = load_lock(ROOT / "manifests" / "images.lock.json")
NAMES = sorted(p.name for p in IMAGES.iterdir() if p.is_dir() and p.name != context.COMMON)
SHA256 = re.compile(r"^[0-9a-f]{64}$")
COMMIT = re.compile(r"^[0-9a-f]{40}$")
DEBIAN_VERSION = re.compile(r"^[0-9][A-Za-z0-9.+~:-]*$")


def dockerfile(name: str) -> str:
    return (IMAGES / name / "Dockerfile").read_text()


def run_text(name: str) -> str:
    """The Dockerfile's RUN instructions with line continuations joined."""
    joined = dockerfile(name).replace("\\\n", " ")
    return "\n".join(line for line in joined.splitlines() if line.lstrip().startswith("RUN "))


def test_the_six_provers_and_newclid_each_have_an_image_and_a_lock_entry():
    assert NAMES == [
        "alphageometry",
        "asymptote",
        "hol-light",
        "isabelle",
        "lean",
        "newclid",
        "rocq",
    ]
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
    assert re.fullmatch(
        r"[a-z0-9./-]+(:[\w.-]+)?@sha256:[0-9a-f]{64}", LOCK.base.registry_reference
    )
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
    assert entry.diff_ids[: len(LOCK.base.diff_ids)] == LOCK.base.diff_ids
    assert len(entry.diff_ids) == len(LOCK.base.diff_ids) + 1  # one squashed, normalized layer
    installed = dict(p.split("=", 1) for p in entry.packages)
    args = context.dockerfile_args(IMAGES / name / "Dockerfile")
    for package, arg in re.findall(r"\"?([a-z0-9][a-z0-9.+-]+)=\$\{(\w+)\}\"?", run_text(name)):
        if package in installed or entry.inputs.get("WITH_OLYMPIAD_ASY") != "no":
            assert installed.get(package) == args[arg], (
                f"{package} installed {installed.get(package)}"
            )
    assert entry.built_with["base"]["image_id"] == LOCK.base.image_id


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
    with pytest.raises(UserError, match="no `trixie` entry"):
        host_mirror("trixie", tmp_path)
