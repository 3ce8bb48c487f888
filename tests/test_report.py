"""`prooflock report`: a static offline page of a real run, hostile names escaped, bad input named.

One real run (Rocq, Asymptote with kept renders, AlphaGeometry's validator) is checked once for
the module; other stories derive logs from its records (renamed, re-pointed, multiplied) and
write them through CheckpointLog, so every chain is a real one.
"""

from __future__ import annotations

import copy
import hashlib
import json
import re
import shutil
import time
from collections import Counter
from collections.abc import Callable
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import orjson
import pytest

from runner.check.checker import Checker
from runner.core.errors import UserError
from runner.core.models import CheckRequest
from runner.core.settings import Settings
from runner.records.attest import ReproductionSummary, attach, write_reproduction
from runner.records.checkpoint import CheckpointLog, inspect_chain, recorded_runs
from runner.records.signing import load_public, load_signer
from runner.records.verify import TrustPolicy
from runner.report import write_report
from runner.report.text import visible
from runner.runs.resumable import run_requests
from tests.support.browser import chromium, require_browser
from tests.support.signed import make_key, published

CORPUS = Path(__file__).parent / "artifacts"
LOCK = Path(__file__).parents[1] / "manifests" / "images.lock.json"
Body = dict[str, Any]


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def corpus(prover: str, name: str) -> str:
    return (CORPUS / prover / name).read_text()


def requests() -> list[CheckRequest]:
    def rocq(name: str) -> CheckRequest:
        return CheckRequest(prover="rocq", mode="proof", name=name, content=corpus("rocq", name))

    def asy(name: str, fmt: str, reference: str | None = None) -> CheckRequest:
        options: dict[str, Any] = {"format": fmt}
        if reference:
            options["reference"] = {"name": reference, "content": corpus("asymptote", reference)}
        return CheckRequest(
            prover="asymptote",
            mode="render",
            name=name,
            content=corpus("asymptote", name),
            options=options,
        )

    lines = corpus("alphageometry", "paper_syntax_errors.txt").splitlines()
    title, problem = [line for line in lines if line.strip()][:2]
    no_goal = corpus("alphageometry", "no_goal.txt")
    geometry = [(title, f"{title}\n{problem}\n"), ("no_goal", no_goal)]
    return [
        rocq("pass_arith.v"),
        rocq("fail_tactic.v"),
        rocq("admitted.v"),
        asy("triangle_labels.asy", "png", reference="triangle_moved.asy"),
        asy("triangle_moved.asy", "png"),
        asy("squares_grid.asy", "svg"),
        asy("fail_syntax.asy", "png"),
        *[
            CheckRequest(
                prover="alphageometry",
                name=name,
                content=content,
                options={"syntax_check": "validator"},
            )
            for name, content in geometry
        ],
    ]


@pytest.fixture(scope="module")
def real_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A log of real checks, with the renders kept beside it as `run.renders/<sha256>`."""
    root = tmp_path_factory.mktemp("real-run")
    log = root / "run.jsonl"
    # One check at a time: the tests below edit records by their place in the log, which is
    # the order checks finish in.
    settings = Settings(backend="local", cache_dir=root / "cache", timeout=60, retries=0, workers=1)
    checker = Checker(settings, keep_outputs=root / "run.renders")
    run_requests(requests(), log, checker, source="report-test")
    return log


def bodies(log: Path) -> tuple[Body, list[Body]]:
    records = inspect_chain(log).records
    return records[0]["body"], [r["body"] for r in records if r["kind"] == "result"]


def derive_log(
    source: Path, dest: Path, edit: Callable[[list[Body]], list[Body]] = lambda b: b
) -> Path:
    """A new, intact log holding `edit` of `source`'s results (renders copied alongside)."""
    header, results = bodies(source)
    results = edit(copy.deepcopy(results))
    dest.parent.mkdir(parents=True, exist_ok=True)
    with CheckpointLog(dest, fsync_every=len(results) + 1) as log:
        log.append("header", {**header, "count": len(results)})
        for index, body in enumerate(results):
            log.append("result", {**body, "index": index})
    renders = source.parent / f"{source.stem}.renders"
    if renders.is_dir():
        shutil.copytree(renders, dest.parent / f"{dest.stem}.renders", dirs_exist_ok=True)
    return dest


