"""Bare HOL Light labels from one boot: each file loaded in a child forked from the booted toplevel.

A bare label used to be a whole boot of Debian's `hol-light` per file (minutes each). Here the
toplevel boots once, with nothing of the kit, and then forks a child per file (OCaml's
`Unix.fork`, from `#load "unix.cma"`). Each child starts from the booted toplevel's state, as a
fresh boot would, plus unix.cma and the few lines below. It `loadt`s its file, in a directory of
its own with its own HOME, as the per-file boot does, and its output is judged the same way.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path

from tests.support.corpora import HOL_LIGHT_FAILED, Bare

LOADED = "@@loaded"  # the child's last line, when its loadt returned and it could still print

# Typed into the booted toplevel: one child per file, one after another; the parent waits for
# each and writes its wall time. Constructors are avoided: HOL Light's lexer reads names its way.
_DRIVER = """#load "unix.cma";;
let bare_fork_label (dir, file, out, timeout_s) =
  flush_all ();
  let started = Unix.gettimeofday () in
  let pid = Unix.fork () in
  if pid = 0 then begin
    let said = open_out out in
    Unix.dup2 (Unix.descr_of_out_channel said) Unix.stdout;
    Unix.dup2 (Unix.descr_of_out_channel said) Unix.stderr;
    Unix.chdir dir;
    Unix.putenv "HOME" dir;
    ignore (Unix.alarm timeout_s);
    (try loadt file with e -> print_string ("Exception: " ^ Printexc.to_string e ^ "\\n"));
    Format.print_flush ();
    print_string "\\n%(loaded)s\\n";
    exit 0
  end else begin
    ignore (Unix.waitpid [] pid);
    let wall = open_out (out ^ ".wall") in
    output_string wall (string_of_float (Unix.gettimeofday () -. started));
    close_out wall
  end;;
let booted = open_out "%(booted)s" in
output_string booted (string_of_float (Unix.gettimeofday ())); close_out booted;;
List.iter bare_fork_label [
%(jobs)s];;
"""


def bare_hol_light_forked(
    paths: dict[str, Path], timeout_s: int, *, timeouts: Mapping[str, int] | None = None
) -> tuple[dict[str, Bare], float]:
    """Each file's bare label, and the boot's seconds: Debian's `hol-light` boots once, then
    loads each file in a child forked from that toplevel, one at a time, `timeout_s` each
    (`timeouts` names files with another)."""
    limit = {name: (timeouts or {}).get(name, timeout_s) for name in paths}
    with tempfile.TemporaryDirectory(prefix="bare-hol-light-fork-") as work:
        root = Path(work)
        jobs, outs = [], {}
        for index, (name, path) in enumerate(paths.items()):
            folder = root / str(index)
            folder.mkdir()
            (folder / path.name).write_bytes(path.read_bytes())
            outs[name] = root / f"{index}.said"
            jobs.append(f'  ("{folder}", "{folder / path.name}", "{outs[name]}", {limit[name]});')
        boot = root / "boot"
        boot.mkdir()
        driver = _DRIVER % {
            "loaded": LOADED,
            "booted": root / "booted",
            "jobs": "\n".join(jobs),
        }
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(boot),
            "LC_ALL": "C.UTF-8",
        }
        started = time.time()
        done = subprocess.run(
            ["hol-light"],
            cwd=boot,
            env=env,
            input=driver.encode(),
            capture_output=True,
            timeout=3600 + sum(limit.values()),
        )
        said = (done.stdout + done.stderr).decode(errors="replace")
        if not (root / "booted").is_file():
            raise RuntimeError(f"hol-light did not boot: {said[-2000:]}")
        boot_s = float((root / "booted").read_text()) - started
        return {name: _label(out, limit[name]) for name, out in outs.items()}, boot_s


def _label(out: Path, timeout_s: int) -> Bare:
    said = out.read_text(errors="replace") if out.is_file() else ""
    wall_s = float(out.with_name(out.name + ".wall").read_text())
    if LOADED not in said:  # the child died: killed at its alarm, or a crash of its own
        if wall_s >= timeout_s - 1:
            return Bare(False, wall_s, f"no answer within {timeout_s} s", True)
        return Bare(False, wall_s, f"the toplevel died: {said.strip()[-160:]}")
    failed = [line for line in said.splitlines() if line.startswith(HOL_LIGHT_FAILED)]
    return Bare(not failed, wall_s, failed[0] if failed else "")
