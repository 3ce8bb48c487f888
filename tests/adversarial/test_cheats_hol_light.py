"""Cheats and escapes against the HOL Light adapter: none passes, none leaves a trace outside.

Each case is a file someone might submit to get a `pass` it has not earned, or to act outside the
check: forge a theorem past the kernel, hide an axiom, rebind what a proof means, lie about what
it proved, or reach the machine. Every case runs on both backends (local and docker), and after
each the places it aimed at outside the sandbox's work dir must still hold nothing of it.

The cases are written for this suite; tests/test_hol_light.py keeps the corpus the adapter was
built against. The local worker is the one test_hol_light.py uses (one boot per session, see tests/helpers).
"""

from __future__ import annotations

import glob
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from runner.core.models import CheckResult, Target, Verdict
from tests.helpers import HolLight, session_checker

pytestmark = pytest.mark.slow

TRACE = "prooflock-hol-escape"  # every escape below aims at a path containing this
HOME = Path.home()
TRACE_GLOBS = [f"/tmp/{TRACE}*", f"{HOME}/{TRACE}*", f"/var/tmp/{TRACE}*"]
FORGE = "Obj.magic (Some ([], `F`))"  # a theorem |- F that no kernel rule made


@dataclass(frozen=True)
class Cheat:
    name: str
    content: str
    verdict: Verdict
    where: tuple[int, int] | None = None  # where the refusal points
    words: str | None = None  # in the (only) diagnostic
    fields: dict[str, Any] = field(default_factory=dict)