def result_of(results: list[Body], artifact: str) -> Body:
    return next(b["result"] for b in results if b["result"]["artifact"] == artifact)


def render_of(result: Body, role: str = "render") -> tuple[str, str]:
    """(format, sha256) of a record's output file with `role`."""
    found = next(o for o in result["outputs"] if o["role"] == role)
    return found["format"], found["sha256"]


def with_reference_render(results: list[Body]) -> list[Body]:
    """triangle_labels compared with triangle_moved, naming the reference's (real) render."""
    fmt, moved = render_of(result_of(results, "triangle_moved.asy"))
    labels = result_of(results, "triangle_labels.asy")
    others = [o for o in labels["outputs"] if o["role"] != "reference"]
    labels["outputs"] = [*others, {"role": "reference", "format": fmt, "sha256": moved}]
    return results


def page_of(out: Path) -> str:
    return (out / "index.html").read_text(encoding="utf-8")


class Tables(HTMLParser):
    """Every table's body rows as lists of cell texts, keyed by the table's class."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: dict[str, list[list[str]]] = {}
        self._table: str | None = None
        self._row: list[str] | None = None
        self._cell: list[str] | None = None
        self._in_body = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "table":
            self._table = dict(attrs).get("class") or ""
        elif tag == "tbody":
            self._in_body = True
        elif tag == "tr" and self._in_body:
            self._row = []
        elif tag in ("td", "th") and self._row is not None:
            self._cell = []

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self._row is not None and self._cell is not None:
            self._row.append("".join(self._cell).strip())
            self._cell = None
        elif tag == "tr" and self._row is not None and self._table is not None:
            self.rows.setdefault(self._table, []).append(self._row)
            self._row = None
        elif tag == "tbody":
            self._in_body = False

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)


def tables_of(html: str) -> dict[str, list[list[str]]]:
    parser = Tables()
    parser.feed(html)
    return parser.rows


def summary_cell(html: str, prover: str, verdict: str) -> int:
    found = re.search(rf'data-prover="{re.escape(prover)}" data-verdict="{verdict}">(\d+)<', html)
    assert found, f"no summary cell for {prover}/{verdict}"
    return int(found[1])


# -- a real run ----------------------------------------------------------------------------------


def test_report_of_a_real_run_shows_each_prover_verdict_and_record(real_log, tmp_path):
    runs = list(recorded_runs(inspect_chain(real_log).records))
    summary = write_report(real_log, tmp_path / "report")

    expected = Counter((result.prover, result.verdict.value) for _, result in runs)
    assert summary.records == len(runs) == len(requests())
    assert summary.provers == {
        prover: {v: n for (p, v), n in expected.items() if p == prover}
        for prover in ("rocq", "asymptote", "alphageometry")
    }
    html = page_of(tmp_path / "report")
    for (prover, verdict), count in expected.items():
        assert summary_cell(html, prover, verdict) == count
    assert summary_cell(html, "rocq", "all") == 3
    assert "33.3 %" in html  # rocq: 1 pass of 3

    rows = tables_of(html)["records"]
    assert [row[1].split("\n")[0] for row in rows] == [result.artifact for _, result in runs]
    fail_tactic = next(row for row in rows if row[1].startswith("fail_tactic.v"))
    assert "3:2" in fail_tactic[3] and "reflexivity" in fail_tactic[3]
    admitted = next(row for row in rows if row[1].startswith("admitted.v"))
    assert "Artifact.hard" in admitted[4]

    written = {path.relative_to(tmp_path / "report").as_posix() for path in summary.files}
    assert {"index.html", "report.css", "report.js"} <= written
    assert sum(name.startswith("plots/") for name in written) == 3
    for _, result in runs:
        for output in result.outputs:
            assert f"renders/{output.sha256}.{output.format}" in written
            inline = output.format in ("png", "svg") and output.role in ("render", "reference")
            shown = "src" if inline else "href"  # a PDF, and a raster SSIM compared, are linked
            assert f'{shown}="renders/{output.sha256}.{output.format}"' in html
    assert summary.not_shown == []  # the reference's render is kept beside the artifact's


def test_diagrams_show_scores_and_the_compile_error(real_log, tmp_path):
    write_report(real_log, tmp_path / "report")
    html = page_of(tmp_path / "report")
    diagrams = html[html.index('id="diagrams"') : html.index('id="geometry"')]
    start, end = diagrams.index("triangle_labels.asy"), diagrams.index("triangle_moved.asy</span>")
    triangle = diagrams[start:end]
    comparison = result_of(bodies(real_log)[1], "triangle_labels.asy")["details"]["comparison"]
    assert f'class="keyword-f1">{comparison["keyword_f1"]}<' in triangle
    assert f'class="ssim">{comparison["ssim"]}<' in triangle
    failed = diagrams[diagrams.index("fail_syntax.asy") :]
    assert "no render (it did not compile)" in failed
    assert re.search(
        r'compile error</strong> at <span class="where">3:1</span>: '
        r'<span class="message">syntax error',
        failed,
    )


def test_geometry_taxonomy_names_each_failing_clause(real_log, tmp_path):
    write_report(real_log, tmp_path / "report")
    html = page_of(tmp_path / "report")
    assert 'data-outcome="syntax_error">1<' in html
    assert 'data-outcome="format_error">1<' in html
    assert 'data-syntax-class="AssertionError">1<' in html
    failing = tables_of(html)["failing"]
    reflect = next(row for row in failing if row[1] == "reflect_needs_three_points")
    assert reflect[2:4] == ["syntax_error", "AssertionError"]
    assert "d = reflect c b" in reflect[4]
    assert "needs 3 points" in reflect[5]


def test_environment_shows_installs_kit_and_hosts(real_log, tmp_path):
    write_report(real_log, tmp_path / "report")
    html = page_of(tmp_path / "report")
    environment = html[html.index('id="environment"') :]
    _, result = next(iter(recorded_runs(inspect_chain(real_log).records)))
    assert f'<span class="kit">{result.provenance.tools["prooflock"]}</span>' in environment
    assert f'<span class="host">{result.provenance.host}</span>' in environment
    assert "a local install: identified by its install facts" in environment
    assert "The Coq Proof Assistant" in environment  # the probed coqc version


def test_the_same_run_gives_the_same_bytes(real_log, tmp_path):
    first = write_report(real_log, tmp_path / "one")
    second = write_report(real_log, tmp_path / "two")
    names = [path.relative_to(tmp_path / "one") for path in first.files]
    assert names == [path.relative_to(tmp_path / "two") for path in second.files]
    for name in names:
        one, two = (tmp_path / "one" / name).read_bytes(), (tmp_path / "two" / name).read_bytes()
        assert one == two, name


# -- hostile artifacts ------------------------------------------------------------------------

HOSTILE_NAMES = [
    "<script>window.pwned = 1</script>.v",
    "[/]not rich markup[bold]",
    "two\nlines\r\x1b[31mred\x00.v",
    "\u202eevil.v",
    "</td></tr><tr><td>forged row",
]


def hostile(results: list[Body]) -> list[Body]:
    for body, name in zip(results, HOSTILE_NAMES, strict=False):
        body["request"]["name"] = body["result"]["artifact"] = name
    fail = results[1]["result"]
    fail["diagnostics"][0]["message"] = '<img src=x onerror="window.pwned=2">\n{{ 7*7 }} [/]'
    fail["diagnostics"][0]["context"] = "ctx\nwith\tcontrols\x07"
    fail["assumptions"] = ["<b>Ax</b>"]
    return results


def test_hostile_names_and_diagnostics_are_escaped_and_keep_the_table_whole(real_log, tmp_path):
    log = derive_log(real_log, tmp_path / "hostile" / "run.jsonl", hostile)
    summary = write_report(log, tmp_path / "report")
    html = page_of(tmp_path / "report")

    assert html.count("<script") == 1  # report.js, nothing from an artifact
    assert "<img src=x" not in html and "<b>Ax</b>" not in html
    assert "&lt;script&gt;window.pwned = 1&lt;/script&gt;.v" in html
    assert "&lt;img src=x onerror=&#34;window.pwned=2&#34;&gt;" in html
    assert "{{ 7*7 }}" in html  # data, never template code
    assert "two\\nlines\\r\\x1b[31mred\\x00.v" in html
    assert "\\u202eevil.v" in html and "\u202e" not in html

    rows = tables_of(html)["records"]
    assert len(rows) == summary.records
    assert all(len(row) == 6 for row in rows), "every row keeps its six cells"
    shown = [row[1].split("\n")[0] for row in rows]
    assert shown[: len(HOSTILE_NAMES)] == [visible(name) for name in HOSTILE_NAMES]
    assert "ctx\\nwith\\tcontrols\\x07" in html  # a one-line context shows its controls


# -- bad input -----------------------------------------------------------------------------------


def test_tampered_chain_is_refused_in_one_line(real_log, tmp_path):
    log = tmp_path / "tampered.jsonl"
    lines = real_log.read_bytes().splitlines(keepends=True)
    lines[2] = lines[2].replace(b'"verdict":"fail"', b'"verdict":"pass"')
    log.write_bytes(b"".join(lines))
    with pytest.raises(UserError) as refused:
        write_report(log, tmp_path / "report")
    message = str(refused.value)
    assert message.startswith("refusing to report on a tampered checkpoint:")
    assert "line 3" in message and "\n" not in message
    assert not (tmp_path / "report" / "index.html").exists()


@pytest.mark.parametrize(
    "content",
    [b"not a log at all\n", b'{"prover": "rocq", "name": "a.v", "content": ""}\n', b"\x89PNG\r\n"],
)
def test_a_file_that_is_not_a_log_is_refused(content, tmp_path):
    path = tmp_path / "input.jsonl"
    path.write_bytes(content)
    with pytest.raises(UserError, match="is not a prooflock checkpoint log"):
        write_report(path, tmp_path / "report")


def test_a_missing_log_is_refused(tmp_path):
    with pytest.raises(UserError, match="does not exist"):
        write_report(tmp_path / "nowhere.jsonl", tmp_path / "report")


@pytest.mark.parametrize("header_only", [False, True])
def test_an_empty_log_is_an_empty_report_saying_no_results(header_only, real_log, tmp_path):
    log = tmp_path / "empty.jsonl"
    if header_only:
        derive_log(real_log, log, lambda results: [])
    else:
        log.write_bytes(b"")
    summary = write_report(log, tmp_path / "report")
    assert (summary.records, summary.provers) == (0, {})
    html = page_of(tmp_path / "report")
    assert 'id="no-results"' in html and "No results" in html
    assert 'class="records"' not in html


def test_missing_and_corrupt_renders_are_named_not_fatal(real_log, tmp_path):
    log = derive_log(real_log, tmp_path / "run" / "run.jsonl")
    renders = tmp_path / "run" / "run.renders"
    results = bodies(log)[1]
    _, png = render_of(result_of(results, "triangle_labels.asy"))
    _, svg = render_of(result_of(results, "squares_grid.asy"))
    (renders / svg).unlink()

    def broken(results: list[Body]) -> list[Body]:
        for name, fmt, data in (
            ("triangle_moved.asy", "png", b"\x89PNG\r\n\x1a\nbroken"),
            ("fail_syntax.asy", "svg", b"<html>not svg</html>"),
        ):
            sha = sha256(data)
            (renders / sha).write_bytes(data)
            result_of(results, name)["outputs"] = [{"role": "render", "format": fmt, "sha256": sha}]
        return results

    log = derive_log(log, tmp_path / "run" / "broken.jsonl", broken)
    shutil.copytree(renders, tmp_path / "run" / "broken.renders", dirs_exist_ok=True)
    summary = write_report(log, tmp_path / "report")
    joined = "\n".join(summary.not_shown)
    assert "svg render: render not kept: 1 diagram (squares_grid.asy)" in joined
    assert "png render: not a valid PNG" in joined and "(triangle_moved.asy)" in joined
    assert "svg render: not a valid SVG" in joined and "(fail_syntax.asy)" in joined
    html = page_of(tmp_path / "report")
    assert "svg render: render not kept" in html
    assert f'src="renders/{png}.png"' in html  # the good one is still shown
    written = {path.name for path in summary.files}
    assert not any(name.startswith(svg) for name in written)


def test_reference_render_is_shown_beside_the_render(real_log, tmp_path):
    log = derive_log(real_log, tmp_path / "run" / "run.jsonl", with_reference_render)
    summary = write_report(log, tmp_path / "report")
    results = bodies(log)[1]
    _, moved = render_of(result_of(results, "triangle_moved.asy"))
    html = page_of(tmp_path / "report")
    assert f'<img class="render reference" src="renders/{moved}.png"' in html
    assert summary.not_shown == []


# -- bundles and replays ---------------------------------------------------------------------


def make_bundle(real_log: Path, root: Path) -> tuple[Path, dict[str, Any]]:
    """A bundle of the run: one artifact source and the SVG render left out of its blobs, and the
    Rocq records re-pointed at the locked rocq image (as a docker run would record them)."""
    lock = json.loads(LOCK.read_text())
    rocq = lock["images"]["rocq"]

    def on_docker(results: list[Body]) -> list[Body]:
        for body in results:
            if body["result"]["prover"] == "rocq":
                body["result"]["environment"]["install"] = {
                    "kind": "docker",
                    "image": rocq["tag"],
                    "image_id": rocq["image_id"],
                }
        return results

    bundle = root / "bundle"
    log = derive_log(real_log, bundle / "log.jsonl", on_docker)
    shutil.rmtree(bundle / "log.renders")  # a bundle keeps everything in blobs/
    blobs = bundle / "blobs" / "sha256"
    blobs.mkdir(parents=True)
    header, results = bodies(log)
    for body in results[1:]:  # the first artifact's source is left out
        data = body["request"]["content"].encode()
        (blobs / sha256(data)).write_bytes(data)
    renders = real_log.parent / f"{real_log.stem}.renders"
    _, svg = render_of(result_of(results, "squares_grid.asy"))
    for render in renders.iterdir():
        if render.name != svg:
            shutil.copy(render, blobs / render.name)
    (bundle / "images.lock.json").write_text(json.dumps({"images": {"rocq": rocq}}))
    statement = {
        "_type": "https://in-toto.io/Statement/v1",
        "predicateType": "https://prooflock.dev/run/v1",
        "subject": [
            {"name": "log.jsonl", "digest": {"sha256": sha256(log.read_bytes())}},
            {"name": "missing.bin", "digest": {"sha256": "0" * 64}},
        ],
    }
    (bundle / "statement.intoto.json").write_text(json.dumps(statement))
    return bundle, rocq


def test_bundle_shows_pins_and_says_which_blobs_are_missing(real_log, tmp_path):
    bundle, rocq = make_bundle(real_log, tmp_path)
    summary = write_report(bundle, tmp_path / "report")
    assert summary.records == len(requests())
    joined = "\n".join(summary.not_shown)
    assert "the sources of 1 artifacts are not in the bundle's blobs (pass_arith.v)" in joined
    assert "svg render: render not kept: 1 diagram (squares_grid.asy)" in joined
    assert "1 subjects of the statement are not in the bundle: missing.bin" in joined
    html = page_of(tmp_path / "report")
    environment = html[html.index('id="environment"') :]
    assert f"<code>{rocq['image_id']}</code>" in environment
    assert '<span class="match">matches</span>' in environment
    for name, value in rocq["inputs"].items():
        assert f"<dt>{name}</dt><dd><code>{value}</code></dd>" in environment
    assert "(not in the bundle's blobs)" in html


def test_bundle_without_blobs_lock_or_statement_still_reports(real_log, tmp_path):
    bundle = tmp_path / "bare"
    derive_log(real_log, bundle / "log.jsonl")
    shutil.rmtree(bundle / "log.renders")
    summary = write_report(bundle, tmp_path / "report")
    joined = "\n".join(summary.not_shown)
    assert "no blobs/sha256/ directory" in joined
    assert "no images.lock.json" in joined and "no statement.intoto.json" in joined
    assert "png render: render not kept: 2 diagrams" in joined


def test_the_page_says_who_signed_the_bundle_what_the_audit_found_and_who_reproduced_it(
    tmp_path,
):
    keys = tmp_path / "keys"
    keys.mkdir()
    publisher, replayer = make_key(keys, "publisher"), make_key(keys, "replayer")
    trust = TrustPolicy((load_public(publisher.public), load_public(replayer.public)))
    bundle = published(tmp_path, "example-local", publisher)
    report = tmp_path / "repro.json"
    chain = inspect_chain(bundle / "log.jsonl")
    write_reproduction(
        ReproductionSummary(
            verifier="alice@lab",
            resource=str(bundle),
            log_sha256=sha256((bundle / "log.jsonl").read_bytes()),
            head=chain.head,
            records=len(chain.records),
            statement_sha256=None,
            environment={"backend": "local", "host": "lab"},
            outcomes=[],
        ),
        report,
        load_signer(replayer.private),
    )
    attach(bundle, report)

    write_report(bundle, tmp_path / "signed", trust=trust)
    html = page_of(tmp_path / "signed")
    assert 'class="integrity signed"' in html
    assert f"signed by {publisher.id} (publisher.key.pub)" in html
    assert "audit: clean: 14 results, 15 records, every check passed" in html
    assert f"independently reproduced by {replayer.id} (replayer.key.pub)" in html

    write_report(bundle, tmp_path / "untrusted")  # no --trust: the signature is not checked
    assert 'class="integrity integrity-only"' in page_of(tmp_path / "untrusted")

    statement = orjson.loads((bundle / "statement.intoto.json").read_bytes())
    statement["predicate"]["runDetails"]["byproducts"][0]["annotations"]["hosts"] = ["ci"]
    (bundle / "statement.intoto.json").write_bytes(orjson.dumps(statement))
    write_report(bundle, tmp_path / "forged", trust=trust)
    html = page_of(tmp_path / "forged")
    assert 'class="integrity not-trusted"' in html and "audit: 2 problems" in html
    assert "hosts: the statement says" in html


def test_a_directory_without_a_log_is_not_a_bundle(tmp_path):
    with pytest.raises(UserError, match="holds no log.jsonl"):
        write_report(tmp_path, tmp_path / "report")


def replay_file(real_log: Path, path: Path, differ: int, artifact: str | None = None) -> Path:
    runs = list(recorded_runs(inspect_chain(real_log).records))
    rows = []
    for index, (_, result) in enumerate(runs):
        row = {
            "index": index,
            "artifact": artifact or result.artifact,
            "recorded": result.verdict.value,
            "replayed": result.verdict.value,
            "status": "match",
            "changed_inputs": [],
        }
        if index == differ:
            row.update(
                replayed="pass",
                status="verdict differs, environment changed",
                changed_inputs=["install.coqc: 8.16.1 → 8.17.0"],
            )
        rows.append(row)
    matched = sum(row["status"] == "match" for row in rows)
    path.write_text(
        json.dumps(
            {
                "schema": "prooflock.replay/1",
                "log": str(real_log),
                "matched": matched,
                "total": len(rows),
                "rows": rows,
            }
        )
    )
    return path


def test_replay_shows_matched_and_differed_record_by_record(real_log, tmp_path):
    replay = replay_file(real_log, tmp_path / "replay.json", differ=1)
    summary = write_report(real_log, tmp_path / "report", replay=replay)
    assert summary.not_shown == []  # the reference's render is kept beside the artifact's
    html = page_of(tmp_path / "report")
    total = len(requests())
    assert f"<strong>{total - 1}</strong> of <strong>{total}</strong> records matched" in html
    replayed = tables_of(html)["replay"]
    assert [row[4] for row in replayed].count("match") == total - 1
    assert replayed[1][4] == "verdict differs, environment changed"
    assert "install.coqc: 8.16.1 → 8.17.0" in replayed[1][5]
    records = tables_of(html)["records"]
    assert all(len(row) == 7 for row in records), "a replay column is added"
    assert records[1][6] == "verdict differs, environment changed"


def test_a_replay_on_another_line_shows_each_records_drift_not_mismatches(real_log, tmp_path):
    path = replay_file(real_log, tmp_path / "replay.json", differ=1)
    data = json.loads(path.read_text())
    for row in data["rows"]:
        row.update(line="rocq-8.20", changed_inputs=[])
        row["status"] = "different verdict" if row["index"] == 1 else "same verdict"
    total = len(data["rows"])
    data["drift_by_prover"] = {
        "rocq on rocq-8.20": {"same verdict": total - 1, "different verdict": 1, "error": 0}
    }
    path.write_text(json.dumps(data))
    write_report(real_log, tmp_path / "report", replay=path)
    html = page_of(tmp_path / "report")
    assert "Re-checked on other prover versions" in html
    assert (
        f"<strong>{total - 1}</strong> of <strong>{total}</strong> records kept their verdict"
        in html
    )
    assert (
        f"rocq on rocq-8.20</code>: {total - 1} same verdict, 1 different verdict, 0 error" in html
    )
    replayed = tables_of(html)["replay"]
    assert replayed[1][3] == "pass on rocq-8.20" and replayed[1][4] == "different verdict"
    records = tables_of(html)["records"]
    assert records[0][6] == "same verdict" and records[1][6] == "different verdict"


def test_replay_of_another_log_is_said_so(real_log, tmp_path):
    replay = replay_file(real_log, tmp_path / "replay.json", differ=-1, artifact="other.v")
    summary = write_report(real_log, tmp_path / "report", replay=replay)
    assert any("made from another log" in sentence for sentence in summary.not_shown)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("[]", "not a prooflock replay file"),
        ('{"schema": "prooflock.replay/1", "rows": [{"index": "x"}]}', "not a valid replay file"),
        ("{", "cannot read replay file"),
    ],
)
def test_a_bad_replay_file_is_refused(content, message, real_log, tmp_path):
    replay = tmp_path / "replay.json"
    replay.write_text(content)
    with pytest.raises(UserError, match=message):
        write_report(real_log, tmp_path / "report", replay=replay)


# -- in a real browser -----------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.browser
def test_report_loads_offline_in_chromium_with_every_row_and_image(real_log, tmp_path):
    require_browser()
    log = derive_log(real_log, tmp_path / "run" / "run.jsonl", with_reference_render)
    summary = write_report(log, tmp_path / "report")
    hostile_log = derive_log(real_log, tmp_path / "hostile" / "run.jsonl", hostile)
    write_report(hostile_log, tmp_path / "hostile-report")
    runs = list(recorded_runs(inspect_chain(log).records))

    with chromium() as browser:
        page = browser.open(tmp_path / "report" / "index.html")
        shot = page.screenshot("report.png")
        assert page.errors == []
        assert all(url.startswith("file://") for url in page.requests), page.requests

        counts = page.page.eval_on_selector_all(
            "td.count[data-verdict]:not([data-total])",
            "cells => cells.map(c => [c.dataset.prover, c.dataset.verdict, Number(c.textContent)])",
        )
        shown = {(prover, verdict): n for prover, verdict, n in counts if n}
        expected = Counter((r.prover, r.verdict.value) for _, r in runs)
        per_prover = Counter(result.prover for _, result in runs)
        expected.update({(prover, "all"): n for prover, n in per_prover.items()})
        assert shown == dict(expected)

        names = page.page.eval_on_selector_all(
            "table.records tbody tr", "rows => rows.map(r => r.querySelector('.name').textContent)"
        )
        assert sorted(names) == sorted(result.artifact for _, result in runs)

        images = page.page.eval_on_selector_all(
            "img.render, figure.plot img",
            "images => images.map(i => [i.getAttribute('src'), i.complete, i.naturalWidth])",
        )
        renders = [src for src, _, _ in images if src.startswith("renders/")]
        assert len(renders) == 4  # triangle_labels, its reference, triangle_moved, squares_grid
        assert all(complete and width > 0 for _, complete, width in images), images

        page.page.fill('[data-controls="prover-1-table"] input', "fail_tactic")
        assert page.page.text_content('[data-controls="prover-1-table"] output') == "1 of 3 shown"
        page.page.click("#prover-1-table th:nth-child(6) button")
        page.page.click("#prover-1-table th:nth-child(6) button")  # descending: slowest first
        times = page.page.eval_on_selector_all(
            "#prover-1-table tbody tr", "rows => rows.map(r => Number(r.cells[5].dataset.value))"
        )
        assert times == sorted(times, reverse=True)

        evil = browser.open(tmp_path / "hostile-report" / "index.html")
        assert evil.errors == []
        assert evil.page.evaluate("window.pwned") is None, "no artifact text ran as code"
        evil_names = evil.page.eval_on_selector_all(
            "table.records tbody tr", "rows => rows.map(r => r.querySelector('.name').textContent)"
        )
        assert evil_names[: len(HOSTILE_NAMES)] == [visible(name) for name in HOSTILE_NAMES]

    assert shot.stat().st_size > 10_000 and shot.read_bytes().startswith(b"\x89PNG")
    assert summary.records == len(runs)


# -- size and time ---------------------------------------------------------------------------


@pytest.mark.slow
def test_a_thousand_record_run_reports_in_seconds(real_log, tmp_path, capsys):
    def thousand(results: list[Body]) -> list[Body]:
        many = []
        for index in range(1000):
            body = copy.deepcopy(results[index % len(results)])
            name = f"{index:04d}-{body['result']['artifact']}"
            body["request"]["name"] = body["result"]["artifact"] = name
            many.append(body)
        return many

    log = derive_log(real_log, tmp_path / "big" / "run.jsonl", thousand)
    started = time.monotonic()
    summary = write_report(log, tmp_path / "report")
    seconds = time.monotonic() - started
    size = sum(path.stat().st_size for path in summary.files)
    page = (tmp_path / "report" / "index.html").stat().st_size
    with capsys.disabled():
        print(
            f"\n1,000-record report: {seconds:.2f} s, index.html {page / 1e6:.2f} MB, "
            f"{len(summary.files)} files {size / 1e6:.2f} MB in all"
        )
    assert summary.records == 1000
    assert len(tables_of(page_of(tmp_path / "report"))["records"]) == 1000
    assert seconds < 30 and page < 10_000_000
    assert orjson.loads(orjson.dumps(summary.as_json()))["records"] == 1000


def test_a_refused_artifact_shows_what_the_log_kept_and_counts_against_the_pass_rate(tmp_path):
    good = "Lemma a : True. exact I. Qed.\n"
    big = good + "(* " + "x" * (2 << 20) + " *)\n"
    settings = Settings(backend="local", cache_dir=tmp_path / "cache", max_artifact_mb=1)
    requests = [CheckRequest(prover="rocq", name=f"big{i}.v", content=big) for i in range(2)]
    with Checker(settings) as checker:  # nothing runs: both are refused before any check
        run_requests(requests, tmp_path / "run.jsonl", checker, source="refusals")
    write_report(tmp_path / "run.jsonl", tmp_path / "report")
    html = page_of(tmp_path / "report")
    assert summary_cell(html, "rocq", "refused") == 2
    assert '<td class="rate">0.0 %</td>' in html  # refused is never a pass
    digest = sha256(big.encode())
    assert f"not kept in the log: {len(big.encode())} bytes, sha256 {digest}" in html
    assert "over the 1 MB limit" in html
