"""Builds take every input from the store and reach no network, checked without Docker: no
Dockerfile step fetches anything itself, every pinned input is a locked download, a locked build
runs with no network from a context that carries its closure and downloads, and a missing input
is named in one line with the command that fills it."""

from __future__ import annotations

import hashlib
import io
import re
import subprocess
import tarfile
from dataclasses import replace
from pathlib import Path

import pytest

from runner.core.settings import Settings
from runner.images import build, downloads, reproduce, vendor
from runner.images.build import Arguments, BuildPlan, InputMissing
from runner.images.inputs import BuildInputs, resolve_inputs
from runner.images.lock import Download, Kit, load_lock, save_lock
from runner.images.store import InputStore, gather
from runner.provers.lean import recheck

ROOT = Path(__file__).resolve().parent.parent
IMAGES = ROOT / "images"
LOCK = load_lock(ROOT / "manifests" / "images.lock.json")
# What reaches a network when a Dockerfile runs it itself (the store's helpers take the
# context's copy instead: build/files/, build/wheels/, build/repo/).
NETWORK = re.compile(
    r"\b(curl|wget|apt-get|apt|pip3?|git (fetch|clone|pull)|lake exe cache|lake update)\b(?!=)"
)
HELPER = re.compile(r"sh /tmp/build/[\w-]+")  # the store's helpers: apt-install, fetch, ...
HERMETIC = sorted(LOCK.images)
BUILD_INPUTS = BuildInputs(
    "http://mirror.invalid/debian", "http://mirror.invalid/debian-security", Path("/nonexistent")
)


def run_text(name: str) -> str:
    joined = (IMAGES / name / "Dockerfile").read_text().replace("\\\n", " ")
    runs = "\n".join(line for line in joined.splitlines() if line.lstrip().startswith("RUN "))
    return HELPER.sub("", runs)


@pytest.mark.parametrize("name", HERMETIC)
def test_no_dockerfile_step_fetches_anything_itself(name):
    assert not NETWORK.search(run_text(name)), f"images/{name}/Dockerfile reaches a network"


@pytest.mark.parametrize("name", ["lean", "alphageometry"])
def test_every_file_the_build_reads_from_the_context_is_a_locked_download(name):
    read = set(
        re.findall(r"/tmp/build/files/([\w.${}-]+)", (IMAGES / name / "Dockerfile").read_text())
    )
    entry = LOCK.images[name]
    wanted = {
        file.replace("${LEAN_VERSION}", entry.inputs.get("LEAN_VERSION", "")) for file in read
    }
    for script in ("lake-packages", "git-export"):  # bundles by project name
        if (IMAGES / name / script).is_file():
            wanted |= {f for f in entry.downloads if f.endswith(".bundle")}
    assert wanted and wanted <= set(entry.downloads)


@pytest.mark.parametrize("name", ["newclid", "alphageometry"])
def test_every_pinned_wheel_is_a_locked_download(name):
    pinned = downloads.requirements(IMAGES / name / "requirements.txt")
    wheels = [d for d in LOCK.images[name].downloads.values() if d.kind == "wheel"]
    assert {d.origin: d.sha256 for d in wheels} == {
        f"pypi:{project}=={version}": sha256 for project, (version, sha256) in pinned.items()
    }
    assert all(d.size for d in wheels)


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
        kind="toolchain", sha256="1" * 64, size=5, origin="http://127.0.0.1:9/tool.tar.gz"
    )
    entry = kit.lock.images["isabelle"].model_copy(update={"downloads": {"tool.tar.gz": toolchain}})
    kit.lock.images["isabelle"] = entry
    plan = BuildPlan.of(kit, "isabelle", BUILD_INPUTS, log_dir=tmp_path)

    with pytest.raises(InputMissing) as raised:
        reproduce._gather_downloads(plan, InputStore(tmp_path / "store"), io.StringIO())

    message = str(raised.value)
    assert "\n" not in message
    assert message.startswith("isabelle: the input tool.tar.gz (toolchain, sha256 111111111111)")
    assert "`prooflock images vendor isabelle`" in message and "--input tool.tar.gz=PATH" in message


def test_the_lean_build_refuses_in_one_line_until_vendor_pins_its_inputs(tmp_path, monkeypatch):
    monkeypatch.setenv("PROOFLOCK_CACHE_DIR", str(tmp_path / "cache"))
    kit = Kit.open(ROOT / "manifests" / "images.lock.json")
    plan = BuildPlan.of(kit, "lean", BUILD_INPUTS, log_dir=tmp_path)

    with pytest.raises(InputMissing) as raised:
        reproduce._gather_downloads(plan, InputStore(tmp_path / "store"), io.StringIO())

    message = str(raised.value)
    assert "\n" not in message
    assert re.match(r"lean: the input [\w.-]+ \((toolchain|git-bundle)\)", message)
    assert "has no sha256 in the lock yet" in message
    assert "run `prooflock images vendor lean` where https://github.com answers" in message


