"""The local backend's sandbox (bubblewrap) and memory verdicts (cgroups), seen from inside.

Given a local sandbox, a command can write only its work dir (/work) and a private /tmp, sees no
host home, no host /tmp and no network, leaves no process behind, and is reported out of memory
only when the kernel's cgroup says so. Without bubblewrap the backend says `unsandboxed`.
"""

from __future__ import annotations

import importlib.util
import os
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

from runner import run_itp
from runner.backends import cgroups, local
from runner.backends.local import LocalBackend
from runner.core.errors import InfraFailure
from runner.core.models import Limits, Verdict
from runner.core.settings import Settings
from tests.helpers import FRESH_LOCAL_HOL_LIGHT_BOOTS

LIMITS = Limits(timeout_s=30, memory_mb=512)


@pytest.fixture
def backend(tmp_path: Path) -> LocalBackend:
    notes: list[str] = []
    made = LocalBackend(Settings(cache_dir=tmp_path / "cache"), notify=notes.append)
    if made.info.isolation != "bubblewrap":
        pytest.skip(f"no local sandbox on this machine: {notes}")
    return made


@pytest.fixture
def box(backend: LocalBackend):
    with backend.sandbox("test", LIMITS) as sandbox:
        yield sandbox


def sh(box, script: str, timeout_s: float = 30):
    return box.run(["sh", "-c", script], timeout_s=timeout_s)


def token() -> str:
    return f"prooflock-test-{secrets.token_hex(6)}"


def processes_mentioning(word: str) -> list[str]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue
            if word in command:
                found.append(command)
    return found


# -- files -------------------------------------------------------------------------------------


def test_the_system_the_host_home_and_paths_outside_work_are_not_writable(box, tmp_path):
    name = token()
    places = [
        "/etc",
        "/usr",
        "/usr/local/bin",
        "/opt",
        "/var/lib",
        "/root",
        "/home",
        str(Path.home()),
        str(tmp_path),
        "/",
        "/srv",
        "/mnt",
    ]
    script = "; ".join(
        f'(echo x > "{place}/{name}") 2>/dev/null && echo "wrote {place}"' for place in places
    )
    done = sh(box, f"{script}; true")
    assert done.exit_code == 0
    assert b"wrote" not in done.stdout, done.text
    for place in places:
        assert not Path(place, name).exists(), place


def test_of_sys_only_the_huge_page_settings_and_the_oom_count_show_and_read_only(box):
    # glibc reads them to give a warm worker's heaps transparent huge pages (as in a container);
    # a warm server reads its cgroup's OOM-kill count where a container has it
    settings = Path("/sys/kernel/mm/transparent_hugepage/enabled")
    if not settings.exists():
        pytest.skip("this kernel has no transparent huge pages")
    done = sh(box, f"cat {settings}; ls /sys /sys/kernel; echo never > {settings} || echo refused")
    shown = ["fs", "kernel"] if box.confinement.cgroups is not None else ["kernel"]
    assert done.stdout.decode().splitlines() == [
        settings.read_text().strip(),
        "/sys:",
        *shown,
        "",
        "/sys/kernel:",
        "mm",
        "refused",
    ], done.text
    assert settings.read_text().strip() == done.stdout.decode().splitlines()[0]


def test_work_and_tmp_are_writable_and_vanish_afterwards(backend):
    name = token()
    with backend.sandbox("test", LIMITS) as box:
        first = sh(
            box, f"echo kept > /work/{name} && echo scratch > /tmp/{name} && pwd && echo $HOME"
        )
        assert first.exit_code == 0, first.text
        assert first.stdout.decode().split() == ["/work", "/work"]
        second = sh(box, f"cat /work/{name}; test -e /tmp/{name} && echo tmp-survived; true")
        assert second.stdout == b"kept\n"  # /tmp is private to each command
        assert box.read_file(name) == b"kept\n"
        host_dir = box.root
    assert not host_dir.exists()
    assert not Path("/tmp", name).exists()


