"""HOL Light's core compiled, against loading it into the toplevel: how far a compiled core gets
toward a first check in seconds. Issue 22 names it as an option to measure beside a checkpoint
(the kit's path: snapshots, measured in `hol_light.py`). A measurement, not the kit's path.

    python -m benchmarks hol_light_compiled

HOL Light 3.0 can build its core (`hol_lib.ml`: everything `hol.ml` loads but the help and the
search database) as a module; it needs OCaml 4.14 or later, so only the 3.0 line's image
(OCaml 5.3) can, and bookworm's 20230128 on OCaml 4.13 cannot. In a container of that image,
one CPU, no network:
1. the core inlined with HOL Light's own `inline_load.ml` and compiled twice, with `ocamlopt`
   (native) and `ocamlc` (bytecode);
2. the same small proofs, each printing its theorem, run three ways: linked to the native core,
   linked to the bytecode core, and typed into the toplevel after it loads the same core from
   source (`hol.ml` without help and database). Each way's time is the whole process: the core's
   start (every proof of the library replayed) and then the small proofs;
3. the theorems printed must be the same three ways.
A compiled program cannot read a checked file as the toplevel does (directives, `needs`, the
toplevel's printing), so this bounds what a compiled core could give; it does not replace one.
"""

from __future__ import annotations

import shutil
import statistics
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from benchmarks.hol_light import SMALL_PROOFS
from benchmarks.table import Row
from runner.images.lock import load_lock

IMAGE = "hol-light-3.0"
TIMEOUT_S = 1800


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


# /b: the bench's directory (proofs.ml in, outputs out); $1: how many runs of each way
SCRIPT = r"""
set -e
ms() { echo $(( $(date +%s%N) / 1000000 )); }
cp -r /usr/share/hol-light /tmp/h && cd /tmp/h
export HOLLIGHT_DIR=/tmp/h
ulimit -s unlimited  # ocamlopt's recursion on a 50,000-line module
mkdir lib && cd lib
cp ../bignum_zarith.ml bignum.ml && cp ../hol_loader.ml .
ocaml ../inline_load.ml ../hol_lib.ml hol_lib.ml -omit-prelude >/dev/null
sed -i '1i open Hol_loader;;' hol_lib.ml
echo "core_lines=$(wc -l <hol_lib.ml)"
PP="camlp5r pa_lexer.cmo pa_extend.cmo q_MLast.cmo -I /tmp/h pa_j.cmo"
{ echo 'open Hol_lib;;'; cat /b/proofs.ml; } >prog.ml
t0=$(ms)
ocamlfind ocamlopt -package zarith -c bignum.ml hol_loader.ml
ocamlfind ocamlopt -package zarith -pp "$PP" -I . -c hol_lib.ml 2>/dev/null
ocamlfind ocamlopt -package zarith -linkpkg -pp "$PP" -I . bignum.cmx hol_loader.cmx \
  hol_lib.cmx prog.ml -o native.exe
t1=$(ms)
ocamlfind ocamlc -package zarith -c bignum.ml hol_loader.ml
ocamlfind ocamlc -package zarith -pp "$PP" -I . -c hol_lib.ml 2>/dev/null
ocamlfind ocamlc -package zarith -linkpkg -pp "$PP" -I . bignum.cmo hol_loader.cmo \
  hol_lib.cmo prog.ml -o bytecode.exe
t2=$(ms)
echo "native_compile_ms=$((t1 - t0))"
echo "bytecode_compile_ms=$((t2 - t1))"
# the toplevel's boot: hol.ml up to the core, without the help and the search database
grep -v -E 'loads "(help|database)\.ml"' ../hol.ml >../core.ml
for i in $(seq "$1"); do
  t0=$(ms); ./native.exe >/b/native.out; t1=$(ms); echo "native_ms=$((t1 - t0))"
  t0=$(ms); ./bytecode.exe >/b/bytecode.out; t1=$(ms); echo "bytecode_ms=$((t1 - t0))"
  t0=$(ms)
  ../ocaml-hol -I /tmp/h -init /tmp/h/core.ml </b/proofs.ml >/b/toplevel.out 2>&1
  t1=$(ms); echo "toplevel_ms=$((t1 - t0))"
done
"""


