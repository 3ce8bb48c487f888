"""Per-diagram Asymptote render time: `python benchmarks/asymptote.py [--repeat N] [--backend B]`.

Renders every passing diagram of the test corpus in each format, cache off, and prints the median
wall and CPU time of the check (and of asy alone) per diagram and format, then the overall median.
A report, not a test: nothing here asserts a speed.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from pathlib import Path

from runner.checker import Checker
from runner.models import CheckRequest, Verdict
from runner.provers.asymptote import FORMATS
from runner.settings import Settings

CORPUS = Path(__file__).resolve().parent.parent / "tests" / "artifacts" / "asymptote"
DIAGRAMS = ("triangle_labels.asy", "triangle_moved.asy", "squares_grid.asy", "stamps_back_on.asy")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--backend", default="local", choices=("local", "docker", "auto"))
    parser.add_argument(
        "--reference", action="store_true", help="also compare with triangle_moved.asy"
    )
    args = parser.parse_args()
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


if __name__ == "__main__":
    main()
