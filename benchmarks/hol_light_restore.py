"""HOL Light's first check from a checkpoint: the booted toplevel dumped with CRIU and restored,
against booting it. Issue 22 asks for the ways to a first check in seconds to be measured; this
is the one that works here. A measurement, not the kit's path: no check of the kit uses it yet.

    python -m benchmarks hol_light_restore

In a container of the 3.0 line's image (Debian trixie: HOL Light 3.0.0 on OCaml 5.3), with
Debian trixie's CRIU (4.x; bookworm's 3.17 cannot read this kernel's vDSO layout and stops at
its feature check):
1. boot `ocaml-hol -init hol.ml` until it answers, then `criu dump --leave-running` it;
2. cold: the small proofs below (three of them failing) and HOL Light's own core-only
   100-theorems files (`--quick`: two), one after another in that booted toplevel;
3. restored: the host's page cache dropped (when this runs as root), `criu restore` of the
   dump, then the first proof (the latency a first check would see), three times; the first
   restore also runs every proof.
The verdicts must be identical: each proof's toplevel output, cold against restored, byte for
byte. CRIU needs capabilities a container lacks by default (SYS_ADMIN, SYS_PTRACE, NET_ADMIN,
SYS_TIME; seccomp and AppArmor unconfined); `--privileged` asks for more than this machine grants.
CRIU's packages come from Debian's archive as this machine's apt reaches it (apt-get download,
kept under the cache dir).
"""

from __future__ import annotations

import os
import shlex
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.hol_light import CORE_ONLY, QUICK_HUNDRED, SMALL_PROOFS
from benchmarks.table import Row
from runner.core.errors import UserError
from runner.core.settings import Settings
from runner.images.inputs import HOST, BuildInputSettings, host_mirror
from runner.images.lock import load_lock

IMAGE = "hol-light-3.0"
SUITE = "trixie"
# criu and what it needs beyond the image (a trixie base with HOL Light and OCaml)
CRIU_PACKAGES = [
    "criu",
    "libprotobuf-c1",
    "libnl-3-200",
    "libnet1",
    "libbsd0",
    "libmd0",
    "libnftables1",
    "libnftnl11",
    "libmnl0",
    "libjansson4",
    "libxtables12",
    "libedit2",
    "libgnutls30t64",
    "libp11-kit0",
    "libidn2-0",
    "libunistring5",
    "libtasn1-6",
    "libffi8",
    "libhogweed6t64",
    "libnettle8t64",
    "libgmp10",
    "libuuid1",
    "libcap2",
]
CAPS = ("SYS_ADMIN", "SYS_PTRACE", "NET_ADMIN", "SYS_TIME")
PROOFS = {
    **SMALL_PROOFS,
    "wrong_sum.ml": "let X = ARITH_RULE `2 + 2 = 5`;;",
    "failing_tactic.ml": "let X = prove(`!n. n + 1 = n`, ARITH_TAC);;",
    "unbound.ml": "let X = prove(`T`, NO_SUCH_TAC);;",
}
IMAGE_HUNDRED = "/usr/share/hol-light/100"  # the image's own copy of HOL Light's 100 theorems


def proofs(quick: bool) -> dict[str, str]:
    """The small proofs, then HOL Light's own core-only 100-theorems files (the image's)."""
    hundred = QUICK_HUNDRED if quick else CORE_ONLY
    return {**PROOFS, **{name: f'#use "{IMAGE_HUNDRED}/{name}";;' for name in hundred}}


RESTORES = 3
BOOT_TIMEOUT_S = 900
STEP_TIMEOUT_S = 900  # every proof at once, 100-theorems files included

