"""Per-diagram Asymptote render time: `python benchmarks/asymptote.py [--repeat N] [--backend B]`.

Renders every passing diagram of the test corpus in each format, cache off, and prints the median
wall and CPU time of the check (and of asy alone) per diagram and format, then the overall median.

`--overhead` instead measures what the version-3 hardening costs per render: the guard (Python,
on each source) and, in one sandbox of the chosen backend, asy as version 2 ran it (`-o diagram`)
against asy as it runs now (`-vv`, `-o out/diagram`, the PREPARE wrapper, the frozen clock),
alternated so that both see the same machine load.
A report, not a test: nothing here asserts a speed.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from runner.backends import BackendChoice
from runner.check.checker import Checker
from runner.core.models import CheckRequest, Limits, Verdict
from runner.core.settings import Settings
from runner.provers.asymptote import FORMATS, guard
from runner.provers.asymptote import render as asy_render

CORPUS = Path(__file__).resolve().parent.parent / "tests" / "artifacts" / "asymptote"
DIAGRAMS = (
    "triangle_labels.asy",
    "triangle_moved.asy",
    "squares_grid.asy",
    "pdflatex_engine.asy",
    "reads_the_clock.asy",
)
# asy as adapter version 2 ran it: output beside the source, no clock, no -vv
VERSION_2 = (
    *asy_render.WITH_WORK_TMPDIR,
    *(a for a in asy_render.ASY if a != "-vv"),
    "-cd",
    "bench",
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--backend", default="local", choices=("local", "docker", "auto"))
    parser.add_argument(
        "--reference", action="store_true", help="also compare with triangle_moved.asy"
    )
    parser.add_argument(
        "--overhead", action="store_true", help="the cost of the guard, clock and layout"
    )
    args = parser.parse_args()
    if args.overhead:
        overhead(args.repeat, args.backend)
        return
    settings = Settings(
        backend=args.backend, cache=False, retries=0, cache_dir=Path(tempfile.mkdtemp())
    )
    options: dict[str, object] = {}
    if args.reference:
        options["reference"] = {
            "name": "triangle_moved.asy",
            "content": (CORPUS / "triangle_moved.asy").read_text(),
        }
    print(f"{'diagram':24} {'format':6} {'wall ms':>8} {'cpu ms':>8} {'asy ms':>8}")
    walls: list[int] = []
    with Checker(settings) as checker:
        for name in DIAGRAMS:
            for fmt in FORMATS:
                request = CheckRequest(
                    prover="asymptote",
                    mode="render",
                    name=name,
                    content=(CORPUS / name).read_text(),
                    options={**options, "format": fmt},
                )
                runs = [checker.check_one(request) for _ in range(args.repeat)]
                if any(r.verdict is not Verdict.PASS for r in runs):
                    print(f"{name:24} {fmt:6} did not pass: {runs[0].diagnostics}")
                    continue
                wall = int(statistics.median(r.provenance.wall_ms for r in runs))
                cpu = int(statistics.median(r.provenance.cpu_ms or 0 for r in runs))
                asy = int(
                    statistics.median(r.provenance.extra["timings_ms"]["render"] for r in runs)
                )
                walls.append(wall)
                print(f"{name:24} {fmt:6} {wall:8d} {cpu:8d} {asy:8d}")
    if walls:
        print(
            f"median over {len(walls)} diagram/format pairs: {int(statistics.median(walls))} ms wall "
            f"({args.backend} backend, {args.repeat} runs each)"
        )


def overhead(repeat: int, backend_name: str) -> None:
    """Median guard time per source; median extra wall time per asy run, per format."""
    print(f"{'diagram':24} {'guard us':>9}")
    for name in DIAGRAMS:
        source = (CORPUS / name).read_text()
        runs = []
        for _ in range(max(repeat, 20)):
            started = time.perf_counter()
            guard.refusals(source)
            runs.append(time.perf_counter() - started)
        print(f"{name:24} {statistics.median(runs) * 1e6:9.0f}")
    settings = Settings(backend=backend_name, cache=False, retries=0)
    choice = BackendChoice(settings, notify=print)
    backend = choice.for_image("asymptote")
    extra: dict[str, list[int]] = {fmt: [] for fmt in FORMATS}
    with backend.sandbox("asymptote", Limits(timeout_s=120, memory_mb=4096)) as box:
        for name in DIAGRAMS:
            source = (CORPUS / name).read_text()
            box.write_file("bench/diagram.asy", source.encode())
            for fmt in FORMATS:
                for _ in range(repeat):
                    old = box.run(
                        [*VERSION_2, "-f", fmt, "-o", "diagram", "diagram.asy"],
                        timeout_s=120,
                        env=asy_render.RUN_ENV,
                    )
                    new = asy_render.render(box, "bench-new", source, fmt, 120)
                    if old.ok and new.done.ok:
                        extra[fmt].append(new.done.wall_ms - old.wall_ms)
    print(f"\n{'format':6} {'extra ms per asy run (median, new - version 2)':>48}")
    for fmt, values in extra.items():
        if values:
            print(f"{fmt:6} {statistics.median(values):48.0f}   ({len(values)} pairs)")
    choice.close()


if __name__ == "__main__":
    main()