def test_the_host_tmp_is_neither_visible_nor_touched(box):
    name = token()
    secret = Path(tempfile.gettempdir(), name)
    secret.write_text("host secret")
    try:
        done = sh(box, f"cat /tmp/{name} {secret} 2>&1; echo inside > /tmp/{name}; ls /tmp")
        assert b"host secret" not in done.stdout
        assert secret.read_text() == "host secret"
    finally:
        secret.unlink()


def test_the_kits_cache_is_hidden_even_inside_a_visible_directory(request):
    if not os.access("/var/cache", os.W_OK):
        pytest.skip("needs a writable /var/cache to put a cache in a visible directory")
    cache = Path("/var/cache", token())  # /var/cache is visible inside (read-only)
    cache.mkdir()
    request.addfinalizer(lambda: shutil.rmtree(cache))
    (cache / "results.db").write_text("earlier verdicts")
    made = LocalBackend(Settings(cache_dir=cache), notify=lambda _: None)
    if made.info.isolation != "bubblewrap":
        pytest.skip("no local sandbox on this machine")
    with made.sandbox("test", LIMITS) as box:
        done = sh(box, f"ls -A {cache}; cat {cache}/results.db; echo x > {cache}/new; true")
    assert done.stdout == b"" and b"earlier verdicts" not in done.stderr
    assert sorted(p.name for p in cache.iterdir()) == ["results.db"]


def test_the_kit_never_follows_links_the_sandbox_left(box):
    host_file = Path(tempfile.gettempdir(), token())
    done = sh(box, f"ln -s /etc/passwd stolen.txt; ln -s {host_file} Driver.v")
    assert done.exit_code == 0, done.text
    with pytest.raises(FileNotFoundError):
        box.read_file("stolen.txt")
    box.write_file("Driver.v", b"Require Artifact.\n")
    assert not host_file.exists()
    assert box.read_file("Driver.v") == b"Require Artifact.\n"


def test_a_fifo_the_sandbox_left_is_not_read_and_never_waited_on(box):
    done = sh(box, "mkfifo boot.log")
    assert done.exit_code == 0, done.text
    outcome: list[object] = []

    def read() -> None:
        try:
            outcome.append(box.read_file("boot.log"))
        except FileNotFoundError as exc:
            outcome.append(exc)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(timeout=10)
    assert not reader.is_alive(), "read_file waited on a fifo"
    assert isinstance(outcome[0], FileNotFoundError)


def test_commands_run_without_privileges(box):
    done = sh(box, "id -u; grep -E '^(CapEff|NoNewPrivs)' /proc/self/status; cat /etc/shadow")
    lines = done.stdout.decode().split("\n")
    assert lines[0] != "0"
    assert "CapEff:\t0000000000000000" in lines
    assert b"Permission denied" in done.stderr


# -- network and processes ---------------------------------------------------------------------


def test_there_is_no_network_but_loopback(box):
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        done = box.run(
            [
                "python3",
                "-c",
                "import socket, sys\n"
                "print(sorted(n for _, n in socket.if_nameindex()))\n"
                f"try: socket.create_connection(('127.0.0.1', {port}), timeout=3)\n"
                "except OSError: sys.exit(7)\n",
            ],
            timeout_s=30,
        )
    assert done.stdout.strip() == b"['lo']", done.text
    assert done.exit_code == 7, done.text


def test_processes_left_behind_are_killed(box):
    mark = f"{secrets.randbelow(10**6) + 10**6}.5"
    done = sh(box, f"(setsid sleep {mark} &) ; (sleep {mark} &) ; echo started")
    assert done.stdout == b"started\n"
    assert processes_mentioning(f"sleep {mark}") == []


def test_a_loop_times_out(box):
    clock = time.monotonic()
    done = sh(box, "while :; do :; done", timeout_s=1)
    assert done.timed_out and done.exit_code is None
    assert time.monotonic() - clock < 10


