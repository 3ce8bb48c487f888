"""Asymptote: the kit beside bare asy on Asymptote's own example gallery; per-diagram times.

`rows(quick)` (for `python -m benchmarks`): every example of Debian's asymptote-doc gallery
that bare asy renders as PNG from the file alone (`quick`: the CI subset of
tests/completeness/test_asymptote_gallery.py), checked by the kit on the local backend and, when
the asymptote image is at its locked ID, on docker (strict): the median wall time of each beside
bare `asy -f png`, and whether every one passes (the completeness claim, N/N).

    python -m benchmarks.asymptote --gallery [--full] [--backend local|docker]
        one line per example: bare asy's result and time, the kit's verdict and time, and the
        totals (examples bare asy renders that the kit passes; examples only the kit renders)
    python -m benchmarks.asymptote [--repeat N] [--backend B] [--reference]
        every passing diagram of the test corpus in each format, cache off: the median wall and
        CPU time of the check (and of asy alone) per diagram and format
    python -m benchmarks.asymptote --overhead
        what the hardening costs per render: the guard (Python, per source) and, in one sandbox,
        asy as adapter version 2 ran it against asy as it runs now (kit module, converters,
        clock probe), alternated so that both see the same machine load

A report, not a test: nothing here asserts a speed.
"""

from __future__ import annotations

import argparse
import functools
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from benchmarks.table import Row, median_ms
from runner.backends import BackendChoice
from runner.check.checker import Checker
from runner.core.models import CheckRequest, Limits, Verdict
from runner.core.settings import Settings
from runner.images.resolver import LockedImages
from runner.provers.asymptote import FORMATS, guard
from runner.provers.asymptote import render as asy_render
from tests.completeness.test_asymptote_gallery import (
    MISSING,
    TIMEOUT_S,
    Bare,
    bare_asy,
    bare_asy_in,
    docker_skip_reason,
    gallery,
)
from tests.completeness.test_asymptote_gallery import request as gallery_request

CORPUS = Path(__file__).resolve().parent.parent / "tests" / "artifacts" / "asymptote"
DIAGRAMS = (
    "triangle_labels.asy",
    "triangle_moved.asy",
    "squares_grid.asy",
    "pdflatex_engine.asy",
    "reads_the_clock.asy",
)
# asy as adapter version 2 ran it: output beside the source, no clock, no -vv, no kit module
KIT_ONLY = ("-vv", "-autoimport", asy_render.KIT_MODULE)
VERSION_2 = (
    *asy_render.WITH_WORK_TMPDIR,
    *(a for a in asy_render.ASY if a not in KIT_ONLY),
    "-cd",
    "bench",
)
KIT_COLUMN = {"local": "local warm", "docker": "docker strict"}  # asymptote has no warm worker


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
    parser.add_argument("--gallery", action="store_true", help="the kit beside bare asy")
    parser.add_argument("--full", action="store_true", help="with --gallery: every example")
    args = parser.parse_args()
    if args.overhead:
        overhead(args.repeat, args.backend)
        return
    if args.gallery:
        print_gallery(args.full, args.backend)
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
    choice = BackendChoice(settings, notify=print, images=LockedImages(settings))
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


def rows(quick: bool) -> list[Row]:
    """The gallery's examples bare asy renders, bare asy beside the kit on each backend."""
    names = gallery(full=not quick)
    corpus = "asymptote-doc gallery" + (", CI subset" if quick else "")
    if not names:
        return [Row("asymptote", corpus, 0, "", None, note=MISSING)]
    rendered = [name for name in names if bare_asy(name).rendered]
    row = Row(
        prover="asymptote",
        corpus=f"{corpus}: {len(rendered)} of {len(names)} examples bare asy renders",
        checks=len(rendered),
        baseline="bare asy -f png per file",
        baseline_ms=median_ms([bare_asy(name).wall_ms / 1000 for name in rendered]),
    )
    notes, agree = [], []
    for backend in ("local", "docker"):
        reason = docker_skip_reason() if backend == "docker" else None
        if reason is not None:
            notes.append(f"docker: {reason}")
            continue
        compared, results = side_results(backend, names)
        row.kit_ms[KIT_COLUMN[backend]] = median_ms([ms / 1000 for _, ms in results.values()])
        passed = sum(verdict is Verdict.PASS for verdict, _ in results.values())
        agree.append(passed == len(compared))
        where = "on this host" if backend == "local" else "in the image"
        notes.append(f"{backend}: {passed}/{len(compared)} that bare asy renders {where} pass")
        notes += [
            f"{backend} {n}: {v.value}" for n, (v, _) in results.items() if v is not Verdict.PASS
        ]
    row.identical = all(agree) if agree else None
    row.note = "; ".join(notes) + " (no warm worker: each check a fresh sandbox)"
    return [row]


def side_results(
    backend: str, names: list[str]
) -> tuple[list[str], dict[str, tuple[Verdict, int]]]:
    """The examples bare asy renders where the kit's asy runs (this host, or the image), and
    the kit's verdict and wall ms on each, cache off."""
    with Checker(settings_for(backend)) as checker:
        bare = bare_where(checker)
        compared = [name for name in names if bare(name).rendered]
        results = {}
        for name in compared:
            result = checker.check_one(gallery_request(name))
            results[name] = (result.verdict, result.provenance.wall_ms)
    return compared, results


def settings_for(backend: str) -> Settings:
    return Settings(
        backend=backend,
        cache=False,
        retries=0,
        timeout=TIMEOUT_S,
        cache_dir=Path(tempfile.mkdtemp()),
    )


def bare_where(checker: Checker) -> Callable[[str], Bare]:
    """Bare asy where the checker's asy runs: this host, or a sandbox of the image."""
    if checker.settings.backend == "local":
        return bare_asy
    return functools.partial(bare_asy_in, checker.backend_for("asymptote"))


def print_gallery(full: bool, backend: str) -> None:
    """One line per example, then the agreement with bare asy where the kit's asy runs."""
    names = gallery(full)
    if not names:
        print(MISSING)
        return
    print(f"{'example':28} {'bare asy':>14} {'kit ' + backend:>22}")
    agree = only_kit = rendered = 0
    with Checker(settings_for(backend)) as checker:
        bare_asy_here = bare_where(checker)
        for name in names:
            bare = bare_asy_here(name)
            result = checker.check_one(gallery_request(name))
            passed = result.verdict is Verdict.PASS
            rendered += bare.rendered
            agree += bare.rendered and passed
            only_kit += not bare.rendered and passed
            shown = "render" if bare.rendered else "none"
            print(
                f"{name:28} {shown:>7} {bare.wall_ms:6d} {result.verdict.value:>15} "
                f"{result.provenance.wall_ms:6d}",
                flush=True,
            )
    print(
        f"{agree}/{rendered} examples bare asy renders pass under the kit ({backend}); "
        f"the kit also renders {only_kit} that bare asy does not; {len(names)} examples"
    )


if __name__ == "__main__":
    main()
