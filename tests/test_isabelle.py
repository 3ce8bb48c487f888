"""Isabelle verdicts through the Checker users call, on the local backend, with the server double.

Isabelle cannot be installed here, so `isabelle server` is a shim running
tests/doubles/isabelle_server_double.py, which serves the real TCP protocol on loopback and
decides from the theory text by documented rules (see its docstring). The kit side is real: the
source policy, the in-sandbox worker (sandbox/isabelle_worker.py) with its session, watchdog,
cancel and purge, the pool and the verdict ladder. Each test gets its own checker and a log of
every command the "server" received.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from runner.check.checker import Checker
from runner.core.errors import BadRequest
from runner.core.models import CheckRequest, CheckResult, Target, Trust, Verdict
from runner.core.settings import Settings
from runner.provers.isabelle import judging, source, worker
from tests.support.doubles import checker_on_doubles

DOUBLES = Path(__file__).parent / "doubles"
sys.path.insert(0, str(DOUBLES))
import isabelle_server_double  # noqa: E402
import shims  # noqa: E402


def theory(body: str, name: str = "Scratch", imports: str = "Main") -> str:
    return f"theory {name} imports {imports} begin\n\n{body}\n\nend\n"


GOOD = theory('lemma rev_rev: "rev (rev xs) = xs" by simp')


class Isabelle:
    def __init__(self, checker: Checker, log: Path):
        self.checker, self.log = checker, log

    def check(self, content: str, *, name: str = "Scratch.thy", **fields) -> CheckResult:
        fields.setdefault("timeout", 10)
        request = CheckRequest(prover="isabelle", name=name, content=content, **fields)
        return self.checker.check_one(request)

    def commands(self, name: str | None = None) -> list[str]:
        lines = self.log.read_text().splitlines() if self.log.exists() else []
        return [line for line in lines if name is None or line.split(" ", 1)[0] == name]


@pytest.fixture
def isabelle(tmp_path, monkeypatch, request) -> Iterator[Isabelle]:
    log = tmp_path / "server.log"
    # `@pytest.mark.parametrize("isabelle", [{"conceal": True}], indirect=True)`: a double that
    # does not announce itself, as the real server would not.
    for checker in checker_on_doubles(tmp_path, monkeypatch, log, getattr(request, "param", {})):
        yield Isabelle(checker, log)


def only(result: CheckResult):
    [diagnostic] = result.diagnostics
    return diagnostic


# -- the double is the server's protocol ---------------------------------------------------


def test_the_double_frames_messages_as_the_recorded_server_did():
    # purge_theories is left out: its recording carries a length header on an 86-byte line,
    # which Isabelle's Byte_Message.write_line_message would not write (readers accept both).
    names = (
        "help",
        "session_start",
        "session_stop",
        "unknown",
        "use_theories",
        "use_theories.Fail",
        "use_theories.Sledgehammer",
    )
    for name in names:
        raw = (isabelle_server_double.TRANSCRIPTS / name).read_bytes()
        messages = isabelle_server_double.recorded(name)
        assert messages
        assert (
            b"".join(isabelle_server_double.frame(m) for m in messages) == raw.rstrip(b"\n") + b"\n"
        )


def test_every_isabelle_transcript_is_listed_with_its_origin():
    # The recordings come from the isabelle-client package; a raw recording cannot say so
    # itself, so the README's table names each file's origin and its sha256.
    readme = (DOUBLES / "README.md").read_text()
    files = sorted(isabelle_server_double.TRANSCRIPTS.iterdir())
    assert [f.name for f in files if f.name == "LICENSE"] == ["LICENSE"]  # Apache-2.0, as shipped
    for path in files:
        if path.name == "LICENSE":
            continue
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
        origin = f"isabelle_client/resources/isabelle-responses/{path.name}"
        assert f"| `{path.name}` | `{origin}` | `{digest}` |" in readme, path.name


# -- verdicts ------------------------------------------------------------------------------


def test_a_proof_passes_and_names_its_theorems(isabelle):
    result = isabelle.check(GOOD)
    assert result.verdict is Verdict.PASS, result.diagnostics
    assert result.details["theorems"] == ["Scratch.rev_rev"]
    assert result.trust is Trust.DOUBLE  # the double said so, answering the password


@pytest.mark.parametrize("isabelle", [{"conceal": True}], indirect=True)
def test_a_server_that_does_not_announce_a_double_gives_kernel_verdicts(isabelle):
    # What the real server does: its verdicts rest on Isabelle's kernel.
    passed = isabelle.check(GOOD)
    assert (passed.verdict, passed.trust) == (Verdict.PASS, Trust.KERNEL)
    failed = isabelle.check(GOOD, options={"session": "No_Such_Session"})
    assert (failed.verdict, failed.trust) == (Verdict.FAIL, Trust.KERNEL)


def test_a_session_the_double_does_not_have_is_the_double_s_verdict_too(isabelle):
    failed = isabelle.check(GOOD, options={"session": "No_Such_Session"})
    assert (failed.verdict, failed.trust) == (Verdict.FAIL, Trust.DOUBLE)


def test_a_failed_proof_fails_at_its_line_and_column(isabelle):
    result = isabelle.check(theory('lemma bad: "(2::nat) + 2 = 5" by simp'))
    assert result.verdict is Verdict.FAIL
    error = only(result)
    assert (error.line, error.column) == (3, 30)
    assert error.message.startswith("Failed to finish proof")


def test_columns_count_isabelle_symbols_as_one():
    text = 'lemma "\\<forall>x. P x"\n  by  simp\n'
    assert (
        judging.column_of(text, 2, len(judging.SYMBOL.findall(text[: text.index("simp")])) + 1) == 6
    )


def test_sorry_and_oops_are_placeholders_in_proof_mode_only(isabelle):
    sorry = theory('lemma s: "x = x" sorry')
    result = isabelle.check(sorry)
    assert result.verdict is Verdict.PLACEHOLDER
    assert only(result).message == "proof left unfinished: Scratch.s"
    assert isabelle.check(sorry, mode="statement").verdict is Verdict.PASS
    oops = isabelle.check(theory('lemma s: "x = (y::nat)"\n  oops'))
    assert oops.verdict is Verdict.PLACEHOLDER
    assert only(oops).message == "proof left unfinished: oops at line 4"


def test_axiomatization_is_an_axiom_unless_allowed_by_its_full_name(isabelle):
    content = theory('axiomatization where ax: "False"\nlemma t: "P" using ax by simp')
    result = isabelle.check(content)
    assert result.verdict is Verdict.AXIOM
    assert result.assumptions == ["Scratch.ax"]
    assert isabelle.check(content, allowed_axioms=("Scratch.ax",)).verdict is Verdict.PASS
    # A short name never covers an axiom the theory declares itself.
    assert isabelle.check(content, allowed_axioms=("ax",)).verdict is Verdict.AXIOM


@pytest.mark.parametrize(
    ("body", "axiom"),
    [
        ('typedef pos = "{n::nat. n > 0}" by auto', "Scratch.type_definition_pos"),
        ("typedef 'a box = \"UNIV :: 'a set\" by auto", "Scratch.type_definition_box"),
        ("datatype tree = Leaf | Node tree tree", "Scratch.type_definition_tree"),
        ("datatype ('a, 'b) pair = Pair 'a 'b", "Scratch.type_definition_pair"),
        ("record point = x :: nat  y :: nat", "Scratch.type_definition_point_ext"),
    ],
)
def test_types_are_not_axioms_when_the_typedef_package_made_them(isabelle, body, axiom):
    content = theory(f'{body}\nlemma t: "x = x" by simp')
    result = isabelle.check(content)
    assert result.verdict is Verdict.PASS, result.diagnostics
    assert result.assumptions == []
    # The same name from an axiomatization is an axiom: only the typedef package's are types.
    name = axiom.split(".")[1]
    forged = isabelle.check(theory(f'axiomatization where {name}: "False"\nlemma t: "P" by simp'))
    assert (forged.verdict, forged.assumptions) == (Verdict.AXIOM, [f"Scratch.{name}"])


@pytest.mark.parametrize("name", ["cheat_def", "cheat_def_raw", "type_definition_cheat"])
def test_an_axiom_named_like_a_definition_beside_an_allowed_one_is_still_an_axiom(isabelle, name):
    content = theory(
        f'axiomatization where ok: "True" and {name} [simp]: "False"\nlemma t: "P" by simp'
    )
    result = isabelle.check(content, allowed_axioms=("Scratch.ok",))
    assert result.verdict is Verdict.AXIOM
    assert result.assumptions == sorted(["Scratch.ok", f"Scratch.{name}"])


def test_definitions_are_not_axioms(isabelle):
    result = isabelle.check(
        theory(
            'definition double where "double n = n + (n::nat)"\nlemma d: "double 0 = 0" by (simp add: double_def)'
        )
    )
    assert result.verdict is Verdict.PASS
    assert result.assumptions == []


@pytest.mark.parametrize(
    ("body", "word"),
    [
        ('ML \\<open> writeln "hi" \\<close>', "ML"),
        ('ML_file "evil.ML"', "ML_file"),
        ("setup \\<open> I \\<close>", "setup"),
        ("declare [[quick_and_dirty]]", "quick_and_dirty"),
        ('lemma t: "x = x" using [[quick_and_dirty = true]] sorry', "quick_and_dirty"),
        ("oracle forge = \\<open> fn ct => ct \\<close>", "oracle"),
        ('lemma t: "x = x"\n  sledgehammer\n  oops', "sledgehammer"),
        (
            'code_printing constant HOL.equal \\<rightharpoonup> (SML) "!((_ : int) = _)"',
            "code_printing",
        ),
    ],
)
def test_what_could_bypass_the_kernel_is_refused_before_it_runs(isabelle, body, word):
    result = isabelle.check(theory(body))
    assert result.verdict is Verdict.FAIL
    assert only(result).message.startswith(f"`{word}` is not allowed")
    assert isabelle.commands() == []  # no server was started


def test_words_inside_propositions_and_comments_are_not_commands(isabelle):
    content = theory(
        '(* ML setup oracle *)\nlemma t: "ML = ML" text \\<open>setup\\<close> by simp'
    )
    assert isabelle.check(content).verdict is Verdict.PASS


# -- bad input -----------------------------------------------------------------------------


def test_a_file_name_that_is_not_a_theory_name_is_a_bad_request(isabelle):
    with pytest.raises(BadRequest, match="'my-theory.thy' is not a theory file name"):
        isabelle.check(GOOD, name="my-theory.thy")
    assert isabelle.commands() == []  # refused before any server started


def test_the_header_must_name_the_file(isabelle):
    with pytest.raises(BadRequest) as refused:
        isabelle.check(GOOD, name="Other.thy")
    assert str(refused.value) == (
        "the theory header names theory 'Scratch', but the file is 'Other.thy': they must agree"
    )
    assert isabelle.commands() == []


def test_the_cli_refuses_a_misnamed_theory_with_exit_2(cli, tmp_path):
    log = tmp_path / "server.log"
    shims.write_shims(tmp_path / "bin", DOUBLES, log)
    (tmp_path / "Other.thy").write_text(GOOD)
    done = cli(
        "check", "--prover", "isabelle", "Other.thy",
        env={"PATH": f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}"},
        check=2,
    )  # fmt: skip
    assert done.stdout == ""
    assert done.stderr.splitlines() == [
        "prooflock: error: the theory header names theory 'Scratch', but the file is "
        "'Other.thy': they must agree"
    ]
    assert not log.exists()  # no server was started


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        ("(* never closed\ntheory Scratch imports Main begin end\n", "the theory does not lex"),
        ('lemma t: "x = x" by simp\n', "does not start with a theory header"),
    ],
)
def test_a_file_that_is_not_a_theory_fails_without_a_server(isabelle, content, problem):
    result = isabelle.check(content)  # the artifact's own failure, not a bad request
    assert result.verdict is Verdict.FAIL
    assert problem in only(result).message
    assert isabelle.commands() == []


def test_an_import_the_session_does_not_have_fails(isabelle):
    result = isabelle.check(theory('lemma t: "x = x" by simp', imports='Main "HOL-Nope.Nothing"'))
    assert result.verdict is Verdict.FAIL
    assert 'Bad theory import "HOL-Nope.Nothing"' in only(result).message


def test_an_unknown_session_fails_naming_it(isabelle):
    result = isabelle.check(GOOD, options={"session": "No_Such_Session"})
    assert result.verdict is Verdict.FAIL
    assert only(result).message.startswith("session No_Such_Session is not in the isabelle image")


# -- targets -------------------------------------------------------------------------------


def test_targets_compare_the_theorem_s_proposition(isabelle):
    same = isabelle.check(GOOD, target=Target(name="rev_rev", statement="rev (rev xs) = xs"))
    assert same.verdict is Verdict.PASS
    other = isabelle.check(GOOD, target=Target(name="rev_rev", statement="rev xs = xs"))
    assert other.verdict is Verdict.WRONG_STATEMENT
    assert "rev (rev xs) = xs" in only(other).message and "rev xs = xs" in only(other).message
    missing = isabelle.check(GOOD, target=Target(name="absent", statement="True"))
    assert missing.verdict is Verdict.WRONG_STATEMENT
    assert only(missing).message.startswith("no theorem named `absent`")


@pytest.mark.parametrize(
    ("statement", "problem"),
    [
        ("rev (rev xs = xs", "leaves a bracket open (missing ')')"),
        ("rev [rev xs) = xs", "closes ']' with ')'"),
        ("xs = ''abc", "leaves `''` open"),
        ("x = y \\<close> ML \\<open>", "closes a cartouche it never opened"),
        ("\\<forall x. x = x", "a `\\<` that does not start an Isabelle symbol"),
        ("  ", "the target statement is empty"),
    ],
)
def test_a_target_that_cannot_parse_is_a_bad_request(isabelle, statement, problem):
    with pytest.raises(BadRequest) as refused:
        isabelle.check(GOOD, target=Target(name="rev_rev", statement=statement))
    assert problem in str(refused.value) and "\n" not in str(refused.value)
    assert isabelle.commands() == []


def test_a_name_in_letters_beyond_ascii_is_read_not_a_crash(isabelle):
    # Isabelle reads UTF-8 letters as symbols; the kit's reader once failed an assertion on them
    # (an artifact must never make an infra error)
    result = isabelle.check(theory('lemma α: "x = x" by simp'))
    assert result.verdict is not Verdict.INFRA_ERROR, result.diagnostics
    assert [t.text for t in source.tokens("lemma α: True sorry")] == [
        "lemma",
        "α",
        ":",
        "True",
        "sorry",
    ]


def test_brackets_inside_strings_cartouches_and_comments_need_not_pair():
    for statement in ("s = ''(''", "s = ‹(›", "(* ( *) x = x", "\\<forall>x. f (x) = [x]"):
        assert source.target_problem(statement) is None, statement


def test_a_target_isabelle_cannot_read_fails(isabelle):
    # The double's stand-in for Isabelle's own reading: a type named undeclared_... is unknown.
    target = Target(name="rev_rev", statement="rev (rev (xs :: undeclared_t)) = xs")
    result = isabelle.check(GOOD, target=target)
    assert result.verdict is Verdict.FAIL
    assert only(result).message.startswith(
        "the target statement does not parse under the theory's imports: Undefined type name"
    )


# -- the server: one session, purging, cancelling, restarting ------------------------------


def test_one_session_serves_many_checks_and_every_check_is_purged(isabelle):
    results = [isabelle.check(GOOD) for _ in range(3)]
    assert all(r.verdict is Verdict.PASS for r in results)
    assert len(isabelle.commands("session_start")) == 1
    assert len(isabelle.commands("purge_theories")) == len(isabelle.commands("use_theories")) == 3
    stats = results[-1].provenance.extra["isabelle_worker"]
    assert stats["purged"] == 6  # the artifact and the report theory, each time
    assert len({r.provenance.extra["worker_id"] for r in results}) == 1


def test_another_session_is_another_server(isabelle):
    isabelle.check(GOOD)
    analysis = isabelle.check(GOOD, options={"session": "HOL-Analysis"})
    assert analysis.verdict is Verdict.PASS
    assert [
        json.loads(c.split(" ", 1)[1])["session"] for c in isabelle.commands("session_start")
    ] == [
        "HOL",
        "HOL-Analysis",
    ]


def test_the_worker_is_recycled_after_max_checks(isabelle, monkeypatch):
    monkeypatch.setattr(worker, "MAX_CHECKS", 2)
    results = [isabelle.check(GOOD) for _ in range(3)]
    assert all(r.verdict is Verdict.PASS for r in results)
    assert len(isabelle.commands("session_start")) == 2


@pytest.mark.slow
def test_a_check_past_its_time_is_cancelled_and_the_next_one_runs(isabelle):
    slow = isabelle.check(theory('(* double:sleep *)\nlemma t: "x = x" by simp'), timeout=2)
    assert slow.verdict is Verdict.TIMEOUT
    assert len(isabelle.commands("cancel")) == 1
    after = isabelle.check(GOOD, timeout=2)
    assert after.verdict is Verdict.PASS
    assert after.provenance.extra["isabelle_worker"]["server_starts"] == 1  # cancel sufficed


@pytest.mark.slow
def test_a_task_that_ignores_cancel_restarts_the_server(isabelle):
    hung = isabelle.check(theory('(* double:hang *)\nlemma t: "x = x" by simp'), timeout=1)
    assert hung.verdict is Verdict.TIMEOUT
    assert "restarted" in only(hung).message
    after = isabelle.check(GOOD, timeout=5)
    assert after.verdict is Verdict.PASS
    assert after.provenance.extra["worker_id"] != hung.provenance.extra["worker_id"]


def test_a_server_crash_is_a_crash_and_the_next_check_gets_a_fresh_server(isabelle):
    crashed = isabelle.check(theory('(* double:crash *)\nlemma t: "x = x" by simp'))
    assert crashed.verdict is Verdict.CRASH
    after = isabelle.check(GOOD)
    assert after.verdict is Verdict.PASS
    assert after.provenance.extra["isabelle_worker"]["server_starts"] == 2
    assert len(isabelle.commands("session_start")) == 2


# -- the source policy, on its own ---------------------------------------------------------


def test_the_header_is_read_with_quoted_and_qualified_imports():
    found = source.header('theory T\n  imports Main "HOL-Library.Multiset"\nbegin\nend\n')
    assert found is not None
    assert (found.name, found.imports) == ("T", ("Main", "HOL-Library.Multiset"))


def test_the_worker_runs_inside_the_local_sandbox(tmp_path, monkeypatch):
    monkeypatch.setenv("PROOFLOCK_LOCAL_SANDBOX", "auto")
    with shims.sandboxed_shims() as directory:
        monkeypatch.setenv("PATH", f"{directory}{os.pathsep}{os.environ['PATH']}")
        settings = Settings(
            backend="local", cache=False, checkpoint_dir=tmp_path / "c", cache_dir=tmp_path / "k"
        )
        with Checker(settings) as checker:
            request = CheckRequest(prover="isabelle", name="Scratch.thy", content=GOOD, timeout=20)
            result = checker.check_one(request)
            if result.provenance.isolation != "bubblewrap":
                pytest.skip("bubblewrap cannot run on this machine")
            assert result.verdict is Verdict.PASS, result.diagnostics  # loopback TCP inside


# -- the session driver reads every recorded reply ----------------------------------------

ROOT = Path(__file__).resolve().parent.parent
RECORDINGS = DOUBLES / "transcripts" / "isabelle"
# Per recording: what the driver's `Connection` must return for its command (a synchronous
# command's OK body, or an asynchronous one's final kind, body and count of NOTEs).
READ_AS = {
    "cancel": ("OK", None, 0),
    "help": ("OK", "cancel echo help purge_theories session_build session_start session_stop "
                   "shutdown use_theories", 0),
    "purge_theories": ("OK", [{"node_name": "/tmp/Mock.thy", "theory_name": "Draft.Mock"}], 0),
    "session_build": ("FINISHED", True, 17),
    "session_start": ("FINISHED", "167dd6d8-1eeb-4315-8022-c8c527d9bd87", 15),
    "session_stop": ("FINISHED", True, 0),
    "shutdown": ("OK", None, 0),
    "unknown": ("ERROR", "Bad command 'unknown'", 0),
    "use_theories": ("FINISHED", True, 3),
    "use_theories.Fail": ("FINISHED", False, 2),
    "use_theories.Sledgehammer": ("FINISHED", True, 2),
}  # fmt: skip


@pytest.fixture
def recorded_server() -> Iterator[tuple[str, int]]:
    """A loopback server answering each command with a recording, byte for byte: the one its
    `recording` argument names, else the command's own (the password gets an identity)."""
    import socketserver
    import threading

    class Replies(socketserver.StreamRequestHandler):
        def handle(self) -> None:
            self.rfile.readline()
            self.wfile.write(b'OK {"isabelle_id":"recorded","isabelle_name":"Isabelle2025-2"}\n')
            # One command per connection, then its end: `use_theories.Sledgehammer`'s last
            # frame is one byte short of its length header (its final newline is not in the
            # file), which only the end of the connection completes.
            command, _, args = self.rfile.readline().decode().partition(" ")
            name = json.loads(args or "{}").get("recording", command.strip())
            self.wfile.write((RECORDINGS / name).read_bytes())

    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Replies)
    server.daemon_threads, server.block_on_close = True, False  # a client may leave it open
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield server.server_address[0], server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def driver():
    """The in-sandbox driver module (runner/provers/isabelle/sandbox/isabelle_worker.py)."""
    sys.path[:0] = [
        str(ROOT / "runner" / "provers" / "isabelle" / "sandbox"),
        str(ROOT / "runner" / "provers" / "common" / "sandbox"),
    ]
    import isabelle_worker

    return isabelle_worker