def test_a_server_outlives_the_thread_that_started_it(box):
    channels = []
    starter = threading.Thread(
        target=lambda: channels.append(
            box.spawn(
                ["sh", "-c", "echo ready $(pwd) $(id -u); while read x; do echo got $x; done"]
            )
        )
    )
    starter.start()
    starter.join()
    [channel] = channels
    try:
        ready = channel.read_until(b"\n", 30).split()
        assert ready[:2] == [b"ready", b"/work"] and ready[2] != b"0"
        time.sleep(0.3)  # bwrap's --die-with-parent would fire here if tied to that thread
        channel.send(b"ping\n")
        assert channel.read_until(b"\n", 30) == b"got ping\n"
    finally:
        channel.close()
    assert not channel.alive()


# -- memory --------------------------------------------------------------------------------------


@pytest.fixture
def cgroup_backend(backend: LocalBackend) -> LocalBackend:
    if backend.confinement.cgroups is None:
        pytest.skip("no writable memory cgroup on this machine (the limit is RLIMIT_AS)")
    return backend


def our_cgroups(backend: LocalBackend) -> list[str]:
    assert backend.confinement.cgroups is not None
    prefix = f"{cgroups.PREFIX}-{os.getpid()}-"
    base = backend.confinement.cgroups.base
    return [p.name for p in base.iterdir() if p.name.startswith(prefix) and p.is_dir()]


def test_a_memory_hog_is_out_of_memory_by_the_cgroups_word(cgroup_backend):
    assert cgroup_backend.info.tools["memory_limit"].startswith("cgroup v")
    with cgroup_backend.sandbox("test", Limits(timeout_s=60, memory_mb=200)) as box:
        done = box.run(["python3", "-c", "b = bytearray(1 << 30); print(len(b))"], timeout_s=60)
    assert done.out_of_memory, done
    assert done.signal == 9 and not done.ok


def test_printing_out_of_memory_is_not_running_out_of_memory(cgroup_backend):
    with cgroup_backend.sandbox("test", Limits(timeout_s=60, memory_mb=200)) as box:
        done = sh(box, "echo 'Out of memory' >&2; echo 'Fatal error: out of memory.'; exit 2")
        killed = sh(box, "kill -9 $$")
    assert (done.exit_code, done.out_of_memory) == (2, False)
    assert (killed.signal, killed.out_of_memory) == (9, False)


def test_every_cgroup_is_removed_after_its_command_or_server(cgroup_backend):
    # Servers other tests share (a HOL Light worker, say) keep their cgroups: not this test's.
    others = set(our_cgroups(cgroup_backend))
    with cgroup_backend.sandbox("test", LIMITS) as box:
        sh(box, "(setsid sleep 100 &); true")
        sh(box, "while :; do :; done", timeout_s=0.5)
        channel = box.spawn(["cat"])
        assert len(set(our_cgroups(cgroup_backend)) - others) == 1
        channel.close()
    assert set(our_cgroups(cgroup_backend)) - others == set()


def test_cgroups_of_a_kit_that_died_are_removed_by_the_next(cgroup_backend):
    dead = subprocess.Popen(["true"])
    dead.wait()
    assert cgroup_backend.confinement.cgroups is not None
    stale = cgroup_backend.confinement.cgroups.base / f"{cgroups.PREFIX}-{dead.pid}-7"
    stale.mkdir()
    try:
        hierarchy, why = cgroups.find_hierarchy()
        assert hierarchy is not None, why
        assert not stale.exists()
    finally:
        if stale.exists():
            stale.rmdir()


def test_a_kit_that_exits_without_closing_its_server_leaves_nothing(cgroup_backend, tmp_path):
    mark = f"{secrets.randbelow(10**6) + 10**6}.25"
    script = (
        "import os\n"
        "from runner.backends.base import Limits\n"
        "from runner.backends.local import LocalBackend\n"
        "from runner.core.settings import Settings\n"
        f"backend = LocalBackend(Settings(cache_dir={str(tmp_path)!r}))\n"
        "opened = backend.sandbox('test', Limits(timeout_s=30, memory_mb=256))\n"
        "box = opened.__enter__()\n"
        f"box.spawn(['sleep', '{mark}'])\n"
        "print(os.getpid(), box.root, backend.confinement.cgroups.base)\n"
    )
    shared = os.stat(tempfile.gettempdir()).st_mode
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    pid, root, base = done.stdout.split()
    assert not Path(root).exists()
    assert os.stat(tempfile.gettempdir()).st_mode == shared  # only the work dir was removed
    assert list(Path(base).glob(f"{cgroups.PREFIX}-{pid}-*")) == []
    assert processes_mentioning(f"sleep {mark}") == []