CHEATS = [
    # -- HOL Light's own file functions around the fence -------------------------------------
    Cheat(
        "write_then_loadt",
        f'file_of_string "/tmp/{TRACE}-forge.ml" "let FORGED : thm = {FORGE};;";;\n'
        f'loadt "/tmp/{TRACE}-forge.ml";;\n'
        "let ONE_IS_TWO = CONTR `1 = 2` FORGED;;\n",
        Verdict.FAIL,
        where=(1, 0),
        words="`file_of_string` is not allowed",
    ),
    Cheat(
        "write_then_loads_a_shell_command",
        f'file_of_string "{TRACE}.ml" "Sys.command \\"touch /tmp/{TRACE}-shell\\";;";;\n'
        f'loads "{TRACE}.ml";;\n',
        Verdict.FAIL,
        where=(1, 0),
    ),
    Cheat("loadt_alone", 'loadt "/etc/hostname";;\n', Verdict.FAIL, where=(1, 0), words="`loadt`"),
    Cheat("help_runs_sed", 'help "REFL";;\n', Verdict.FAIL, where=(1, 0), words="`help`"),
    Cheat("hol_dir_moved", 'hol_dir := "/tmp";;\n', Verdict.FAIL, where=(1, 0)),
    # -- text the old fence misread: the real parse decides ------------------------------------
    Cheat(
        "comment_with_char_literal",
        f"(* x'\"' *)\nlet FORGED : thm = {FORGE};;\nlet ONE_IS_TWO = CONTR `1 = 2` FORGED;;\n",
        Verdict.FAIL,
        where=(2, 19),
        words="`Obj.magic` is not allowed",
    ),
    Cheat(
        "comment_with_string",
        f'(* "*)" *)\nlet FORGED : thm = {FORGE};;\n',
        Verdict.FAIL,
        where=(2, 19),
    ),
    Cheat(
        "quotation_with_lone_quote",
        f'let q = `x"`;;\nlet FORGED : thm = {FORGE};;\nlet closing = "";;\n',
        Verdict.FAIL,
        where=(2, 19),
    ),
    # -- OCaml's ways around the kernel --------------------------------------------------------
    Cheat(
        "obj_through_stdlib",
        "let FORGED : thm = Stdlib.Obj.magic (Some ([], `F`));;\n",
        Verdict.FAIL,
        where=(1, 19),
        words="module Obj",
    ),
    Cheat(
        "obj_through_a_module_alias",
        "module Mo = Obj;;\nlet FORGED : thm = Mo.magic (Some ([], `F`));;\n",
        Verdict.FAIL,
        where=(1, 0),
    ),
    Cheat(
        "obj_through_a_functor",
        "module Cast (Xs : sig end) = struct let cast = Obj.magic end;;\n",
        Verdict.FAIL,
        where=(1, 0),
        words="a module definition",
    ),
    Cheat(
        "obj_through_a_local_module",
        "let cast x = let module Mo = Stdlib in Mo.Obj.magic x;;\n",
        Verdict.FAIL,
        where=(1, 13),
        words="a local module",
    ),
    Cheat(
        "obj_through_a_first_class_module",
        "let m = (module Stdlib : sig val print_string : string -> unit end);;\n",
        Verdict.FAIL,
    ),
    Cheat(
        "obj_through_open", "let cast x = let open Obj in magic x;;\n", Verdict.FAIL, where=(1, 13)
    ),
    Cheat(
        "external_identity",
        "external cast : 'a -> 'b = \"%identity\";;\nlet FORGED : thm = cast (Some ([], `F`));;\n",
        Verdict.FAIL,
        where=(1, 0),
        words="`external`",
    ),
    Cheat(
        "unmarshal",
        'let FORGED : thm = Marshal.from_string "" 0;;\n',
        Verdict.FAIL,
        where=(1, 19),
    ),
    Cheat(
        "unsafe_string_mutation",
        'let mutable_f = Bytes.unsafe_of_string "F";;\n',
        Verdict.FAIL,
        where=(1, 16),
    ),
    Cheat(
        "gc_finaliser_runs_later",
        "let () = Gc.finalise (fun _ -> ignore (new_axiom `F`)) (ref 0);;\n",
        Verdict.FAIL,
        where=(1, 9),
    ),
    Cheat(
        "toplevel_itself",
        "let toplevel = Toploop.toplevel_env;;\n",
        Verdict.FAIL,
        where=(1, 15),
        words="module Toploop",
    ),
    # -- the machine -----------------------------------------------------------------------------
    Cheat(
        "sys_command_through_stdlib",
        f'let _ = Stdlib.Sys.command "touch /tmp/{TRACE}-stdlib";;\n',
        Verdict.FAIL,
        where=(1, 8),
        words="module Sys",
    ),
    Cheat(
        "sys_command_home",
        f'let _ = Sys.command "touch {HOME}/{TRACE}-home";;\n',
        Verdict.FAIL,
        where=(1, 8),
    ),
    Cheat(
        "open_out_tmp",
        f'let () = let oc = open_out "/tmp/{TRACE}-open-out" in output_string oc "x";;\n',
        Verdict.FAIL,
        where=(1, 18),
        words="`open_out`",
    ),
    Cheat(
        "temp_file",
        f'let path = Filename.temp_file "{TRACE}" ".ml";;\n',
        Verdict.FAIL,
        where=(1, 11),
    ),
    Cheat(
        "needs_outside_hol_light",
        f'needs "../../../../../../tmp/{TRACE}.ml";;\n',
        Verdict.FAIL,
        where=(1, 6),
        words="HOL Light's own library files",
    ),
    Cheat("needs_itself", 'needs "artifact.ml";;\n', Verdict.FAIL, where=(1, 6)),
    Cheat(
        "needs_later_in_the_file",
        'let X = TRUTH;;\nneeds "Library/iter.ml";;\n',
        Verdict.FAIL,
        where=(2, 0),
    ),
    # camlp5 runs #load and #directory while it parses: refused before they run.
    Cheat("directive_load", '#load "unix.cma";;\n', Verdict.FAIL, where=(1, 0)),
    Cheat("directive_directory", '#directory "/tmp";;\n', Verdict.FAIL, where=(1, 0)),
    # -- ending early, or with the report in disarray ---------------------------------------------
    Cheat(
        "exit_mid_file",
        "let FINE = ARITH_RULE `1 + 1 = 2`;;\nexit 0;;\nlet NEVER = prove (`1 = 2`, ARITH_TAC);;\n",
        Verdict.FAIL,
        where=(2, 0),
    ),
    Cheat("exit_through_pervasives", "Pervasives.exit 0;;\n", Verdict.FAIL, where=(1, 0)),
    Cheat(
        "at_exit_hook",
        'at_exit (fun () -> print_string "RESULT 0\\n");;\n',
        Verdict.FAIL,
        where=(1, 0),
    ),
    Cheat(
        "prints_report_frames",
        'print_string "\\nEND 0\\nRESULT 0\\n";;\nFormat.print_string "RESULT 0";;\n'
        'failwith "stop here";;\n',
        Verdict.FAIL,
        words='Failure "stop here"',
    ),
    Cheat(
        "output_that_raises",
        "Format.set_formatter_output_functions (fun _ _ _ -> raise Exit) (fun () -> raise Exit);;\n"
        "let ONE_IS_TWO = new_axiom `1 = 2`;;\n",
        Verdict.FAIL,
    ),
    Cheat(
        "axiom_then_two_megabytes_of_output",
        "let ONE_IS_TWO = new_axiom `1 = 2`;;\n"
        "let () = for i = 1 to 20000 do print_string (String.make 100 'x') done;;\n"
        "let () = for i = 1 to 20000 do Format.print_string (String.make 100 'y') done;;\n",
        Verdict.AXIOM,
    ),
    # -- memory as text ---------------------------------------------------------------------------
    Cheat(
        "fail_tac_out_of_memory",
        'let ONE_IS_TWO = prove (`1 = 2`, FAIL_TAC "Out_of_memory");;\n',
        Verdict.FAIL,
    ),
    Cheat("failure_out_of_memory", 'failwith "Out_of_memory";;\n', Verdict.FAIL),
    Cheat("raise_out_of_memory", "let x : int = raise Out_of_memory;;\n", Verdict.FAIL),
    # -- what a proof means ----------------------------------------------------------------------
    Cheat(
        "rebind_prove",
        "let prove (tm, tac) = TRUTH;;\nlet ONE_IS_TWO = prove (`1 = 2`, ARITH_TAC);;\n",
        Verdict.FAIL,
        where=(1, 4),
        words="rebinding `prove`",
        fields={"target": Target(name="ONE_IS_TWO", statement="1 = 2")},
    ),
    Cheat(
        "rebind_the_goal_stack",
        "let top_thm () = TRUTH;;\ng `1 = 2`;;\nlet ONE_IS_TWO = top_thm ();;\n",
        Verdict.FAIL,
        where=(1, 4),
        fields={"target": Target(name="ONE_IS_TWO", statement="1 = 2")},
    ),
    Cheat(
        "rebind_a_kernel_rule",
        "let REFL tm = TRUTH;;\nlet ONE_IS_TWO = REFL `1 = 2`;;\n",
        Verdict.FAIL,
        where=(1, 4),
    ),
    Cheat(
        "rebind_a_library_name_after_needs",
        'needs "Library/iter.ml";;\nlet ITER = TRUTH;;\n',
        Verdict.FAIL,
        where=(2, 4),
    ),
    Cheat(
        "rebind_cheat_tac",
        "let CHEAT_TAC = ALL_TAC;;\n",
        Verdict.FAIL,
        where=(1, 4),
    ),
    Cheat(
        "prove_shadowed_locally",
        "let ONE_IS_TWO = let prove (_, _) = TRUTH in prove (`1 = 2`, ARITH_TAC);;\n",
        Verdict.WRONG_STATEMENT,
        words="`ONE_IS_TWO` states: |- T",
        fields={"target": Target(name="ONE_IS_TWO", statement="1 = 2")},
    ),
    Cheat(
        "a_theorem_type_of_its_own",
        "type thm = Sequent of term list * term;;\nlet ONE_IS_TWO = Sequent ([], `1 = 2`);;\n",
        Verdict.WRONG_STATEMENT,
        words="is not a theorem",
        fields={"target": Target(name="ONE_IS_TWO", statement="1 = 2")},
    ),
    Cheat(
        "notation_moves_the_target",
        'override_interface ("*", `(+):num->num->num`);;\n'
        "let TWO_IS_A_SQUARE = prove (`?n. n * n = 2`, EXISTS_TAC `1` THEN ARITH_TAC);;\n",
        Verdict.WRONG_STATEMENT,
        words="states: |- ?n. n + n = 2",
        fields={"target": Target(name="TWO_IS_A_SQUARE", statement="?n. n * n = 2")},
    ),
    Cheat(
        "interface_prints_f_as_t",
        'override_interface ("T", `F`);;\nlet LIE = new_axiom `F`;;\n',
        Verdict.AXIOM,
        words="|- F",
        fields={"allowed_axioms": ("|- T",)},
    ),
    Cheat(
        "user_printer_lies",
        'install_user_printer ("lie", fun fmt _ -> Format.pp_print_string fmt "T");;\n'
        "let LIE = new_axiom `F`;;\n",
        Verdict.FAIL,
        where=(1, 0),
        fields={"allowed_axioms": ("|- T",)},
    ),
    Cheat("install_printer_directive", "#install_printer print_num;;\n", Verdict.FAIL, (1, 0)),
    # -- axioms by other names ---------------------------------------------------------------------
    Cheat("mk_thm", "let ONE_IS_TWO = mk_thm ([], `1 = 2`);;\n", Verdict.AXIOM, words="|- 1 = 2"),
    Cheat("kernel_new_axiom", "let ONE_IS_TWO = Hol.new_axiom `1 = 2`;;\n", Verdict.AXIOM),
    Cheat(
        "cheat_tac_renamed",
        "let MY_TAC = CHEAT_TAC;;\nlet ONE_IS_TWO = prove (`1 = 2`, MY_TAC);;\n",
        Verdict.PLACEHOLDER,
    ),
    # -- soundness bugs of the OCaml in the image (4.13) ------------------------------------------
    Cheat(  # ocaml/ocaml#7241: the guard swaps what the compiled match already tested
        "guard_mutates_the_matched_record",
        "type slot = Fake of (term list * term) option | Real of thm;;\n"
        "type cell = {mutable slot : slot};;\n"
        "let forge tm = let c = {slot = Real TRUTH} in match c with\n"
        "  | {slot = Fake _} -> TRUTH\n"
        "  | _ when (c.slot <- Fake (Some ([], tm)); false) -> TRUTH\n"
        "  | {slot = Real th} -> th;;\n"
        "let ONE_IS_TWO = forge `1 = 2`;;\n",
        Verdict.FAIL,
        where=(5, 11),
        words="ocaml/ocaml#7241",
        fields={"target": Target(name="ONE_IS_TWO", statement="1 = 2")},
    ),
    Cheat(  # ocaml/ocaml#13579: GADTs and non-injective types
        "gadt_constructor",
        "type _ t = Thm : thm t | Num : int t;;\n",
        Verdict.FAIL,
        where=(1, 11),
        words="ocaml/ocaml#13579",
    ),
]