def test_ag4masses_comes_from_the_store_or_its_line_names_the_vendor_command(tmp_path, monkeypatch):
    monkeypatch.setenv("PROOFLOCK_CACHE_DIR", str(tmp_path / "cache"))
    kit = Kit.open(ROOT / "manifests" / "images.lock.json")
    entry = kit.lock.images["alphageometry"]
    bundle = entry.downloads["ag4masses.bundle"]
    assert bundle.kind == "git-bundle"
    assert bundle.origin == (
        f"git:{entry.inputs['AG4MASSES_REPOSITORY']}@{entry.inputs['AG4MASSES_COMMIT']}:alphageometry"
    )
    # only the bundle, from a repository that is not there (this test reaches no network)
    gone = bundle.model_copy(update={"origin": f"git:file://{tmp_path}/gone.git@{'f' * 40}:x"})
    kit.lock.images["alphageometry"] = entry.model_copy(
        update={"downloads": {"ag4masses.bundle": gone}}
    )
    plan = BuildPlan.of(kit, "alphageometry", BUILD_INPUTS, log_dir=tmp_path)
    store = InputStore(tmp_path / "store")

    with pytest.raises(InputMissing) as raised:
        reproduce._gather_downloads(plan, store, io.StringIO())

    message = str(raised.value)
    assert "\n" not in message
    assert message.startswith(
        f"alphageometry: the input ag4masses.bundle (git-bundle, sha256 {bundle.sha256[:12]})"
    )
    assert "`prooflock images vendor alphageometry`" in message
    assert "--input ag4masses.bundle=PATH" in message

    copy = tmp_path / "ag4masses.bundle"
    copy.write_bytes(b"a bundle")
    stored = gone.model_copy(update={"sha256": hashlib.sha256(b"a bundle").hexdigest(), "size": 8})
    store.put(copy, stored)
    kit.lock.images["alphageometry"].downloads["ag4masses.bundle"] = stored
    plan = BuildPlan.of(kit, "alphageometry", BUILD_INPUTS, log_dir=tmp_path)
    assert reproduce._gather_downloads(plan, store, io.StringIO()) == {
        "ag4masses.bundle": store.path(stored)
    }


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

    inputs = resolve_inputs(LOCK.transport, Settings(), suite="bookworm")

    assert inputs.store == "s3://bucket/inputs"


def git_project(folder: Path) -> str:
    """A small git repository with a Lean project's lake-manifest.json, one commit tagged v1."""
    files = {
        "lake-manifest.json": '{"packages": [{"type": "git", "name": "dep", "rev": "'
        + "a" * 40
        + '", "url": "https://example.invalid/dep"}]}',
        "src/Main.lean": "def main : IO Unit := pure ()\n",
        "logs/huge.log": "not wanted\n",
    }
    for name, text in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text)
    env = ["-c", "user.name=t", "-c", "user.email=t@t", "-C", str(folder)]
    for argv in (["init", "-q"], ["add", "."], ["commit", "-qm", "one"], ["tag", "v1"]):
        subprocess.run(["git", *(env if argv[0] != "init" else []), *argv], check=True, cwd=folder)
    return subprocess.run(
        ["git", "-C", str(folder), "rev-parse", "HEAD"], capture_output=True, text=True, check=True
    ).stdout.strip()


def test_a_git_bundle_is_the_same_bytes_from_any_clone_and_holds_only_its_folder(tmp_path):
    origin = tmp_path / "origin"
    origin.mkdir()
    commit = git_project(origin)
    clone = tmp_path / "clone.git"
    subprocess.run(["git", "init", "-q", "--bare", str(clone)], check=True)
    fetch = ["git", "-C", str(clone), "fetch", "-q", "--depth", "1", f"file://{origin}", commit]
    subprocess.run(fetch, check=True)

    downloads.bundle_folder(origin, commit, "src", tmp_path / "a.bundle")
    downloads.bundle_folder(clone, commit, "src", tmp_path / "b.bundle")

    assert (tmp_path / "a.bundle").read_bytes() == (tmp_path / "b.bundle").read_bytes()
    unpacked = tmp_path / "unpacked.git"
    subprocess.run(["git", "init", "-q", "--bare", str(unpacked)], check=True)
    git = ["git", "-C", str(unpacked)]
    subprocess.run([*git, "bundle", "unbundle", str(tmp_path / "a.bundle")], check=True)
    shown = subprocess.run([*git, "show", f"{commit}:src/Main.lean"], capture_output=True)
    assert shown.stdout == b"def main : IO Unit := pure ()\n"
    assert subprocess.run([*git, "cat-file", "-e", f"{commit}:logs/huge.log"]).returncode != 0