# -- without bubblewrap --------------------------------------------------------------------------


def test_without_bubblewrap_checks_are_labelled_unsandboxed_and_said_once(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))  # no bwrap on it
    monkeypatch.setattr(local, "_warned", set())
    notes: list[str] = []
    first = LocalBackend(Settings(cache_dir=tmp_path), notify=notes.append)
    LocalBackend(Settings(cache_dir=tmp_path), notify=notes.append)
    assert first.info.isolation == "unsandboxed"
    assert "sandbox" not in first.info.tools
    [note] = notes
    assert "unsandboxed" in note and "bwrap" in note


def test_the_setting_off_forces_unsandboxed_and_require_refuses(tmp_path, monkeypatch):
    monkeypatch.setattr(local, "_warned", set())
    monkeypatch.setenv("PROOFLOCK_LOCAL_SANDBOX", "off")
    notes: list[str] = []
    off = LocalBackend(Settings(cache_dir=tmp_path), notify=notes.append)
    assert off.info.isolation == "unsandboxed"
    assert len(notes) == 1 and "PROOFLOCK_LOCAL_SANDBOX=off" in notes[0]
    with off.sandbox("test", LIMITS) as box:
        assert sh(box, "echo $HOME").stdout.decode().strip() == str(box.root)

    monkeypatch.setenv("PROOFLOCK_LOCAL_SANDBOX", "require")
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    with pytest.raises(InfraFailure) as refused:
        LocalBackend(Settings(cache_dir=tmp_path), notify=notes.append)
    assert "\n" not in str(refused.value)
    assert "PROOFLOCK_LOCAL_SANDBOX=require" in str(refused.value)


@pytest.mark.slow
def test_require_without_bubblewrap_stops_the_cli_in_one_line(cli, tmp_path):
    (tmp_path / "one.v").write_text("Lemma t : True. Proof. exact I. Qed.\n")
    done = cli(
        "check",
        "--prover",
        "rocq",
        "one.v",
        env={"PROOFLOCK_LOCAL_SANDBOX": "require", "PATH": str(tmp_path / "empty")},
    )
    assert done.returncode == 3, done.stderr
    assert done.stderr.count("\n") == 1
    assert "PROOFLOCK_LOCAL_SANDBOX=require" in done.stderr


def test_records_say_unsandboxed_when_the_sandbox_is_off(settings, monkeypatch, capfd):
    monkeypatch.setenv("PROOFLOCK_LOCAL_SANDBOX", "off")
    monkeypatch.setattr(local, "_warned", set())
    source = "Lemma t : True. Proof. exact I. Qed.\n"
    result = run_itp("rocq", source, settings=settings.model_copy(update={"cache": False}))
    assert result.verdict is Verdict.PASS, result.diagnostics
    assert result.provenance.isolation == "unsandboxed"
    assert result.provenance.tools["memory_limit"] in ("cgroup v1", "cgroup v2", "rlimit_as")
    assert "local checks run unsandboxed" in capfd.readouterr().err


# -- through the real checker --------------------------------------------------------------------


@pytest.mark.slow
def test_rocq_redirect_cannot_create_a_host_file(backend, settings):
    target = Path(tempfile.gettempdir(), token())
    source = f'Redirect "{target}" Print nat.\nLemma t : True. Proof. exact I. Qed.\n'
    result = run_itp("rocq", source, settings=settings.model_copy(update={"cache": False}))
    assert not target.exists() and not Path(f"{target}.out").exists()
    assert result.provenance.isolation == "bubblewrap"
    assert result.verdict is not Verdict.INFRA_ERROR, result.diagnostics