@pytest.fixture(scope="module", params=["local", pytest.param("docker", marks=pytest.mark.docker)])
def hol(request) -> HolLight:
    return HolLight(session_checker(request, request.param))  # one worker per backend per session


@pytest.fixture(autouse=True)
def no_traces():
    """Whatever the check did, nothing it aimed at outside the work dir exists afterwards."""
    for path in _traces():  # left by an earlier run of a broken kit: start clean
        Path(path).unlink()
    yield
    assert _traces() == []


def _traces() -> list[str]:
    return sorted(path for pattern in TRACE_GLOBS for path in glob.glob(pattern))


def check(hol, cheat: Cheat) -> CheckResult:
    return hol.check(f"{cheat.name}.ml", content=cheat.content, **cheat.fields)


@pytest.mark.parametrize("cheat", CHEATS, ids=lambda cheat: cheat.name)
def test_no_cheat_passes(hol, cheat):
    result = check(hol, cheat)
    assert result.verdict is not Verdict.PASS
    assert result.verdict is cheat.verdict, result.diagnostics
    assert result.provenance.attempts == 1  # the artifact's verdict, never an infra error
    if cheat.where is not None or cheat.words is not None:
        [diagnostic] = result.diagnostics
        if cheat.where is not None:
            assert (diagnostic.line, diagnostic.column) == cheat.where, diagnostic
        if cheat.words is not None:
            assert cheat.words in diagnostic.message, diagnostic


