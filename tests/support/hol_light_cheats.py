"""HOL Light files that try to earn a `pass` they have not (forged theorems, rebound names,
escapes), with the verdicts each may get: the adversarial suite and the batch-versus-alone
comparison both run them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from runner.core.models import CheckRequest, Target, Verdict

# OCaml 4.13 compiles this match with one read of `b` for the tests and another after the guard
# changed it (the mutable-field family of OCaml issue #7241): a value of any type comes out as
# any other type, without Obj.
CONFUSE = """
type ('a, 'b) either_cell = Lcell of 'a | Rcell of 'b;;
type ('a, 'b) holder = { flag : bool; mutable held : ('a, 'b) either_cell };;
let confuse (x : ('a, 'b) holder) (v : 'b) : 'a option =
  match x with
  | { flag = false } -> None
  | { held = Rcell _ } -> None
  | _ when (x.held <- Rcell v; false) -> None
  | { flag = true; held = Lcell y } -> Some y;;
let forge (v : term list * term * 'p) : thm =
  match confuse { flag = true; held = Lcell TRUTH } v with Some th -> th | None -> TRUTH;;
"""


@dataclass(frozen=True)
class Cheat:
    name: str
    content: str
    verdicts: tuple[Verdict, ...]  # what it may get; never pass
    words: str | None = None  # in the diagnostics
    fields: dict[str, Any] = field(default_factory=dict)


def target(name: str, statement: str) -> dict[str, Any]:
    return {"target": Target(name=name, statement=statement)}


CHEATS = [
    # -- theorems no kernel rule made ----------------------------------------------------------
    Cheat(
        "type_confusion_forges_false",
        CONFUSE + "let FALSE_THM = forge ([], `F`, proof_of TRUTH);;\n",
        (Verdict.WRONG_STATEMENT,),
        words="states: |- T",
        fields=target("FALSE_THM", "F"),
    ),
    Cheat(
        "obj_magic_forges_false",
        "let FALSE_THM : thm = Obj.magic ([], `F`, proof_of TRUTH);;\n",
        (Verdict.WRONG_STATEMENT,),
        words="states: |- T",
        fields=target("FALSE_THM", "F"),
    ),
    Cheat(
        "forged_theorem_without_a_proof_object",
        "let FALSE_THM : thm = Obj.magic ([], `F`, 0);;\n",
        (Verdict.FAIL, Verdict.CRASH),
        fields=target("FALSE_THM", "F"),
    ),
    Cheat(
        "forged_premise_used_by_real_rules",
        "let FORGED : thm = Obj.magic ([], `1 = 2`, proof_of TRUTH);;\n"
        "let ONE_IS_TWO = SYM (SYM FORGED);;\n",
        (Verdict.FAIL,),
        words="could not re-derive",
        fields=target("ONE_IS_TWO", "1 = 2"),
    ),
    Cheat(
        "library_theorem_mutated_in_place",
        "Obj.set_field (Obj.repr TRUTH) 1 (Obj.repr `1 = 2`);;\n"
        "let ONE_IS_TWO = EQ_MP (REFL `1 = 2`) TRUTH;;\n",
        (Verdict.FAIL,),
        fields=target("ONE_IS_TWO", "1 = 2"),
    ),
    # -- axioms under other names ----------------------------------------------------------------
    Cheat(
        "an_axiom_nobody_binds",
        "new_axiom `F`;;\nlet T1 = ARITH_RULE `1 + 1 = 2`;;\n",
        (Verdict.AXIOM,),
        words="|- F",
    ),
    Cheat(
        "a_decision_procedure_rebound_to_mk_thm",
        "let ARITH_RULE tm = mk_thm ([], tm);;\nlet ONE_IS_TWO = ARITH_RULE `1 = 2`;;\n",
        (Verdict.AXIOM,),
        fields=target("ONE_IS_TWO", "1 = 2"),
    ),
    Cheat(
        "cheat_tac_rebound_so_no_placeholder_is_seen",
        "let CHEAT_TAC = fun (asl, w) -> ACCEPT_TAC (mk_thm ([], w)) (asl, w);;\n"
        "let ONE_IS_TWO = prove (`1 = 2`, CHEAT_TAC);;\n",
        (Verdict.AXIOM, Verdict.PLACEHOLDER),
        fields=target("ONE_IS_TWO", "1 = 2"),
    ),
    Cheat(
        "a_kernel_of_its_own",
        'loads "fusion.ml";;\nlet ONE_IS_TWO = Hol.new_axiom `1 = 2`;;\n',
        (Verdict.FAIL, Verdict.WRONG_STATEMENT),
        fields=target("ONE_IS_TWO", "1 = 2"),
    ),
    # -- the target's meaning --------------------------------------------------------------------
    Cheat(
        "a_constant_stands_for_the_targets_free_variable",
        "let x = new_definition `x = 1`;;\nlet X_IS_ONE = x;;\n",
        (Verdict.WRONG_STATEMENT,),
        fields=target("X_IS_ONE", "x = 1"),
    ),
    Cheat(
        "notation_changed_before_the_target_is_read",
        'override_interface ("+", `( * ):num->num->num`);;\n'
        "let ONE_PLUS_ONE = ARITH_RULE `1 + 1 = 1`;;\n",
        (Verdict.WRONG_STATEMENT,),
        words="1 * 1 = 1",
        fields=target("ONE_PLUS_ONE", "1 + 1 = 1"),
    ),
    Cheat(
        "parse_term_rebound",
        "let parse_term _ = `T`;;\nlet ONE_IS_TWO = TRUTH;;\n",
        (Verdict.WRONG_STATEMENT,),
        fields=target("ONE_IS_TWO", "1 = 2"),
    ),
    Cheat(
        "a_theorem_with_hypotheses",
        "let ONE_IS_TWO = ASSUME `1 = 2`;;\n",
        (Verdict.WRONG_STATEMENT,),
        words="hypotheses",
        fields=target("ONE_IS_TWO", "1 = 2"),
    ),
    # -- the kit's own channel -------------------------------------------------------------------
    Cheat(
        "a_shell_writes_the_kits_frames_then_the_file_fails",
        "Sys.command \"for f in /proc/$PPID/fd/*; do printf 'END 0\\nRESULT 0\\n' > $f; done\";;\n"
        'failwith "stop here";;\n',
        (Verdict.FAIL,),
    ),
    Cheat(
        "a_shell_writes_the_kits_frames_then_the_file_exits",
        "Sys.command \"for f in /proc/$PPID/fd/*; do printf 'END 0\\nRESULT 0\\n' > $f; done\";;\n"
        "exit 0;;\n",
        (Verdict.FAIL,),
    ),
    # -- an allowed axiom named by a printing that stands for another -------------------------
    Cheat(
        "an_axiom_allowed_by_its_printing_at_another_type",
        "let ax = new_axiom `?x:A y:A. ~(x = y)`;;\n"
        "let ax1 = INST_TYPE [`:1`,`:A`] ax;;\n"
        "let false_thm = prove(`F`, MP_TAC ax1 THEN MESON_TAC[one]);;\n",
        (Verdict.AXIOM,),
        fields={"allowed_axioms": ("|- ?x y. ~(x = y)",)},  # harmless at :bool
    ),
]


def cheat_request(cheat: Cheat, timeout: int = 60, **more: Any) -> CheckRequest:
    return CheckRequest(
        prover="hol-light",
        name=cheat.name + ".ml",
        content=cheat.content,
        timeout=timeout,
        **{**cheat.fields, **more},
    )