@pytest.mark.slow
def test_a_normal_user_gets_the_same_sandbox_through_a_user_namespace(request):
    """As nobody (the kit not root): bwrap makes a user namespace; the same walls hold."""
    setpriv, python = shutil.which("setpriv"), "/usr/bin/python3"
    if os.geteuid() != 0 or setpriv is None or not os.access(python, os.X_OK):
        pytest.skip("needs root (to become nobody), setpriv and /usr/bin/python3")
    module = importlib.util.find_spec("runner.backends.bubblewrap")
    assert module is not None and module.origin is not None
    work = Path(tempfile.mkdtemp(prefix="prooflock-user-"))  # reachable by nobody
    os.chown(work, 65534, 65534)
    request.addfinalizer(lambda: shutil.rmtree(work))
    script = f"""
import importlib.util, os, subprocess, sys
spec = importlib.util.spec_from_file_location("bubblewrap", {module.origin!r})
bw = sys.modules["bubblewrap"] = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bw)
wrapper, why = bw.locate([])
if wrapper is None:
    sys.exit("no sandbox: " + why)
r, w = os.pipe()
check = "id -u; pwd; for p in /etc /usr /root /; do touch $p/x 2>/dev/null && echo wrote $p; done; unshare -U true 2>/dev/null && echo nested-userns; echo ok > /work/out"
argv = wrapper.command(["sh", "-c", check], work_dir={str(work)!r}, tmpfs_mb=16, status_fd=w)
done = subprocess.run(argv, pass_fds=(w,), capture_output=True, text=True)
print(done.stdout, done.stderr, sep="")
"""
    done = subprocess.run(
        [setpriv, "--reuid=65534", "--regid=65534", "--clear-groups", python, "-c", script],
        capture_output=True,
        text=True,
        timeout=120,
        cwd="/",
        env={"PATH": "/usr/bin:/bin", "HOME": "/nonexistent"},
    )
    if "no sandbox" in done.stderr and "namespace" in done.stderr:
        pytest.skip(f"unprivileged user namespaces are not allowed here: {done.stderr.strip()}")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.split()
    assert lines[:2] == [str(1000), "/work"], done.stdout
    assert "wrote" not in done.stdout and "nested-userns" not in done.stdout
    assert (work / "out").read_text() == "ok\n"


def test_the_provers_installed_here_run_in_the_sandbox(box):
    probes = {
        "python3": "python3 -c 'import sys; print(sys.prefix)'",
        "coqc": "coqc --version",
        "asy": "asy -version",
        "gs": "gs --version",
        "dvisvgm": "dvisvgm --version",
        "/usr/share/hol-light/ocaml": "/usr/share/hol-light/ocaml -version",
    }
    for tool, probe in probes.items():
        if shutil.which(tool) is not None:
            done = sh(box, probe)
            assert done.exit_code == 0, (tool, done.text)


def test_mounts_a_container_runtime_adds_and_drops_never_stop_a_command(tmp_path):
    """As docker does under /var/lib/docker while its containers start and stop: CI ran local
    checks beside docker ones, and bwrap failed to remount a vanished overlay."""
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("mounting needs root")
    runtime = Path("/var/lib") / token()
    runtime.mkdir(mode=0o710)  # docker's own mode: only root may enter
    layers = [runtime / f"layer{i}" for i in range(4)]
    for layer in layers:
        layer.mkdir()
    stop = threading.Event()

    def churn() -> None:
        while not stop.is_set():
            for layer in layers:
                subprocess.run(["mount", "-t", "tmpfs", "none", str(layer)], check=False)
            for layer in layers:
                subprocess.run(["umount", "-l", str(layer)], check=False)

    local._detect.cache_clear()  # the sandbox's view is decided with the runtime's dir present
    made = LocalBackend(Settings(cache_dir=tmp_path / "cache"), notify=lambda _: None)
    if made.info.isolation != "bubblewrap":
        pytest.skip("no local sandbox on this machine")
    churner = threading.Thread(target=churn, daemon=True)
    churner.start()
    try:
        with made.sandbox("test", LIMITS) as sandbox:
            codes = [sandbox.run(["ls", "/var/lib"], timeout_s=30).exit_code for _ in range(40)]
            listing = sandbox.run(["ls", "/var/lib"], timeout_s=30).stdout
    finally:
        stop.set()
        churner.join()
        for layer in layers:
            subprocess.run(["umount", "-l", str(layer)], check=False, capture_output=True)
        shutil.rmtree(runtime, ignore_errors=True)
        local._detect.cache_clear()
    assert codes == [0] * 40
    assert b"dpkg" in listing and runtime.name.encode() not in listing


