"""Builds take every input from the store and reach no network, checked without Docker: no
Dockerfile step fetches anything itself, every pinned input is a locked download, a locked build
runs with no network from a context that carries its closure and downloads, and a missing input
is named in one line with the command that fills it."""

from __future__ import annotations

import hashlib
import io
import re
import tarfile
from dataclasses import replace
from pathlib import Path

import pytest

from runner.images import build, downloads, reproduce
from runner.images.build import Arguments, BuildPlan, InputMissing
from runner.images.inputs import BuildInputs, resolve_inputs
from runner.images.lock import Download, Kit, load_lock
from runner.images.store import InputStore, gather

ROOT = Path(__file__).resolve().parent.parent
IMAGES = ROOT / "images"
LOCK = load_lock(ROOT / "manifests" / "images.lock.json")
# What reaches a network when a Dockerfile runs it itself (the store's helpers take the
# context's copy instead: build/files/, build/wheels/, build/repo/).
NETWORK = re.compile(
    r"\b(curl|wget|apt-get|apt|pip3?|git (fetch|clone|pull)|lake exe cache|lake update)\b(?!=)"
)
HELPER = re.compile(r"sh /tmp/build/[\w-]+")  # the store's helpers: apt-install, fetch, ...
HERMETIC = sorted(name for name in LOCK.images if name != "lean")
BUILD_INPUTS = BuildInputs("http://mirror.invalid/debian", "http://mirror.invalid/debian-security")


def run_text(name: str) -> str:
    joined = (IMAGES / name / "Dockerfile").read_text().replace("\\\n", " ")
    runs = "\n".join(line for line in joined.splitlines() if line.lstrip().startswith("RUN "))
    return HELPER.sub("", runs)


@pytest.mark.parametrize("name", HERMETIC)
def test_no_dockerfile_step_fetches_anything_itself(name):
    assert not NETWORK.search(run_text(name)), f"images/{name}/Dockerfile reaches a network"


@pytest.mark.xfail(strict=True, reason="lean's `lake build` clones Mathlib's dependencies")
def test_lean_fetches_nothing_itself_either():
    assert not NETWORK.search(run_text("lean")) and "lake build" not in run_text("lean")


@pytest.mark.parametrize("name", ["newclid", "alphageometry"])
def test_every_pinned_wheel_is_a_locked_download(name):
    pinned = downloads.requirements(IMAGES / name / "requirements.txt")
    wheels = {d.origin: d.sha256 for d in LOCK.images[name].downloads.values()}
    assert wheels == {
        f"pypi:{project}=={version}": sha256 for project, (version, sha256) in pinned.items()
    }
    assert all(d.kind == "wheel" and d.size for d in LOCK.images[name].downloads.values())


def test_coqchk_sources_are_a_locked_download_the_build_reads_from_the_context():
    rocq = LOCK.images["rocq"]
    (name, source), *_ = rocq.downloads.items()
    assert source.sha256 == rocq.inputs["COQ_SOURCE_SHA256"] and source.kind == "source"
    assert re.fullmatch(r"coq_.*\.orig\.tar\..*", name)
    assert source.origin == f"debian:pool/main/c/coq/{name}"
    script = (IMAGES / "rocq" / "checker-sources").read_text()
    assert "/tmp/build/files/coq_*.orig.tar.*" in script


@pytest.mark.parametrize("name", ["isabelle"])
def test_isabelle_takes_its_tarballs_from_the_store(name):
    entry = LOCK.images[name]
    sums = {d.sha256 for d in entry.downloads.values()}
    assert {entry.inputs["ISABELLE_SHA256"], entry.inputs["AFP_SHA256"]} == sums
    for file, download in entry.downloads.items():
        assert download.origin.endswith("/" + file)  # images/common/fetch reads build/files/


class RecordingDaemon:
    """Takes a build's arguments and context, answers one step."""

    def __init__(self) -> None:
        self.api = self
        self.kwargs: dict[str, object] = {}
        self.context: dict[str, bytes] = {}

    def build(self, **kwargs):
        self.kwargs = kwargs
        with tarfile.open(fileobj=kwargs["fileobj"]) as tar:
            for member in tar.getmembers():
                data = tar.extractfile(member)
                self.context[member.name] = data.read() if data else b""
        return iter([{"stream": "Step 1/1 : RUN true\n"}])


def newclid_plan(tmp_path: Path) -> tuple[BuildPlan, dict[str, Path]]:
    kit = Kit.open(ROOT / "manifests" / "images.lock.json")
    entry = kit.lock.images["newclid"]
    wheels = {}
    for file, download in entry.downloads.items():
        wheels[file] = tmp_path / file
        wheels[file].write_bytes(download.sha256.encode())
    repository = tmp_path / "repo"
    (repository / "dists" / "bookworm").mkdir(parents=True)
    (repository / "dists" / "bookworm" / "Release").write_text("Suite: bookworm\n")
    plan = BuildPlan.of(kit, "newclid", BUILD_INPUTS, log_dir=tmp_path / "logs")
    return replace(plan, repository=repository, downloads=wheels), wheels