def program() -> str:
    """The small proofs, each printing its theorem (the same text for all three ways)."""
    parts = []
    for name, proof in SMALL_PROOFS.items():
        parts.append(proof)
        parts.append('let () = Printf.printf "@@ ' + name + ': %s\\n%!" (string_of_thm X);;')
    return "\n".join(parts) + "\n"


def rows(quick: bool) -> list[Row]:
    row = Row("hol-light", "the core compiled, against loaded (3.0 line)", 1, "", None)
    row.baseline = "the toplevel loads the core, then the proofs"
    try:
        measured = measure(1 if quick else 3)
    except Unavailable as exc:
        row.note = f"not measured: {exc}"
        return [row]
    native, bytecode, toplevel = (
        statistics.median(measured[key]) / 1000
        for key in ("native_ms", "bytecode_ms", "toplevel_ms")
    )
    row.baseline_total_s = round(toplevel, 1)
    row.kit_total_s = round(native, 1)
    row.first_check_s = row.kit_total_s
    row.kit_total_how = "a program linked to the natively compiled core (not the kit's path)"
    row.identical = measured["identical"]
    row.note = (
        f"{len(SMALL_PROOFS)} small proofs, median of {len(measured['native_ms'])}: native core "
        f"{native:.1f} s, bytecode core {bytecode:.1f} s, toplevel {toplevel:.1f} s; compiling "
        f"the core ({measured['core_lines']} lines) took {measured['native_compile_ms'] / 1000:.0f} s "
        f"native and {measured['bytecode_compile_ms'] / 1000:.0f} s bytecode; theorems "
        f"{'the same three ways' if measured['identical'] else 'DIFFERENT: ' + measured['differences']}"
    )
    return [row]


def measure(runs: int) -> dict[str, Any]:
    tag = built_image(IMAGE)
    with tempfile.TemporaryDirectory(prefix="prooflock-compiled-") as work:
        bench = Path(work)
        bench.chmod(0o777)  # the image's user writes the outputs
        (bench / "proofs.ml").write_text(program())
        argv = ["docker", "run", "--rm", "--network=none", "--cpus=1", "--memory=8g"]
        argv += ["-v", f"{bench}:/b", "--entrypoint", "bash", tag, "-c", SCRIPT, "bench", str(runs)]
        try:
            done = subprocess.run(argv, capture_output=True, text=True, timeout=TIMEOUT_S)
        except subprocess.TimeoutExpired:
            raise Unavailable(f"it took over {TIMEOUT_S} s") from None
        if done.returncode != 0:
            raise Unavailable(f"the build failed: {(done.stdout + done.stderr).strip()[-600:]}")
        found: dict[str, Any] = {"native_ms": [], "bytecode_ms": [], "toplevel_ms": []}
        for line in done.stdout.splitlines():
            key, sep, value = line.partition("=")
            if sep and value.isdigit():
                if isinstance(found.get(key), list):
                    found[key].append(int(value))
                else:
                    found[key] = int(value)
        theorems = {
            way: printed(bench / f"{way}.out") for way in ("native", "bytecode", "toplevel")
        }
    differences = [way for way in ("bytecode", "toplevel") if theorems[way] != theorems["native"]]
    complete = len(theorems["native"]) == len(SMALL_PROOFS)
    found["identical"] = complete and not differences
    found["differences"] = ", ".join(differences) or f"{len(theorems['native'])} theorems printed"
    return found


def printed(path: Path) -> list[str]:
    """The theorems a way printed, in order (the toplevel's lines may start with its prompt)."""
    lines = path.read_text(errors="replace").splitlines()
    return [line[line.index("@@ ") :] for line in lines if "@@ " in line]