# The steps, each one `docker exec` (timings are taken inside, around the step's own work).
# /b is the bench's directory: proofs/, the debs, the outputs copied out.
BOOT = r"""
set -e
dpkg -i --force-depends /b/debs/*.deb >/dev/null 2>&1 || true
criu --version | sed -n 's/^Version: /CRIU /p' >/b/criu.version
mkdir -p /w /ck && cd /w && mkfifo in
# the fifo's holder: the toplevel never reads end-of-file between steps
setsid sleep infinity <>/w/in >/dev/null 2>&1 &
t0=$(date +%s%N)
setsid /usr/share/hol-light/ocaml-hol -I /usr/share/hol-light \
  -init /usr/share/hol-light/hol.ml </w/in >/w/out 2>&1 &
echo $! >/w/pid
echo 'print_string "@@BOOTED\n";;' >/w/in
until grep -q '@@BOOTED' /w/out; do
  sleep 0.2; kill -0 "$(cat /w/pid)" 2>/dev/null || { tail -c 2000 /w/out; exit 3; }
done
t1=$(date +%s%N)
echo "boot_ms=$(( (t1 - t0) / 1000000 ))"
echo "rss_kb=$(awk '/VmRSS/ {print $2}' /proc/$(cat /w/pid)/status)"
criu dump -t "$(cat /w/pid)" -D /ck --leave-running -o /ck/dump.log \
  || { grep Error /ck/dump.log | tail -5; exit 4; }
t2=$(date +%s%N)
echo "dump_ms=$(( (t2 - t1) / 1000000 ))"
echo "checkpoint_bytes=$(du -sb /ck | cut -f1)"
stat -c %s /w/out >/w/size_at_dump
"""

# send NAMES: each proof between markers into the toplevel, then wait for the last one's answer
SEND = r"""
send() {
  for name in $1; do
    { printf 'print_string "@@BEGIN %s\\n";;\n' "$name"; cat "/b/proofs/$name"; echo;
      printf 'print_string "@@END %s\\n";;\n' "$name"; } >/w/in
    last=$name
  done
  until grep -q "@@END $last" /w/out; do
    sleep 0.005; kill -0 "$(cat /w/pid)" 2>/dev/null || { tail -c 2000 /w/out; exit 3; }
  done
}
"""

# $1: the proofs to send (names under /b/proofs), $2: where to copy the output
PROOFS_STEP = (
    SEND
    + r"""
set -e
send "$1"
cp /w/out "$2"
"""
)

STOP = r"""
pid=$(cat /w/pid)
kill -9 "$pid" 2>/dev/null
while [ -e /proc/$pid ]; do sleep 0.01; done
truncate -s "$(cat /w/size_at_dump)" /w/out
"""

# $1: the first proof's name
RESTORE = (
    SEND
    + r"""
set -e
t0=$(date +%s%N)
criu restore -D /ck -d -o /ck/restore.log || { grep Error /ck/restore.log | tail -5; exit 4; }
t1=$(date +%s%N)
send "$1"
t2=$(date +%s%N)
echo "restore_ms=$(( (t1 - t0) / 1000000 ))"
echo "first_proof_ms=$(( (t2 - t0) / 1000000 ))"
"""
)


def rows(quick: bool) -> list[Row]:
    row = Row(
        "hol-light",
        "first check from a CRIU checkpoint of the booted toplevel (3.0 line)",
        1,
        "boot hol.ml, then the proof",
        None,
    )
    try:
        measured = measure(quick)
    except Unavailable as exc:
        row.note = f"not measured: {exc}"
        return [row]
    boot_s = measured["boot_ms"] / 1000
    first_cold_s = boot_s + measured["cold_first_ms"] / 1000
    row.baseline_total_s = round(first_cold_s, 1)
    row.kit_total_s = round(statistics.median(measured["first_check_ms"]) / 1000, 2)
    row.first_check_s = row.kit_total_s
    row.kit_total_how = (
        "one docker exec: criu restore of the booted toplevel, then the first proof (median of "
        f"{RESTORES}; a container's start would add its own)"
    )
    row.identical = measured["identical"] and measured["hundred_ran"]
    row.note = (
        f"{measured['criu']}; boot {boot_s:.1f} s, toplevel RSS "
        f"{measured['rss_kb'] / 1024:.0f} MB; dump {measured['dump_ms']} ms, checkpoint "
        f"{measured['checkpoint_bytes'] / 2**20:.0f} MB; restore {measured['restore_ms']} ms and "
        f"restore plus first proof {measured['first_proof_ms']} ms inside, "
        f"{measured['first_check_ms']} ms with the docker exec ({measured['page_cache']}); "
        f"{measured['proofs']} files ({measured['failed']} failing; HOL Light's "
        f"{', '.join(QUICK_HUNDRED if quick else CORE_ONLY)} among them, "
        f"{'each printing its theorems' if measured['hundred_ran'] else 'NOT ALL RAN'}), "
        "toplevel output cold vs restored "
        f"{'identical' if measured['identical'] else 'DIFFERENT: ' + measured['differences']}"
    )
    return [row]