def test_a_guard_over_tuples_and_variants_is_no_cheat(hol):
    """Only guards over records, arrays and lazy values are refused: the usual ones stay."""
    content = (
        "let rec first_pos = function [] -> 0 | x :: _ when x > 0 -> x | _ :: t -> first_pos t;;\n"
        "let THREE = prove (`3 = 3`, REFL_TAC);;\n"
        "let _ = match (first_pos [0; 3], Some 1) with (n, Some _) when n > 1 -> () | _ -> failwith"
        ' "guard";;\n'
    )
    result = hol.check("guards.ml", content=content, target=Target(name="THREE", statement="3 = 3"))
    assert result.verdict is Verdict.PASS, result.diagnostics


def test_memory_is_read_from_the_process_not_from_its_text(hol):
    # A real exhaustion: the address-space limit (local) or the cgroup's OOM killer (docker).
    grow = "let rec grow acc = grow (Array.make 1000000 0 :: acc);;\nlet _ = grow [];;\n"
    result = hol.check("grow.ml", content=grow)
    assert result.verdict is Verdict.MEMORY, result.diagnostics
    assert "memory" in result.diagnostics[0].message
    after = hol.check("fine.ml", content="let X = ARITH_RULE `1 + 1 = 2`;;\n")
    assert after.verdict is Verdict.PASS  # the worker survived its child


def test_what_a_file_proved_is_listed_from_the_kernel(hol):
    # Names bound to theorems and what they state, as the kernel holds them: not what any printer
    # or the file's own comments say.
    content = (
        "(* proves 1 = 2 *)\n"
        'override_interface ("T", `F`);;\n'
        "let ONE_IS_TWO = let prove (_, _) = TRUTH in prove (`1 = 2`, ARITH_TAC);;\n"
        "let NOT_A_THEOREM = 3;;\n"
    )
    result = hol.check("lists.ml", content=content)
    assert result.verdict is Verdict.PASS
    assert result.details["theorems"] == [{"name": "ONE_IS_TWO", "statement": "|- T"}]