def read_with(driver, address: tuple[str, int], name: str) -> tuple[str, object, int]:
    import time

    connection = driver.Connection(*address, "password")
    deadline = time.monotonic() + 30
    try:
        if name in ("cancel", "help", "purge_theories", "shutdown", "unknown"):
            try:
                body = connection.command(name, {"recording": name}, deadline)
            except driver.ServerDied as exc:
                return "ERROR", str(exc).split(": ", 1)[1].strip('"'), 0
            if name == "help":
                body = " ".join(body)
            elif name == "purge_theories":
                body = body["purged"]
            return "OK", body, 0
        kind, body, notes = connection.task(name.split(".")[0], {"recording": name}, deadline)
        value = body.get("session_id", body.get("ok"))
        return kind, value, len(notes)
    finally:
        connection.close()


@pytest.mark.parametrize("name", sorted(READ_AS))
def test_the_session_driver_reads_every_recorded_reply(recorded_server, driver, name):
    # isabelle-client 1.1.2's recordings (unchanged at its repository's b9835bc), served as
    # recorded: length-prefixed and plain lines, NOTEs, FINISHED, ERROR, an empty trailing line.
    assert read_with(driver, recorded_server, name) == READ_AS[name]


def test_every_recording_has_its_reading_written_here():
    assert set(READ_AS) == {p.name for p in RECORDINGS.iterdir() if p.name != "LICENSE"}


def test_a_recorded_failed_proof_is_read_as_a_fail_at_its_line(recorded_server, driver):
    import time

    connection = driver.Connection(*recorded_server, "password")
    try:
        recording = {"recording": "use_theories.Fail"}
        _, body, _ = connection.task("use_theories", recording, time.monotonic() + 30)
    finally:
        connection.close()
    reply = driver.Worker.result(None, body, ["Example"], "Prooflock_Report_0")
    [error] = reply["errors"]
    assert (error["pos"]["line"], reply["ok"]) == (5, False)
    assert error["message"].startswith("Failed to finish proof")