class Unavailable(Exception):
    """What this machine lacks for the measurement (a note in the table, not a failure)."""


def built_image(image: str) -> str:
    """The tag of `image` (as locked), built on this machine."""
    if shutil.which("docker") is None:
        raise Unavailable("no docker client")
    tag = load_lock().tag(image)
    present = subprocess.run(["docker", "image", "inspect", tag], capture_output=True)
    if present.returncode != 0:
        raise Unavailable(f"image {tag} is not built here (`prooflock images build {image}`)")
    return tag


def measure(quick: bool) -> dict[str, Any]:
    tag = built_image(IMAGE)
    debs = criu_debs()
    with tempfile.TemporaryDirectory(prefix="prooflock-criu-") as work:
        bench = Path(work)
        (bench / "proofs").mkdir()
        chosen = proofs(quick)
        for name, content in chosen.items():
            (bench / "proofs" / name).write_text(content + "\n")
        shutil.copytree(debs, bench / "debs")
        os.chmod(bench, 0o755)
        container = start_container(tag, bench)
        try:
            return run_steps(container, bench, list(chosen))
        finally:
            subprocess.run(["docker", "rm", "-f", container], capture_output=True)


def criu_debs() -> Path:
    """trixie's CRIU and the libraries it needs, downloaded once into the cache dir."""
    kept = Settings().cache_dir / "bench-criu" / SUITE
    if kept.is_dir() and any(kept.glob("criu_*.deb")):
        return kept
    if shutil.which("apt-get") is None:
        raise Unavailable("no apt-get here to download CRIU's packages with")
    with tempfile.TemporaryDirectory(prefix="prooflock-apt-") as apt:
        root = Path(apt)
        for sub in ("lists/partial", "cache/archives/partial", "sources.d"):
            (root / sub).mkdir(parents=True)
        (root / "sources.list").write_text(f"deb [trusted=yes] {archive()} {SUITE} main\n")
        (root / "status").touch()
        options = [
            f"-oDir::Etc::sourcelist={root / 'sources.list'}",
            f"-oDir::Etc::sourceparts={root / 'sources.d'}",
            f"-oDir::State::Lists={root / 'lists'}",
            f"-oDir::Cache={root / 'cache'}",
            f"-oDir::State::status={root / 'status'}",
            "-oAPT::Sandbox::User=root",
        ]
        staging = kept.with_name(kept.name + ".partial")
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir(parents=True)
        for argv in (["update"], ["download", *CRIU_PACKAGES]):
            done = subprocess.run(
                ["apt-get", *options, *argv], cwd=staging, capture_output=True, text=True
            )
            if done.returncode != 0:
                tail = " ".join(done.stderr.strip().splitlines()[-2:])
                raise Unavailable(f"CRIU's packages could not be downloaded: {tail}")
        staging.replace(kept)
    return kept


def archive() -> str:
    """Debian's archive as this machine's apt reaches it (`PROOFLOCK_APT_MIRROR` wins)."""
    configured = BuildInputSettings().apt_mirror
    if configured and configured != HOST:
        return configured
    release = dict(
        line.split("=", 1)
        for line in Path("/etc/os-release").read_text().splitlines()
        if "=" in line
    )
    try:
        return host_mirror(release.get("VERSION_CODENAME", "").strip('"'))
    except UserError as exc:
        raise Unavailable(str(exc)) from None


