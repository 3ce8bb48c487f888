"""Comparator's challenge/solution projects as Lean checks, and the re-check that decides a pass.

Each project here is written for these tests in comparator's layout (`Challenge.lean`,
`Solution.lean`, `config.json`, and the exit code comparator gives it, as its `test.json`
holds). The REPL is the protocol double; `lean-mathlib recheck` (comparator in the image) is the
double's `--recheck`, which makes comparator's checks in comparator's order and words by the
double's rules. The kit's side is real: the project read as one request, the REPL pass, the
fresh sandbox of the re-check, and the verdict read from comparator's exit code and error.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from runner.core.errors import BadRequest
from runner.core.models import CheckRequest, Trust, Verdict
from runner.provers.lean import comparator
from tests.support.doubles import DOUBLES, Lean, lean_on_doubles, shims


@pytest.fixture
def lean(tmp_path, monkeypatch, request) -> Iterator[Lean]:
    """The checker on the REPL double; its shims also stand in for comparator."""
    yield from lean_on_doubles(tmp_path, monkeypatch, getattr(request, "param", {}))


COMM = "theorem swap_sum (a b : Nat) : a + b = b + a := by\n  sorry\n"
STANDARD = ["propext", "Quot.sound", "Classical.choice"]


def project(
    root: Path,
    challenge: str,
    solution: str,
    theorems: list[str],
    *,
    definitions: list[str] | None = None,
    permitted: list[str] | None = None,
    challenge_module: str = "Challenge",
) -> Path:
    """A comparator project directory, as comparator's test projects are laid out."""
    root.mkdir(parents=True, exist_ok=True)
    path = root / comparator.module_path(challenge_module)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(challenge)
    (root / "Solution.lean").write_text(solution)
    config = {
        "challenge_module": challenge_module,
        "solution_module": "Solution",
        "theorem_names": theorems,
        "permitted_axioms": STANDARD if permitted is None else permitted,
    }
    if definitions is not None:
        config["definition_names"] = definitions
    (root / "config.json").write_text(json.dumps(config))
    return root