def test_vendor_pins_an_unpinned_input_on_first_use_and_writes_the_lock(tmp_path, monkeypatch):
    monkeypatch.setenv("PROOFLOCK_CACHE_DIR", str(tmp_path / "cache"))
    origin = tmp_path / "origin"
    origin.mkdir()
    commit = git_project(origin)
    lock_path = tmp_path / "manifests" / "images.lock.json"
    lock_path.parent.mkdir()
    lock = load_lock(ROOT / "manifests" / "images.lock.json")
    unpinned = Download(
        kind="git-bundle", sha256=downloads.UNPINNED, origin=f"git:file://{origin}@v1:"
    )
    lock.images["lean"].downloads = {"proj.bundle": unpinned}
    save_lock(lock, lock_path)
    kit = Kit.open(lock_path)
    refused = downloads.unpinned_line("lean", kit.lock.images["lean"])
    assert refused is not None and "\n" not in refused
    assert refused.startswith("lean: the input proj.bundle (git-bundle) has no sha256 in the lock")
    assert "`prooflock images vendor lean`" in refused

    failed, pinned_now = vendor.pin_on_first_use(kit, "lean", InputStore(Settings().cache_dir))

    written = load_lock(lock_path).images["lean"].downloads
    pinned = written["proj.bundle"]
    assert pinned.origin == f"git:file://{origin}@{commit}:" and pinned.sha256 != downloads.UNPINNED
    assert InputStore(Settings().cache_dir).has(pinned)
    # the project's lake-manifest package comes with it, unpinned until it answers
    dep = written["proj-lake-dep.bundle"]
    assert dep.origin == f"git:https://example.invalid/dep.git@{'a' * 40}:"
    assert (
        pinned_now == 1
        and dep.sha256 == downloads.UNPINNED
        and failed
        == [f"proj-lake-dep.bundle (git-bundle): unpinned, and {dep.origin} did not answer"]
    )


def test_the_lean_images_recheck_runs_comparator_on_the_project_with_the_images_mathlib(tmp_path):
    """`lean-mathlib recheck config.json` (runner/provers/lean/recheck.py's COMMAND), as the
    Dockerfile writes it, run with a double for `lake` (Lean cannot run here)."""
    text = (IMAGES / "lean" / "Dockerfile").read_text().replace("\\\n", " ")
    script = re.search(r"(printf '%s\\n' '#!/bin/sh'.*?) > /usr/local/bin/lean-mathlib", text)
    assert script is not None
    opt = tmp_path / "opt"
    (opt / "mathlib").mkdir(parents=True)
    (opt / "mathlib" / "LEAN_PATH").write_text("/opt/mathlib/.lake/build/lib/lean")
    (opt / "mathlib" / "lean-toolchain").write_text("leanprover/lean4:v4.35.0\n")
    wrapper = subprocess.run(["sh", "-c", script[1]], capture_output=True, text=True, check=True)
    (tmp_path / "lean-mathlib").write_text(wrapper.stdout.replace("/opt/", f"{opt}/"))
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "lake").write_text(  # the double: says how it was called
        '#!/bin/sh\necho "double: lake $* LANDRUN=$COMPARATOR_LANDRUN '
        'EXPORT=$COMPARATOR_LEAN4EXPORT"\n'
    )
    (bin_dir / "lake").chmod(0o755)
    work = tmp_path / "work"
    work.mkdir()

    done = subprocess.run(
        ["sh", str(tmp_path / "lean-mathlib"), *recheck.COMMAND[1:]],
        cwd=work,
        capture_output=True,
        text=True,
        env={"PATH": f"{bin_dir}:/usr/bin:/bin"},
    )

    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [
        "double:",
        "lake",
        "env",
        f"{opt}/comparator/.lake/build/bin/comparator",
        recheck.CONFIG,
        f"LANDRUN={opt}/comparator/no-landrun",
        f"EXPORT={opt}/comparator/.lake/packages/lean4export/.lake/build/bin/lean4export",
    ]
    lakefile = (work / "lakefile.toml").read_text()
    assert f'path = "{opt}/mathlib"' in lakefile
    for module in (recheck.CHALLENGE_MODULE, recheck.SOLUTION_MODULE):
        assert f'[[lean_lib]]\nname = "{module}"' in lakefile
    assert (work / "lean-toolchain").read_text() == "leanprover/lean4:v4.35.0\n"
