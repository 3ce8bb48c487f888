"""Rocq files that try to earn a `pass` they have not (or to reach outside their check), with the
verdicts each may get: the adversarial suite and the warm worker's tests both run them."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from runner import Checker
from runner.core.models import Verdict
from runner.core.settings import Settings

FAIL, AXIOM, PLACEHOLDER = {Verdict.FAIL}, {Verdict.AXIOM}, {Verdict.PLACEHOLDER}
WRONG, CRASH = {Verdict.WRONG_STATEMENT}, {Verdict.CRASH}
# Contained, not refused: coqc's own error where the sandbox stops the write, else the axiom.
ESCAPE = FAIL | AXIOM
OUT = "{outside}"  # replaced with a host directory no check may write to

CHEAT = "Axiom cheat : False.\n"
ONE_IS_TWO = "Theorem one_is_two : 1 = 2.\nProof. destruct cheat. Qed.\n"
NEEDS_CHEAT = CHEAT + ONE_IS_TWO
ONE_IS_TWO_TARGET = {"target": {"name": "one_is_two", "statement": "1 = 2"}}

# name → (file, the verdicts it may get, request fields)
# Streicher's K through an SProp equality: provable only under definitional UIP.
UIP_PROVES_K = (
    "Inductive seq {A} (a : A) : A -> SProp := srefl : seq a a.\n"
    "Definition f {A} (x y : A) (e : x = y) : seq x y := match e with eq_refl => srefl x end.\n"
    "Definition g {A} (x y : A) (e : seq x y) : x = y := match e with srefl _ => eq_refl end.\n"
    "Lemma gf {A} (x y : A) (e : x = y) : g x y (f x y e) = e.\n"
    "Proof. destruct e. reflexivity. Qed.\n"
    "Theorem K : forall (A : Type) (x : A) (e : x = x), e = eq_refl.\n"
    "Proof. intros A x e. exact (eq_sym (gf x x e)). Qed.\n"
)

CHEATS: dict[str, tuple[str, set[Verdict], dict]] = {
    # -- printing and search options: the audit reads none of them ---------------------------
    "search-output-name-only-global": (
        "Global Set Search Output Name Only.\n" + NEEDS_CHEAT,
        ESCAPE,
        {},
    ),
    "search-output-name-only-local": ("Set Search Output Name Only.\n" + NEEDS_CHEAT, AXIOM, {}),
    "search-blacklist": ('Add Search Blacklist "cheat" "one_is_two".\n' + NEEDS_CHEAT, AXIOM, {}),
    "search-blacklist-global": (
        'Global Add Search Blacklist "Artifact".\n' + NEEDS_CHEAT,
        ESCAPE,
        {},
    ),
    "printing-width-global-attribute": (
        "#[global] Set Printing Width 3.\n" + NEEDS_CHEAT,
        ESCAPE,
        {},
    ),
    "printing-all-export-attribute": ("#[ export ] Set Printing All.\n" + NEEDS_CHEAT, ESCAPE, {}),
    "export-set": ("Export Set Printing Depth 1.\n" + NEEDS_CHEAT, ESCAPE, {}),
    "printing-options-local": (
        "Set Printing Width 1.\nSet Printing Depth 0.\nUnset Printing Notations.\n" + NEEDS_CHEAT,
        AXIOM,
        {},
    ),
    # -- notations and printed text that imitate the report -------------------------------------
    "printed-closed-under-the-global-context": (
        "Require Import String.\nOpen Scope string_scope.\n"
        'Check "Closed under the global context".\nCheck "Axioms: <none>".\n' + NEEDS_CHEAT,
        AXIOM,
        {},
    ),
    "printed-fake-summary": (
        "Require Import String.\nOpen Scope string_scope.\n"
        'Check "CONTEXT SUMMARY\n===============\n* Axioms: <none>\n".\n' + NEEDS_CHEAT,
        AXIOM,
        {},
    ),
    "notation-prints-false-as-true": (
        "Notation \"'True'\" := False (only printing).\n" + NEEDS_CHEAT,
        AXIOM,
        {},
    ),
    "axiom-named-like-an-allowed-one": (
        "Module Classical_Prop.\nAxiom classic : False.\nEnd Classical_Prop.\n"
        "Theorem one_is_two : 1 = 2.\nProof. destruct Classical_Prop.classic. Qed.\n",
        AXIOM,
        {
            "allowed_axioms": [
                "classic",
                "Classical_Prop.classic",
                "Coq.Logic.Classical_Prop.classic",
            ]
        },
    ),
    "printed-anomaly-on-a-failing-file": (
        "Require Import String.\nOpen Scope string_scope.\n"
        'Check "Anomaly: Out of memory. Cannot allocate memory".\n'
        "Theorem one_is_two : 1 = 2.\nProof. reflexivity. Qed.\n",
        FAIL,
        {},
    ),
    # -- options that would outlive the file (a later Require re-runs them) --------------------
    "global-unset-universe-checking": (
        "Global Unset Universe Checking.\n" + NEEDS_CHEAT,
        ESCAPE,
        {},
    ),
    "global-set-warnings": ('Global Set Warnings "-all".\n' + NEEDS_CHEAT, ESCAPE, {}),
    # Set after the theorem, so nothing of the file is checked without universes: only a
    # comparison run under the file's settings would equate `Set` with `Prop`.
    "global-unset-universe-checking-for-the-comparison": (
        "Theorem main : forall T : Set, T -> T.\nProof. auto. Qed.\n"
        "Global Unset Universe Checking.\n",
        WRONG,
        {"target": {"name": "main", "statement": "forall T : Prop, T -> T"}},
    ),
    "global-unset-universe-checking-for-the-comparison-statement-mode": (
        "Global Unset Universe Checking.\nTheorem main : forall T : Set, T -> T.\n"
        "Proof. auto. Qed.\n",
        WRONG,
        {"target": {"name": "main", "statement": "forall T : Prop, T -> T"}, "mode": "statement"},
    ),
    # The comparison's tactics are Coq's own: the file's are never imported into its session.
    "tactic-notations-named-like-the-comparison": (
        'Tactic Notation "constr_eq" constr(x) constr(y) := idtac.\n'
        'Tactic Notation "is_const" constr(x) := idtac.\nLtac exact x := idtac.\n'
        "Theorem main : forall T : Set, T -> T.\nProof. intros T x. apply x. Qed.\n",
        WRONG,
        {"target": {"name": "main", "statement": "forall T : Prop, T -> T"}},
    ),
    # No tactic runs in the drivers' sessions: a proof mode without tactics changes nothing.
    "global-noedit-proof-mode-hides-an-axiom": (
        NEEDS_CHEAT + 'Global Set Default Proof Mode "Noedit".\n',
        AXIOM,
        {},
    ),
    "export-unset-positivity": ("#[export] Unset Positivity Checking.\n" + NEEDS_CHEAT, ESCAPE, {}),
    "local-unset-guard-checking": (
        "Local Unset Guard Checking.\nFixpoint f (n : nat) : False := f n.\n"
        "Theorem one_is_two : 1 = 2.\nProof. destruct (f 0). Qed.\n",
        AXIOM,
        {},
    ),
    # -- axioms under other names or in other places -------------------------------------------
    "private-name": (
        "Axiom Private_cheat : False.\nTheorem one_is_two : 1 = 2.\nProof. destruct Private_cheat. Qed.\n",
        AXIOM,
        {},
    ),
    "subproof-name": (
        "Axiom one_is_two_subproof : 1 = 2.\nTheorem one_is_two : 1 = 2.\n"
        "Proof. exact one_is_two_subproof. Qed.\n",
        AXIOM,
        {},
    ),
    "parameter": ("Parameter cheat : False.\n" + ONE_IS_TWO, AXIOM, {}),
    "conjecture": ("Conjecture cheat : False.\n" + ONE_IS_TWO, AXIOM, {}),
    "hypothesis-outside-a-section": ("Hypothesis cheat : False.\n" + ONE_IS_TWO, AXIOM, {}),
    "variable-outside-a-section": ("Variable cheat : False.\n" + ONE_IS_TWO, AXIOM, {}),
    "context-outside-a-section": ("Context (cheat : False).\n" + ONE_IS_TWO, AXIOM, {}),
    "declared-module": (
        "Module Type T.\nAxiom a : False.\nEnd T.\nDeclare Module M : T.\n"
        "Theorem one_is_two : 1 = 2.\nProof. destruct M.a. Qed.\n",
        AXIOM,
        {},
    ),
    "functor-applied-to-a-declared-module": (
        "Module Type T.\nParameter a : False.\nEnd T.\n"
        "Module F (X : T).\nDefinition b := X.a.\nEnd F.\n"
        "Declare Module Y : T.\nModule Z := F Y.\n"
        "Theorem one_is_two : 1 = 2.\nProof. destruct Z.b. Qed.\n",
        AXIOM,
        {},
    ),
    "axiom-behind-a-sealed-module": (
        "Module Type T.\nParameter b : False.\nEnd T.\n"
        "Module M : T.\nAxiom a : False.\nDefinition b := a.\nEnd M.\n"
        "Theorem one_is_two : 1 = 2.\nProof. destruct M.b. Qed.\n",
        AXIOM,
        {},
    ),
    "axiom-deep-in-modules": (
        "Module A.\nModule B.\nAxiom c : False.\nEnd B.\nEnd A.\n"
        "Theorem one_is_two : 1 = 2.\nProof. destruct A.B.c. Qed.\n",
        AXIOM,
        {},
    ),
    "axiom-nothing-uses": (
        "Axiom unused : False.\nLemma fine : True.\nProof. exact I. Qed.\n",
        AXIOM,
        {},
    ),
    # -- Admitted wherever it hides -------------------------------------------------------------
    "admitted-in-a-section": (
        "Section S.\nLemma l : 1 = 2.\nAdmitted.\nEnd S.\n"
        "Theorem one_is_two : 1 = 2.\nProof. exact l. Qed.\n",
        PLACEHOLDER,
        {},
    ),
    "admitted-in-nested-modules": (
        "Module A.\nModule B.\nLemma l : 1 = 2.\nAdmitted.\nEnd B.\nEnd A.\n"
        "Theorem one_is_two : 1 = 2.\nProof. exact A.B.l. Qed.\n",
        PLACEHOLDER,
        {},
    ),
    "admitted-in-an-applied-functor": (
        "Module Type Empty.\nEnd Empty.\nModule F (X : Empty).\nLemma l : 1 = 2.\nAdmitted.\n"
        "End F.\nModule E.\nEnd E.\nModule G := F E.\n"
        "Theorem one_is_two : 1 = 2.\nProof. exact G.l. Qed.\n",
        PLACEHOLDER,
        {},
    ),
    "admit-behind-a-tactic-notation": (
        'Tactic Notation "finish" := admit.\nTheorem one_is_two : 1 = 2.\nProof. finish. Admitted.\n',
        PLACEHOLDER,
        {},
    ),
    "admit-obligations": (
        "Require Import Program.\n"
        "Program Definition x : {n : nat | n = 1 /\\ n = 2} := 0.\nAdmit Obligations.\n",
        PLACEHOLDER,
        {},
    ),
    # -- unchecked universes, fixpoints and positivity ----------------------------------------
    "girard-with-universe-checking-off": (
        "Require Import Coq.Logic.Hurkens.\nUnset Universe Checking.\n"
        "Definition absurd : False := TypeNeqSmallType.paradox Type eq_refl.\n"
        "Set Universe Checking.\nTheorem one_is_two : 1 = 2.\nProof. destruct absurd. Qed.\n",
        AXIOM,
        {},
    ),
    "bypass-guard-attribute": (
        "#[bypass_check(guard)] Fixpoint f (n : nat) : False := f n.\n"
        "Theorem one_is_two : 1 = 2.\nProof. destruct (f 0). Qed.\n",
        AXIOM,
        {},
    ),
    "unset-positivity-checking": (
        "Unset Positivity Checking.\nInductive Bad := mk : (Bad -> False) -> Bad.\n"
        "Set Positivity Checking.\n"
        "Definition app (b : Bad) : Bad -> False := match b with mk f => f end.\n"
        "Definition omega : Bad -> False := fun b => app b b.\n"
        "Theorem one_is_two : 1 = 2.\nProof. destruct (omega (mk omega)). Qed.\n",
        AXIOM,
        {},
    ),
    "bypass-positivity-without-schemes": (
        "Unset Elimination Schemes.\n"
        "#[bypass_check(positivity)] Inductive Bad := mk : (Bad -> False) -> Bad.\n"
        "Definition app (b : Bad) : Bad -> False := match b with mk f => f end.\n"
        "Theorem one_is_two : 1 = 2.\nProof. destruct (app (mk (fun b => app b b)) "
        "(mk (fun b => app b b))). Qed.\n",
        AXIOM,
        {},
    ),
    # -- Fail and Abort --------------------------------------------------------------------------
    "abort": ("Theorem one_is_two : 1 = 2.\nProof.\nAbort.\n", PLACEHOLDER, {}),
    "fail-qed-then-abort": (
        "Theorem one_is_two : 1 = 2.\nProof.\nFail Qed.\nAbort.\n",
        PLACEHOLDER,
        {},
    ),
    "axiom-inside-fail-fail": ("Fail Fail Axiom cheat : False.\n" + ONE_IS_TWO, FAIL, {}),
    "axiom-inside-succeed": ("Succeed Axiom cheat : False.\n" + ONE_IS_TWO, FAIL, {}),
    "fail-timeout-then-admit": (
        "Theorem one_is_two : 1 = 2.\nProof.\nFail Timeout 1 reflexivity.\nAdmitted.\n",
        PLACEHOLDER,
        {},
    ),
    "quit-before-the-end": ("Theorem one_is_two : 1 = 2.\nProof.\nQuit.\n", FAIL, {}),
    # Rewinding is accepted: the library is what is judged, and it then declares nothing.
    "reset-initial": (NEEDS_CHEAT + "Reset Initial.\n", FAIL | WRONG | AXIOM, ONE_IS_TWO_TARGET),
    "back": (NEEDS_CHEAT + "Back 2.\n", FAIL | WRONG | AXIOM, ONE_IS_TWO_TARGET),
    # -- the file system and code ---------------------------------------------------------------
    # Writes, plugins and load paths are contained by the sandbox, not refused: each escape
    # below also carries an axiom, which is what must stop it (or coqc's own error).
    "redirect-absolute": (f'Redirect "{OUT}/redirected" Print nat.\n' + NEEDS_CHEAT, ESCAPE, {}),
    "redirect-relative-escape": (
        'Redirect "../../../escape" Print nat.\n' + NEEDS_CHEAT,
        ESCAPE,
        {},
    ),
    "redirect-behind-time": ('Time Redirect "out" Check nat.\n' + NEEDS_CHEAT, ESCAPE, {}),
    "extraction-to-a-file": (
        f'Require Extraction.\nExtraction "{OUT}/extracted.ml" nat.\n' + NEEDS_CHEAT,
        ESCAPE,
        {},
    ),
    "separate-extraction": (
        "Require Extraction.\nSeparate Extraction nat.\n" + NEEDS_CHEAT,
        ESCAPE,
        {},
    ),
    "cd": (f'Cd "{OUT}".\n' + NEEDS_CHEAT, ESCAPE, {}),
    "cd-into-tmp": ('Cd "/tmp".\n' + NEEDS_CHEAT, ESCAPE, {}),
    "load": ('Load "/etc/hostname".\n', FAIL, {}),
    "add-loadpath": (f'Add LoadPath "{OUT}" as Evil.\n' + NEEDS_CHEAT, ESCAPE, {}),
    "native-compute-profile-file": (
        "Set NativeCompute Profiling.\n"
        f'Set NativeCompute Profile Filename "{OUT}/profile".\n'
        "Eval native_compute in 1 + 1.\n" + NEEDS_CHEAT,
        ESCAPE | CRASH,
        {},
    ),
    "native-compute-tactic": (
        "Goal 1 + 1 = 2.\nProof. native_compute. reflexivity. Qed.\n" + NEEDS_CHEAT,
        ESCAPE | CRASH,
        {},
    ),
    "locate-file": ('Locate File "hostname".\n' + NEEDS_CHEAT, ESCAPE, {}),
    "drop": ("Drop.\n" + NEEDS_CHEAT, ESCAPE, {}),
    "declare-ml-module": ('Declare ML Module "evil_plugin".\n' + NEEDS_CHEAT, ESCAPE, {}),
    "declare-ml-module-of-a-real-plugin": (
        'Declare ML Module "coq-core.plugins.extraction".\n' + NEEDS_CHEAT,
        ESCAPE,
        {},
    ),
    "extract-constant": (
        'Require Extraction.\nExtract Constant False => "unit".\n' + NEEDS_CHEAT,
        ESCAPE,
        {},
    ),
    # -- round 3: what the re-check and the pristine target session must stop ------------------
    # The file's own Require opens Q_scope: read after it, the target would mean rationals.
    "target-read-in-the-files-scope": (
        "Require Import QArith.\n"
        "Theorem between : exists x, 0 < x /\\ x < 1.\n"
        "Proof. exists (1#2). split; reflexivity. Qed.\n",
        WRONG,
        {"target": {"name": "between", "statement": "exists x, 0 < x /\\ x < 1"}},
    ),
    "target-read-in-a-scope-the-file-opens": (
        "Require Import ZArith.\nOpen Scope Z_scope.\n"
        "Theorem neg : exists x, x + 1 = 0.\nProof. exists (-1). reflexivity. Qed.\n",
        WRONG,
        {"target": {"name": "neg", "statement": "exists x, x + 1 = 0"}},
    ),
    "declaration-only-under-succeed": (
        "Succeed Axiom cheat : False.\nTheorem one_is_two : 1 = 2.\nProof. Fail exact cheat.\nAdmitted.\n",
        PLACEHOLDER,
        {},
    ),
    "own-primitive-operation": (  # refused: coq/coq#18503 needs nothing more (tests/exploits)
        "From Coq Require Import PrimInt63.\n"
        "Primitive my_add : int -> int -> int := #int63_add.\n"
        "Definition two := my_add 1 1.\n",
        FAIL,
        {},
    ),
    "print-universes-outside": (f'Print Universes "{OUT}/u.txt".\n' + NEEDS_CHEAT, ESCAPE, {}),
    # Written to the kit's frame channel, the worker's stdout (pid 1 or 2 in the sandbox).
    "print-universes-into-the-frames": (
        'Universe u.\nPrint Universes "/proc/1/fd/1".\nPrint Universes "/proc/2/fd/1".\n'
        'Print Universes "/proc/3/fd/1".\n' + NEEDS_CHEAT,
        FAIL | AXIOM,
        {},
    ),
    "a-scratch-file-for-the-next-check": (
        'Redirect "/tmp/left" Print nat.\nRedirect "left" Print nat.\n' + NEEDS_CHEAT,
        ESCAPE,
        {},
    ),
    "flipped-bool-for-primitives": (
        "Inductive flipped := F | T.\nRegister flipped as kernel.ind_bool.\n" + NEEDS_CHEAT,
        FAIL,
        {},
    ),
    "definitional-uip": ("Set Definitional UIP.\n" + NEEDS_CHEAT, FAIL, {}),
    "load-hides-a-refused-sentence": ('Load "Artifact.v".\n', FAIL, {}),
    "register-a-kernel-primitive": (
        "Inductive flipped := F | T.\nRegister flipped as kernel.ind_bool.\n" + NEEDS_CHEAT,
        FAIL,
        {},
    ),
    # `tac...` ends a sentence (the terminator of `Proof with`): what follows is a command, in
    # Coq's reading and the kit's (the cold path has no second reading of its own).
    "primitive-after-dots": (
        "From Coq Require Import PrimInt63.\n"
        "Goal True. Proof with idtac. exact I... Primitive my_add := #int63_add.\nQed.\n",
        FAIL,
        {},
    ),
    "definitional-uip-after-dots": (
        "Goal True. Proof with idtac. exact I... Set Definitional UIP.\nQed.\n" + UIP_PROVES_K,
        FAIL,
        {},
    ),
    # Found anywhere in a sentence, whatever Coq allows before a command or inside a name, and
    # on Coq's own reading of the sentence too (a BOM, a token ending in `.`).
    "primitive-behind-a-hex-timeout": (
        "From Coq Require Import PrimInt63.\nTimeout 0x1_0 Primitive my_add := #int63_add.\n",
        FAIL,
        {},
    ),
    "primitive-glued-to-a-timeout": (
        "From Coq Require Import PrimInt63.\nTimeout 3Primitive my_add := #int63_add.\n",
        FAIL,
        {},
    ),
    "register-glued-to-a-redirect": (
        'Inductive flipped := true | false.\nRedirect "x"Register flipped as kernel.ind_bool.\n',
        FAIL,
        {},
    ),
    "register-of-a-latin-1-name": (
        "Inductive \u00b5 := true | false.\nRegister \u00b5 as kernel.ind_bool.\n",
        FAIL,
        {},
    ),
    "register-of-a-name-with-a-no-break-space": (
        "Inductive fl\u00a0x := true | false.\nRegister fl\u00a0x as kernel.ind_bool.\n",
        FAIL,
        {},
    ),
    "uip-behind-a-timeout-with-an-underscore": (
        "Timeout 1_0 Set Definitional UIP.\n" + UIP_PROVES_K,
        FAIL,
        {},
    ),
    "strictprop-after-a-byte-order-mark": (
        "\ufeffSet Cumulative StrictProp.\nDefinition up (P : SProp) : Prop := P.\n",
        FAIL,
        {},
    ),
    "register-after-a-token-ending-in-a-dot": (
        "\ufeffInductive flipped := true | false.\nNotation \"x '+.'\" := (S x) (at level 50).\n"
        "Check 0 +.. Register flipped as kernel.ind_bool.\n",
        FAIL,
        {},
    ),
    "load-glued-to-a-timeout": ('Timeout 3Load "nofile".\n', FAIL, {}),
    "abort-glued-to-a-timeout": (
        "Theorem one_is_two : 1 = 2.\nProof.\nTimeout 3Abort.\n",
        PLACEHOLDER,
        {},
    ),
    # -- time-out abuse -------------------------------------------------------------------------
    "audit-outlives-the-time-limit": (
        "Require Import NArith.\n"
        "Fixpoint flip (n : nat) (b : bool) : bool := match n with 0 => b | S n => flip n (negb b) end.\n"
        "Lemma big : flip (N.to_nat 4000000) true = true.\nProof. vm_compute. reflexivity. Qed.\n",
        {Verdict.TIMEOUT, Verdict.MEMORY},
        # coqc takes about 1 s (the VM), coqchk's re-check about 20 s (no VM): a limit between
        # them, so only skipping or cutting short the kernel's audit could give a pass.
        {"timeout": 8},
    ),
    "timeout-inside-the-file": (
        "Theorem one_is_two : 1 = 2.\nProof.\nTimeout 1 repeat reflexivity.\nAdmitted.\n",
        PLACEHOLDER,
        {},
    ),
}


# A module's checker fixture's params: the local backend, and docker (slow) where it runs.
BACKENDS = ["local", pytest.param("docker", marks=[pytest.mark.docker, pytest.mark.slow])]


@contextlib.contextmanager
def rocq_checker(backend: str, base: Path, timeout: int = 60) -> Iterator[Checker]:
    """A checker on `backend` with its own cache dir, no result cache and no retries."""
    settings = Settings(
        backend=backend,
        cache=False,
        retries=0,
        timeout=timeout,
        cache_dir=base / "cache",
        checkpoint_dir=base / "checkpoints",
    )
    with Checker(settings) as checker:
        yield checker
