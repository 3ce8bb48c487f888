"""Real Rocq files pass, warm and cold, on both backends: completeness is tested like soundness.

Three corpora: ordinary files that earlier rounds refused or misread (a `Global` option, primitive
integers, sealed modules and functors, `Fail`/`Succeed` around declarations); a sample of Coq's
own standard library (Debian's libcoq-stdlib sources); a sample of MathComp (Debian's
libcoq-mathcomp-* ship their .v sources). Each file is compiled as library `Artifact` as a user
would submit it. A quick subset runs in CI; `PROOFLOCK_COMPLETENESS_FULL=1` runs every sampled
file (`nox -s bench` measures the same corpora against bare coqc).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from benchmarks.rocq import round_robin
from runner import Checker
from runner.core.models import CheckRequest, Trust, Verdict
from runner.core.settings import Settings

FULL = os.environ.get("PROOFLOCK_COMPLETENESS_FULL") == "1"
STDLIB = Path("/usr/lib/ocaml/coq/theories")
MATHCOMP = Path("/usr/lib/ocaml/coq/user-contrib/mathcomp")

ORDINARY = {
    "global-implicit-arguments.v": (
        "Global Set Implicit Arguments.\nGlobal Set Printing Width 60.\n"
        "Definition id' (A : Type) (x : A) := x.\n"
        "Lemma id_id : forall n : nat, id' (id' n) = n.\nProof. reflexivity. Qed.\n"
    ),
    "primitive-integers.v": (
        "From Coq Require Import Uint63.\n"
        "Theorem five : (2 + 3 = 5)%uint63.\nProof. reflexivity. Qed.\n"
        "Definition double (x : int) := (x + x)%uint63.\n"
    ),
    "primitive-floats-and-arrays.v": (
        "From Coq Require Import Floats PArray Uint63.\n"
        "Definition a := PArray.make 3 1.5%float.\n"
        "Lemma get_a : PArray.get a 0 = 1.5%float.\nProof. reflexivity. Qed.\n"
    ),
    "sealed-module.v": (
        "Module Type T.\nParameter x : nat.\nAxiom x_pos : 0 < x.\nEnd T.\n"
        "Module M : T.\nDefinition x := 1.\nLemma x_pos : 0 < x.\nProof. auto. Qed.\nEnd M.\n"
        "Theorem m_pos : 0 < M.x.\nProof. exact M.x_pos. Qed.\n"
    ),
    "sealed-functor.v": (
        "Module Type T.\nParameter x : nat.\nEnd T.\n"
        "Module F (X : T) : T.\nDefinition x := S X.x.\nEnd F.\n"
        "Module M <: T.\nDefinition x := 0.\nEnd M.\n"
        "Module N := F M.\nModule O : T := F N.\n"
        "Lemma fixed : N.x = N.x.\nProof. reflexivity. Qed.\n"
    ),
    "fail-and-succeed-around-declarations.v": (
        "Fail Definition bad : nat := true.\nSucceed Definition tried := 0.\n"
        "Fail Fail Lemma real : True.\nLemma real : True.\nProof. exact I. Qed.\n"
    ),
    "rewinds.v": "Definition a := 1.\nReset a.\nDefinition a := 2.\nLemma two : a = 2.\nProof. reflexivity. Qed.\n",
    # Words the kit reads, used as names: only a command `Abort` drops a theorem.
    "abort-as-a-name.v": (
        "Definition Abort := 0.\nLemma uses_it : Abort = 0.\nProof. reflexivity. Qed.\n"
        "Inductive Admit := Obligations.\nLemma one : forall a : Admit, a = Obligations.\n"
        "Proof. intros []. reflexivity. Qed.\n"
    ),
    # The refused commands' words inside names, and `Set` as a sort.
    "refused-words-in-names.v": (
        "Definition Register_all := 0.\nDefinition Primitive_ops := 1.\n"
        "Definition LoadFactor := 2.\nDefinition Definitional (A : Set) := A.\n"
        "Lemma Load_ok : Register_all + Primitive_ops = 1.\nProof. reflexivity. Qed.\n"
    ),
    # `...` ends a sentence after a tactic under `Proof with`; `..` in a recursive notation ends
    # none.
    "proof-with-dots.v": (
        "Require Import List.\nImport ListNotations.\n"
        "Lemma both : True /\\ True.\nProof with auto. split... Qed.\n"
        'Notation "[[ x ; .. ; y ]]" := (cons x .. (cons y nil) ..).\n'
        "Lemma l : length [[1 ; 2 ; 3]] = 3.\nProof. reflexivity. Qed.\n"
    ),
}


def _standalone(path: Path) -> bool:
    """A file that names its libraries as a user's file must (`From mathcomp Require ...`), not
    by the short names its own package's build maps (`Require Export ssralg.`)."""
    text = path.read_text()
    return "From " in text or "Require" not in text or path.parent.parent.name == "theories"


def _sample(root: Path, dirs: tuple[str, ...], count: int) -> dict[str, str]:
    """`count` files spread over `dirs`, smallest first (a fixed order)."""
    per_dir = [
        sorted(
            (p for p in (root / d).glob("*.v") if _standalone(p)),
            key=lambda p: (p.stat().st_size, p.name),
        )
        for d in dirs
    ]
    return {f"{p.parent.name}/{p.name}": p.read_text() for p in round_robin(per_dir, count)}


def stdlib() -> dict[str, str]:
    if not STDLIB.is_dir():
        return {}
    return _sample(STDLIB, ("Arith", "Bool", "Lists", "Sorting", "Relations"), 40 if FULL else 3)


def mathcomp() -> dict[str, str]:
    if not MATHCOMP.is_dir():
        return {}
    return _sample(MATHCOMP, ("ssreflect", "algebra"), 20 if FULL else 2)


CORPUS = {
    **{f"ordinary/{n}": t for n, t in ORDINARY.items()},
    **{f"stdlib/{n}": t for n, t in stdlib().items()},
    **{f"mathcomp/{n}": t for n, t in mathcomp().items()},
}
# Files of the library itself that declare axioms get `axiom`, as coqc and coqchk say.
DECLARES_AXIOMS = ("Axiom ", "Parameter ", "Admitted")


@pytest.fixture(
    scope="module",
    params=["local", pytest.param("docker", marks=[pytest.mark.docker, pytest.mark.slow])],
)
def checker(request, tmp_path_factory):
    base = tmp_path_factory.mktemp("kit")
    settings = Settings(
        backend=request.param,
        cache_dir=base / "cache",
        checkpoint_dir=base / "checkpoints",
        timeout=300,
        retries=0,
        cache=False,
    )
    with Checker(settings) as checker:
        yield checker


@pytest.mark.slow
@pytest.mark.parametrize("warm", [True, False], ids=["warm", "cold"])
@pytest.mark.parametrize("name", sorted(CORPUS))
def test_real_files_pass(name, warm, checker):
    text = CORPUS[name]
    result = checker.check_one(
        CheckRequest(prover="rocq", name=name.replace("/", "_"), content=text), cold=not warm
    )
    expected = Verdict.AXIOM if any(w in text for w in DECLARES_AXIOMS) else Verdict.PASS
    if name.startswith("ordinary/"):
        expected = Verdict.PASS
    assert result.verdict is expected, (result.verdict, result.diagnostics, result.assumptions)
    assert result.trust is Trust.REPLAYED
    assert not any("Primitive" in a or "PrimInt63" in a for a in result.assumptions)
