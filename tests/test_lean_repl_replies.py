"""The kit's REPL client reads every reply shape the Lean REPL sends, as the transcripts hold them.

`lean_repl_double.py --replay NAME` answers each request with transcript NAME's next reply, byte
for byte (it decides nothing). The client the in-sandbox server uses (sandbox/lean_server.py's
`Repl`) must read each reply as its JSON, and the kit's judging must give each command's reply
the verdict written here by hand. The transcripts are authored in the shape of the REPL's own
recorded test suite (see tests/doubles/README.md); the same run on the recorded suite itself is
described there, not repeated here (its files stay out of the repository).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from runner.provers.lean import judging
from runner.provers.lean.source import Header

ROOT = Path(__file__).resolve().parent.parent
DOUBLES = ROOT / "tests" / "doubles"
sys.path[:0] = [
    str(ROOT / "runner" / "provers" / "lean" / "sandbox"),
    str(ROOT / "runner" / "provers" / "common" / "sandbox"),
    str(DOUBLES),
]
import lean_repl_double  # noqa: E402
import lean_server  # noqa: E402

# Per transcript, the verdict (proof mode) each reply justifies; None: not a command's reply.
EXPECTED = {
    "chained_unknown_identifier": ["pass", "pass", "fail"],
    "error_beside_sorry": ["fail", "placeholder", None, None],
    "header_import": ["pass", "pass", "fail"],
    "mathlib_tactic_mode": ["pass", "placeholder", None, "placeholder", None, None],
    "missing_environment": ["pass", "fail"],
    "pickle_round_trip": ["pass", None, None, "pass"],
    "set_option_print": ["pass", "pass", "pass"],
    "term_placeholder": ["placeholder"],
    "two_errors": ["fail"],
    "type_mismatch": ["fail", "pass"],
    "variables_and_linter": ["pass", "pass", "placeholder"],
}


def exchanges(name: str) -> list[tuple[dict, dict]]:
    text = (lean_repl_double.TRANSCRIPTS / f"{name}.in").read_text()
    requests = [json.loads(frame) for frame in lean_repl_double.frames(text)]
    replies = lean_repl_double.frames(
        (lean_repl_double.TRANSCRIPTS / f"{name}.expected.out").read_text()
    )
    assert len(requests) == len(replies), name
    return [(request, json.loads(reply)) for request, reply in zip(requests, replies, strict=True)]


def replayed(name: str) -> list[dict]:
    """What the kit's client read, request by request, from the transcript's replies."""
    argv = [sys.executable, "-B", str(DOUBLES / "lean_repl_double.py"), "--replay", name]
    repl = lean_server.Repl(argv, memory_mb=1024, address_space_mb=1 << 20)
    try:
        return [repl.command(request, time.monotonic() + 30) for request, _ in exchanges(name)]
    finally:
        repl.kill()


def verdict_of(reply: dict) -> str:
    """The kit's verdict on one command's reply, in proof mode, with no axioms reported."""
    if "message" in reply:
        server_reply = {"status": "repl_error", "detail": reply["message"]}
    else:
        server_reply = {
            "status": "ok",
            "messages": reply.get("messages", []),
            "sorries": reply.get("sorries", []),
            "declarations": [],
            "axioms": {},
        }
    request = SimpleNamespace(mode="proof", allowed_axioms=(), target=None)
    return judging.outcome_of(server_reply, request, Header((), 0)).verdict.value  # type: ignore[arg-type]


def test_every_transcript_has_its_verdicts_written_here():
    names = {path.name.removesuffix(".in") for path in lean_repl_double.TRANSCRIPTS.glob("*.in")}
    assert names == set(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_the_client_reads_every_reply_and_the_kit_judges_it_as_it_shows(name):
    read = replayed(name)
    recorded = [reply for _, reply in exchanges(name)]
    assert read == recorded
    verdicts = [
        verdict_of(reply) if "cmd" in request else None
        for (request, _), reply in zip(exchanges(name), read, strict=True)
    ]
    assert verdicts == EXPECTED[name]


def test_an_error_beside_a_sorry_is_read_at_its_position_and_fails():
    first = replayed("error_beside_sorry")[0]
    [error] = [judging.diagnostic(m) for m in first["messages"]]
    assert (error.severity, error.line, error.column) == ("error", 1, 37)
    assert error.message.startswith("unsolved goals\nz : Int")
    assert judging._sorry_lines(first, first["messages"]) == [2]


def test_a_tactic_sorry_without_a_position_is_read_without_one():
    third = replayed("error_beside_sorry")[2]
    assert third["sorries"] == [{"proofState": 2, "goal": "z : Int\n⊢ z = 2"}]
    assert judging._sorry_lines(third, []) == [0]


def test_the_double_numbers_proof_states_across_commands_and_shows_hypotheses():
    # As the recorded REPL does: one proof-state counter per session; a sorry's goal lists the
    # theorem's binders as hypotheses above the turnstile.
    repl = lean_repl_double.Repl(None, announce=False)
    repl.handle({"cmd": "import Mathlib.Logic.Basic"})
    replies = [
        json.loads(repl.handle({"cmd": f"theorem t{i} (x : Int) : x = x := by sorry", "env": 0}))
        for i in range(2)
    ]
    [first], [second] = (reply["sorries"] for reply in replies)
    assert (first["proofState"], second["proofState"]) == (0, 1)
    assert first["goal"] == "x : Int\n⊢ x = x"