def start_container(tag: str, bench: Path) -> str:
    caps = [f"--cap-add={cap}" for cap in CAPS]
    unconfined = ["--security-opt=seccomp=unconfined", "--security-opt=apparmor=unconfined"]
    done = subprocess.run(
        ["docker", "run", "-d", "--init", "-u", "0", "--network=none", *caps, *unconfined]
        + ["-v", f"{bench}:/b", "--entrypoint", "sleep", tag, "infinity"],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        raise Unavailable(f"the container did not start: {done.stderr.strip()[-300:]}")
    return done.stdout.strip()


def run_steps(container: str, bench: Path, names: list[str]) -> dict[str, Any]:
    found: dict[str, Any] = {}
    found.update(step(container, BOOT, [], BOOT_TIMEOUT_S))
    found["criu"] = (bench / "criu.version").read_text().strip()
    clock = time.monotonic()
    step(container, PROOFS_STEP, [names[0], "/b/cold-first.out"], STEP_TIMEOUT_S)
    found["cold_first_ms"] = round((time.monotonic() - clock) * 1000)  # with the docker exec
    step(container, PROOFS_STEP, [" ".join(names[1:]), "/b/cold.out"], STEP_TIMEOUT_S)
    step(container, STOP, [], STEP_TIMEOUT_S)
    found["restore_ms"], found["first_proof_ms"], found["first_check_ms"] = [], [], []
    found["page_cache"] = "page cache dropped before each restore"
    for attempt in range(RESTORES):
        if not drop_page_cache():
            found["page_cache"] = "page cache kept (not root)"
        clock = time.monotonic()
        timings = step(container, RESTORE, [names[0]], STEP_TIMEOUT_S)
        found["first_check_ms"].append(round((time.monotonic() - clock) * 1000))
        found["restore_ms"].append(timings["restore_ms"])
        found["first_proof_ms"].append(timings["first_proof_ms"])
        if attempt == 0:
            step(container, PROOFS_STEP, [" ".join(names[1:]), "/b/restored.out"], STEP_TIMEOUT_S)
        step(container, STOP, [], STEP_TIMEOUT_S)
    cold = segments((bench / "cold.out").read_text(errors="replace"))
    cold.update(segments((bench / "cold-first.out").read_text(errors="replace")))
    restored = segments((bench / "restored.out").read_text(errors="replace"))
    differences = [name for name in names if cold.get(name) != restored.get(name)]
    missing = [name for name in names if name not in cold]
    found["identical"] = not differences and not missing
    found["differences"] = ", ".join(differences + [f"{name} (no output)" for name in missing])
    found["proofs"] = len(names)
    # a 100-theorems file that ran prints its theorems; one #use could not find prints none
    found["hundred_ran"] = all("|-" in cold.get(name, "") for name in names if name not in PROOFS)
    found["failed"] = sum(1 for text in cold.values() if "Exception" in text or "Error" in text)
    return found


def step(container: str, script: str, args: list[str], timeout: float) -> dict[str, Any]:
    """One step in the container; its `key=value` lines as ints."""
    argv = ["docker", "exec", container, "bash", "-c", script, "step", *args]
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise Unavailable(f"a step took over {timeout:.0f} s: {shlex.join(args)}") from None
    if done.returncode != 0:
        tail = (done.stdout + done.stderr).strip()[-600:]
        raise Unavailable(f"a step failed (exit {done.returncode}): {tail}")
    values = {}
    for line in done.stdout.splitlines():
        key, sep, value = line.partition("=")
        if sep and value.strip().isdigit():
            values[key.strip()] = int(value)
    return values


def segments(output: str) -> dict[str, str]:
    """Each proof's toplevel output, between its @@BEGIN and @@END markers."""
    found = {}
    for part in output.split("@@BEGIN ")[1:]:
        name, _, rest = part.partition("\n")
        body, marker, _ = rest.partition(f"@@END {name}")
        if marker:
            found[name] = body
    return found


def drop_page_cache() -> bool:
    """The checkpoint read from disk, as on a machine that has not just written it."""
    try:
        os.sync()
        Path("/proc/sys/vm/drop_caches").write_text("3\n")
        return True
    except OSError:
        return False