HOLE_CHALLENGE = "def count : Nat := sorry\n\ntheorem count_spec : count + 5 = 12 := sorry\n"
LOCAL_CHALLENGE = (
    "theorem some_zero : ∃ k : Nat, k = 0 := sorry\n\n"
    "noncomputable def pick : Nat := Classical.choose some_zero\n\n"
    "theorem pick_zero : pick = 0 := sorry\n"
)
# name: (challenge, solution, theorems, definitions, permitted, comparator's exit code, verdict,
#        what comparator says of the first theorem: "ok", its objection, or None)
CASES = {
    "same_statement": (
        COMM,
        "theorem swap_sum (a b : Nat) : a + b = b + a := by\n  omega\n",
        ["swap_sum"], None, None, 0, Verdict.PASS, "ok",
    ),
    "another_statement": (
        COMM,
        "theorem swap_sum (a b : Nat) : b + a = a + b := by\n  omega\n",
        ["swap_sum"], None, None, 1, Verdict.WRONG_STATEMENT,
        "Challenge and solution theorem statement do not match: 'swap_sum'",
    ),
    "hole_filled": (
        HOLE_CHALLENGE,
        "def count : Nat := 7\n\ntheorem count_spec : count + 5 = 12 := rfl\n",
        ["count_spec"], ["count"], None, 0, Verdict.PASS, "ok",
    ),
    "hole_of_another_type": (
        HOLE_CHALLENGE,
        "def count : Int := 7\n\ntheorem count_spec : count + 5 = 12 := rfl\n",
        ["count_spec"], ["count"], None, 1, Verdict.WRONG_STATEMENT, None,
    ),
    "challenge_definition_redefined": (
        LOCAL_CHALLENGE,
        "theorem some_zero : ∃ k : Nat, k = 0 := ⟨0, rfl⟩\n\n"
        "noncomputable def pick : Nat := 0\n\ntheorem pick_zero : pick = 0 := rfl\n",
        ["some_zero", "pick_zero"], None, None, 1, Verdict.WRONG_STATEMENT, None,
    ),
    "challenge_definition_kept": (
        LOCAL_CHALLENGE,
        "theorem some_zero : ∃ k : Nat, k = 0 := ⟨0, rfl⟩\n\n"
        "noncomputable def pick : Nat := Classical.choose some_zero\n\n"
        "theorem pick_zero : pick = 0 := Classical.choose_spec some_zero\n",
        ["some_zero", "pick_zero"], None, None, 0, Verdict.PASS, "ok",
    ),
    "no_axiom_permitted": (
        COMM,
        "theorem swap_sum (a b : Nat) : a + b = b + a := by\n  simp [Nat.add_comm]\n",
        ["swap_sum"], None, [], 1, Verdict.AXIOM, None,
    ),
    "user_axiom": (
        COMM,
        "axiom anything {P : Prop} : P\n\n"
        "theorem swap_sum (a b : Nat) : a + b = b + a := anything\n",
        ["swap_sum"], None, None, 1, Verdict.AXIOM, None,
    ),
    "namespaced_in_a_nested_module": (
        "namespace «7»\ntheorem two : 1 + 1 = 2 := by\n  sorry\nend «7»\n",
        "namespace «7»\ntheorem two : 1 + 1 = 2 := by\n  rfl\nend «7»\n",
        ["«7».two"], None, None, 0, Verdict.PASS, "ok",
    ),
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_comparator_project_gets_comparator_s_exit_code(lean, tmp_path, name):
    challenge, solution, theorems, holes, permitted, code, verdict, first = CASES[name]
    module = "Challenge.«1.2».«3»" if name.startswith("namespaced") else "Challenge"
    root = project(
        tmp_path / name, challenge, solution, theorems,
        definitions=holes, permitted=permitted, challenge_module=module,
    )  # fmt: skip
    result = lean.checker.check_one(comparator.request_from_project(root, timeout=10))
    said = comparator.result_of(result)
    assert (said["exit_code"], result.verdict) == (code, verdict), result.diagnostics
    assert said["theorems"][theorems[0]] == first
    if code == 0:
        assert said["message"] == "Your solution is okay!"


def test_a_pass_rests_on_the_re_check_which_is_a_double_here(lean, tmp_path):
    root = project(tmp_path, *CASES["same_statement"][:3])
    result = lean.checker.check_one(comparator.request_from_project(root, timeout=10))
    assert (result.verdict, result.trust) == (Verdict.PASS, Trust.DOUBLE)


@pytest.mark.parametrize("lean", [{"conceal": True}], indirect=True)
def test_a_pass_the_re_check_confirms_is_replayed(lean, tmp_path):
    # As the real comparator would: a pass rests on the re-check in a fresh sandbox.
    root = project(tmp_path, *CASES["same_statement"][:3])
    result = lean.checker.check_one(comparator.request_from_project(root, timeout=10))
    assert (result.verdict, result.trust) == (Verdict.PASS, Trust.REPLAYED)


def test_the_re_check_sees_a_statement_the_repl_pass_cannot(lean, tmp_path):
    # The REPL pass has no challenge to compare with: the re-check finds the other statement.
    root = project(tmp_path, *CASES["another_statement"][:3])
    result = lean.checker.check_one(comparator.request_from_project(root, timeout=10))
    [diagnostic] = result.diagnostics
    assert diagnostic.message == (
        "the re-check found another statement: "
        "Challenge and solution theorem statement do not match: 'swap_sum'"
    )
    assert result.details["comparator"]["exit_code"] == 1


def test_a_target_is_re_checked_on_its_own_statement(lean, tmp_path):
    # A plain target goes through the same re-check, its statement stated in a challenge.
    content = "import Mathlib.Tactic\n\ntheorem t (n : ℕ) : n + 0 = n := by simp\n"
    result = lean.check(content, target={"name": "t", "statement": "∀ (n : ℕ), n + 0 = n"})
    assert (result.verdict, result.details["comparator"]["theorems"]) == (
        Verdict.PASS,
        {"t": "ok"},
    )


def test_a_project_is_one_request_with_the_challenge_apart(tmp_path):
    root = project(tmp_path, HOLE_CHALLENGE, "def count : Nat := 7\n", ["count_spec"],
                   definitions=["count"])  # fmt: skip
    request = comparator.request_from_project(root)
    assert (request.name, request.content) == ("Solution.lean", "def count : Nat := 7\n")
    assert request.options == {
        "challenge": {"name": "Challenge.lean", "content": HOLE_CHALLENGE},
        "theorems": ["count_spec"],
        "definitions": ["count"],
    }
    assert request.allowed_axioms == tuple(STANDARD)
    assert request.target is None


@pytest.mark.parametrize(
    ("config", "problem"),
    [
        ({"solution_module": "Solution", "theorem_names": ["a"]}, "challenge_module is missing"),
        (
            {"challenge_module": "Nowhere", "solution_module": "Solution", "theorem_names": ["a"]},
            "cannot read",
        ),
        (
            {"challenge_module": "Challenge", "solution_module": "Solution", "theorem_names": []},
            "theorem_names is empty",
        ),
    ],
)
def test_a_project_that_is_not_one_is_bad_input(tmp_path, config, problem):
    (tmp_path / "Challenge.lean").write_text(COMM)
    (tmp_path / "Solution.lean").write_text(COMM)
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(BadRequest, match=problem):
        comparator.request_from_project(tmp_path)


def test_theorems_without_a_challenge_are_bad_input(lean):
    request = CheckRequest(
        prover="lean", name="a.lean", content=COMM, options={"theorems": ["swap_sum"]}
    )
    with pytest.raises(BadRequest, match="give one"):
        lean.checker.check_one(request)


def test_the_cli_checks_a_file_against_a_challenge(cli, tmp_path):
    shims.write_shims(tmp_path / "bin", DOUBLES)
    (tmp_path / "Challenge.lean").write_text(COMM)
    (tmp_path / "Solution.lean").write_text(CASES["another_statement"][1])
    done = cli(
        "check", "--prover", "lean", "--challenge", "Challenge.lean", "--theorems", "swap_sum",
        "Solution.lean",
        env={
            "PATH": f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}",
            "PROOFLOCK_LOCAL_SANDBOX": "off",
        },
        check=1,
    )  # fmt: skip
    line = json.loads(done.stdout)
    assert line["verdict"] == "wrong_statement"
    assert line["comparator"]["exit_code"] == 1  # adapter details are top-level fields


def test_an_image_without_the_re_check_is_an_infra_error_not_a_verdict(lean, tmp_path, monkeypatch):
    # Today's lean image has no comparator: `lean-mathlib recheck` is lean reading a file named
    # `recheck`. That is the machine's failure, never the file's.
    wrapper = tmp_path / "older-image"
    wrapper.mkdir()
    (wrapper / "lean-mathlib").write_text(
        '#!/bin/sh\nif [ "$1" = recheck ]; then echo "file not found: recheck" >&2; exit 1; fi\n'
        f'exec "{tmp_path / "bin" / "lean-mathlib"}" "$@"\n'
    )
    (wrapper / "lean-mathlib").chmod(0o755)
    monkeypatch.setenv("PATH", f"{wrapper}{os.pathsep}{os.environ['PATH']}")
    root = project(tmp_path / "p", *CASES["same_statement"][:3])
    result = lean.checker.check_one(comparator.request_from_project(root, timeout=10))
    assert result.verdict is Verdict.INFRA_ERROR
    assert "did not run comparator: file not found: recheck" in result.diagnostics[0].message