def test_the_environment_probes_say_each_fact_and_name_a_failing_command(backend):
    probe = {"shell": ["sh", "-c", "echo one"], "other": ["sh", "-c", "echo two"]}
    assert backend.environment("test", probe) == {"kind": "local", "shell": "one", "other": "two"}
    broken = {**probe, "broken": ["sh", "-c", "echo gone >&2; exit 3"]}
    with pytest.raises(InfraFailure, match=r"`sh -c echo gone >&2; exit 3` exited 3: gone"):
        backend.environment("test", broken)


# -- unsandboxed warm workers --------------------------------------------------------------------

# Each file writes `{path}` in the host's /tmp while it is checked.
UNSANDBOXED_WORKERS = [
    pytest.param(
        "rocq",
        "a.v",
        'Redirect "{path}" Print nat.\nLemma t : True. Proof. exact I. Qed.\n',
        id="rocq",
    ),
    pytest.param(
        "hol-light",
        "a.ml",
        'close_out (open_out "{path}.out");;\nlet t = ARITH_RULE `1 + 1 = 2`;;\n',
        id="hol-light",
        marks=FRESH_LOCAL_HOL_LIGHT_BOOTS,
    ),
]


def _worker_ids(result) -> list[str]:
    extra = result.provenance.extra
    return [
        server["worker_id"] for server in extra.get("servers", [extra]) if "worker_id" in server
    ]


def _shared_memory_ids() -> set[str]:
    rows = Path("/proc/sysvipc/shm").read_text().splitlines()[1:]
    return {row.split()[1] for row in rows}


@pytest.mark.slow
@pytest.mark.parametrize(("prover", "name", "text"), UNSANDBOXED_WORKERS)
def test_an_unsandboxed_warm_worker_leaves_the_hosts_tmp_and_shared_memory_alone(
    prover, name, text, settings, monkeypatch
):
    """Unsandboxed, /tmp and System V IPC are the host's: a parallel check's work dir is there, and
    other programs' files and segments. A warm worker empties only its own work dir between checks.

    The file a check writes in /tmp stands in for one another program makes meanwhile; the segment
    made between checks, for another program's shared memory.
    """
    import ctypes  # noqa: PLC0415

    from runner import Checker  # noqa: PLC0415
    from runner.core.models import CheckRequest  # noqa: PLC0415

    monkeypatch.setenv("PROOFLOCK_LOCAL_SANDBOX", "off")
    libc = ctypes.CDLL(None, use_errno=True)
    path = Path(tempfile.gettempdir(), f"prooflock-host-{token()}")
    written = Path(f"{path}.out")
    request = CheckRequest(prover=prover, name=name, content=text.format(path=path))
    segment = -1
    try:
        with Checker(settings.model_copy(update={"cache": False, "timeout": 300})) as checker:
            first = checker.check_one(request)
            assert first.verdict is Verdict.PASS, first.diagnostics
            assert written.is_file()
            segment = libc.shmget(0, 4096, 0o1600)  # IPC_PRIVATE, IPC_CREAT | 0600
            assert segment >= 0, os.strerror(ctypes.get_errno())
            second = checker.check_one(request)
        assert second.verdict is Verdict.PASS, second.diagnostics
        assert str(segment) in _shared_memory_ids()
        # Host files changing beside it neither confuse nor retire it: the same worker checks on.
        assert _worker_ids(first) == _worker_ids(second) != []
    finally:
        if segment >= 0:
            libc.shmctl(segment, 0, None)  # IPC_RMID
        written.unlink(missing_ok=True)