def test_a_locked_build_runs_with_no_network_from_a_context_carrying_every_input(tmp_path):
    plan, wheels = newclid_plan(tmp_path)
    daemon = RecordingDaemon()
    arguments = Arguments("prooflock/base:bookworm", 0, {"PIP_INDEX_URL": "x"}, "raw:tag")
    (tmp_path / "logs").mkdir()

    build._docker_build(daemon, plan, arguments, tmp_path / "logs" / "n.log", io.StringIO())  # type: ignore[arg-type]

    assert daemon.kwargs["network_mode"] == "none"
    context = daemon.context
    assert (
        context["build/closure.list"] == b"deb [trusted=yes] file:/tmp/build/repo bookworm main\n"
    )
    assert context["build/repo/dists/bookworm/Release"] == b"Suite: bookworm\n"
    for file in wheels:
        assert context[f"build/wheels/{file}"] == wheels[file].read_bytes()
    newclid = next(f for f in wheels if f.startswith("newclid-"))
    index = context["build/wheels/simple/newclid/index.html"].decode()
    assert (
        f'href="../../{newclid}#sha256={LOCK.images["newclid"].downloads[newclid].sha256}"' in index
    )
    assert downloads.build_args(plan.entry.downloads) == {
        "PIP_INDEX_URL": "file:///tmp/build/wheels/simple"
    }


def test_a_build_without_a_locked_closure_keeps_the_network(tmp_path):
    plan, _ = newclid_plan(tmp_path)
    daemon = RecordingDaemon()
    (tmp_path / "logs").mkdir()
    arguments = Arguments("prooflock/base:bookworm", 0, {}, "raw:tag")

    build._docker_build(
        daemon, replace(plan, repository=None), arguments, tmp_path / "n.log", io.StringIO()
    )  # type: ignore[arg-type]

    assert daemon.kwargs["network_mode"] is None and "build/closure.list" not in daemon.context


def test_a_missing_input_is_named_in_one_line_with_the_command_that_fills_it(tmp_path, monkeypatch):
    monkeypatch.setenv("PROOFLOCK_CACHE_DIR", str(tmp_path / "cache"))
    kit = Kit.open(ROOT / "manifests" / "images.lock.json")
    toolchain = Download(
        kind="toolchain", sha256="0" * 64, size=5, origin="http://127.0.0.1:9/tool.tar.gz"
    )
    entry = kit.lock.images["isabelle"].model_copy(update={"downloads": {"tool.tar.gz": toolchain}})
    kit.lock.images["isabelle"] = entry
    plan = BuildPlan.of(kit, "isabelle", BUILD_INPUTS, log_dir=tmp_path)

    with pytest.raises(InputMissing) as raised:
        reproduce._gather_downloads(plan, InputStore(tmp_path / "store"), io.StringIO())

    message = str(raised.value)
    assert "\n" not in message
    assert message.startswith("isabelle: the input tool.tar.gz (toolchain, sha256 000000000000)")
    assert "`prooflock images vendor isabelle`" in message and "--input tool.tar.gz=PATH" in message


def test_an_input_given_by_hand_enters_the_store_only_with_the_locked_sha256(tmp_path):
    given = tmp_path / "tool.tar.gz"
    given.write_bytes(b"tools")
    right = Download(
        kind="toolchain",
        sha256=hashlib.sha256(b"tools").hexdigest(),
        origin="http://127.0.0.1:9/tool.tar.gz",
    )
    wrong = right.model_copy(update={"sha256": "1" * 64})
    store = InputStore(tmp_path / "store")
    source = downloads.GivenFiles({"tool.tar.gz": given})

    found = gather({"a": right, "b": wrong}, store, [source])

    assert found.paths == {"a": store.path(right)} and store.path(right).read_bytes() == b"tools"
    assert [m.package for m in found.missing] == ["b"]


@pytest.mark.parametrize("variable", ["PROOFLOCK_STORE", "PROOFLOCK_DEB_STORE"])
def test_the_remote_store_is_named_by_its_new_name_or_its_first(variable, monkeypatch):
    monkeypatch.delenv("PROOFLOCK_STORE", raising=False)
    monkeypatch.delenv("PROOFLOCK_DEB_STORE", raising=False)
    monkeypatch.setenv(variable, "s3://bucket/inputs")
    monkeypatch.setenv("PROOFLOCK_APT_MIRROR", "http://mirror.invalid/debian")

    inputs = resolve_inputs(LOCK.transport, suite="bookworm")

    assert inputs.store == "s3://bucket/inputs"
