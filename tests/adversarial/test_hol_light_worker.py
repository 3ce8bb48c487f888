"""HOL Light files that attack the worker itself rather than the logic: its report channel, the
replayer's report, the state one check leaves for the next, and the printing of statements.

The checking child is the artifact's: it can write any frame on its report pipe (reopened
through /proc/self/fd), and any export. So memory comes from the worker's own observation, a
record says which of its claims rest on the child's word, the replayer's report cannot be
stalled by a valid proof, and each check starts where a fresh worker does.

Every case runs on both backends, on the session's one worker per backend (tests/helpers).
"""

from __future__ import annotations

import pytest

from runner.core.models import Target, Trust, Verdict
from tests.helpers import SHARES_HOL_LIGHT_BOOTS, HolLight, session_checker

pytestmark = [pytest.mark.slow, SHARES_HOL_LIGHT_BOOTS]

# Writes `frames` on every pipe this process holds: the report pipe is one of them.
FORGE = """
let forge frames =
  Array.iter
    (fun fd ->
      let path = "/proc/self/fd/" ^ fd in
      let link = try Unix.readlink path with _ -> "" in
      if String.length link > 5 && String.sub link 0 5 = "pipe:" then
        (try
           let oc = open_out_gen [Open_wronly] 0 path in
           output_string oc frames; close_out oc
         with _ -> ()))
    (Sys.readdir "/proc/self/fd");;
"""

# An export of an honest theorem under the name `main`, written with the kit's own exporter,
# then the frames of a file that ran to its end, and an exit before anything else runs.
FORGED_EXPORT = (
    FORGE
    + """
let honest = ARITH_RULE `1 + 1 = 2`;;
let export =
  Prooflock_export.check_export ~from:max_int ~named:[("main", honest)] ~axioms:[]
    ~placeholders:[];;
let () =
  let oc = open_out_bin "proof.export" in
  output_string oc export; close_out oc;
  forge "END 0\\nTHEOREM 4\\nmainRESULT 0\\n";
  exit 0;;
"""
)

# A C program that leaves state no process holds: SysV shared memory (64 MB, touched, so
# charged to the sandbox's memory), a semaphore set, a message queue and a POSIX mqueue.
PIN_C = r"""
#include <sys/ipc.h>
#include <sys/shm.h>
#include <sys/sem.h>
#include <sys/msg.h>
#include <mqueue.h>
#include <fcntl.h>
#include <string.h>
int main(void) {
  int id = shmget(IPC_PRIVATE, 64 << 20, IPC_CREAT | 0600);
  char *p = shmat(id, 0, 0);
  if (id < 0 || p == (char *)-1) return 1;
  memset(p, 1, 64 << 20);
  shmdt(p);
  semget(IPC_PRIVATE, 1, IPC_CREAT | 0600);
  msgget(IPC_PRIVATE, IPC_CREAT | 0600);
  mq_open("/planted", O_CREAT | O_RDWR, 0600, 0);
  return 0;
}
"""


def _ocaml_string(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


PLANT = f"""
let write path text = let oc = open_out_bin path in output_string oc text; close_out oc;;
write "pin.c" {_ocaml_string(PIN_C)};;
let () = if Sys.command "cc -o pin pin.c -lrt && ./pin" <> 0 then failwith "no pin";;
write "/tmp/planted" "x";;
write "/dev/shm/planted" "x";;
write (Filename.concat (Filename.dirname (Sys.getcwd ())) "planted") "x";;
write (Filename.concat (Filename.dirname (Sys.getcwd ())) "boot.log") "Error: planted";;
let PLANTED = ARITH_RULE `1 + 1 = 2`;;
"""

# Fails naming whatever an earlier check could have left: IPC objects, files in the scratch
# dirs, anything in the work dir besides this check's own dir. (The kit's own files, which a
# check cannot have made, belong to root: a restored server's CRIU work dir in /dev/shm.)
PROBE = """
let rows path =
  let ic = open_in path in
  let n = ref 0 in
  (try while true do ignore (input_line ic); incr n done with End_of_file -> ());
  close_in ic; !n - 1;;
let mine path = try (Unix.lstat path).Unix.st_uid = Unix.getuid () with _ -> false;;
let entries dir =
  try List.filter (fun e -> mine (Filename.concat dir e)) (Array.to_list (Sys.readdir dir))
  with Sys_error _ -> [];;
let here = Filename.basename (Sys.getcwd ());;
let left =
  List.filter (fun t -> rows ("/proc/sysvipc/" ^ t) > 0) ["shm"; "sem"; "msg"]
  @ List.map (fun e -> "/tmp/" ^ e) (entries "/tmp")
  @ List.map (fun e -> "/dev/shm/" ^ e) (entries "/dev/shm")
  @ List.map (fun e -> "/dev/mqueue/" ^ e) (entries "/dev/mqueue")
  @ List.filter (fun e -> e <> here) (entries (Filename.dirname (Sys.getcwd ())));;
if left <> [] then failwith ("left by an earlier check: " ^ String.concat ", " left);;
let CLEAN = ARITH_RULE `2 + 2 = 4`;;
"""


@pytest.fixture(scope="module", params=["local", pytest.param("docker", marks=pytest.mark.docker)])
def hol(request) -> HolLight:
    return HolLight(session_checker(request, request.param))


# -- the child's frames and export ---------------------------------------------------------------


def test_a_forged_memory_frame_is_no_memory_verdict(hol):
    result = hol.check("memory.ml", content=FORGE + 'forge "MEMORY 0\\n";;\nfailwith "stop";;\n')
    assert result.verdict is Verdict.FAIL, result.diagnostics
    assert "stop" in result.diagnostics[0].message


def test_a_forged_export_without_a_target_is_a_pass_that_says_whose_word_it_is(hol):
    """`main` is an axiom proving 1 = 2, but the child exported an honest theorem under its name
    and ended the check itself: without a target, nothing outside its process can tell."""
    result = hol.check("forged.ml", content="let main = new_axiom `1 = 2`;;\n" + FORGED_EXPORT)
    assert result.verdict is Verdict.PASS, result.diagnostics
    assert result.details["self_reported"] == ["ran_to_end", "theorems"]
    assert result.trust is Trust.SELF_REPORTED


def test_a_forged_export_never_meets_a_target_it_does_not_prove(hol):
    content = FORGED_EXPORT + "let main = prove (`1 = 2`, ARITH_TAC);;\n"  # never runs
    result = hol.check("forged.ml", content=content, target=Target(name="main", statement="1 = 2"))
    assert result.verdict is Verdict.WRONG_STATEMENT, result.diagnostics
    assert result.trust is Trust.REPLAYED
    assert result.details["self_reported"] == ["ran_to_end"]


def test_statement_mode_says_the_placeholders_are_the_files_word(hol):
    result = hol.check("stated.ml", content="let T1 = ARITH_RULE `1 + 1 = 2`;;\n", mode="statement")
    assert result.verdict is Verdict.PASS, result.diagnostics
    assert "placeholders" in result.details["self_reported"]


# -- the replayer's report -----------------------------------------------------------------------


def test_a_valid_proof_of_an_exponential_tree_is_replayed_not_stalled(hol):
    """REFL of t60, where t(n+1) = (t(n) = t(n)): 2^60 nodes as a tree, 60 as a DAG."""
    content = (
        "#remove_printer pp_print_thm;;\n"
        "let rec big n = if n = 0 then `x:bool` else let t = big (n - 1) in mk_eq (t, t);;\n"
        "let BIG = REFL (big 60);;\n"
    )
    result = hol.check("big.ml", content=content)
    assert result.verdict is Verdict.PASS, result.diagnostics
    [theorem] = result.details["theorems"]
    assert "too large to print" in theorem["statement"]


# -- statements a constant's name cannot spoof ---------------------------------------------------


def test_a_constant_named_like_a_numeral_is_printed_as_a_name(hol):
    content = (
        'let FIVE = new_basic_definition (mk_eq (mk_var ("5", `:num`), `4`));;\n'
        "let SPOOF = TRANS (ARITH_RULE `2 + 2 = 4`) (SYM FIVE);;\n"
    )
    result = hol.check("five.ml", content=content)
    assert result.verdict is Verdict.PASS, result.diagnostics
    statements = {t["name"]: t for t in result.details["theorems"]}
    assert statements["SPOOF"]["statement"] == "|- 2 + 2 = {5}"
    assert "{5:num}" in statements["SPOOF"]["typed"]
    assert result.details["definitions"] == ["|- {5} = 4"]
    assert result.details["definition_keys"] == [
        "|- (({=:(num,(num,bool)fun)fun} {5:num}) ({NUMERAL:(num,num)fun} "
        "({BIT0:(num,num)fun} ({BIT0:(num,num)fun} ({BIT1:(num,num)fun} {_0:num})))))"
    ]


# -- state left for the next check ---------------------------------------------------------------


def test_a_check_starts_from_what_a_fresh_worker_has(hol):
    """One check leaves SysV shared memory, a semaphore set, a message queue, a POSIX message
    queue and files in /tmp, /dev/shm and the work dir (a forged boot.log too); the next finds
    none of them."""
    planted = hol.check("plant.ml", content=PLANT)
    assert planted.verdict is Verdict.PASS, planted.diagnostics
    probed = hol.check("probe.ml", content=PROBE)
    assert probed.verdict is Verdict.PASS, probed.diagnostics
    again = hol.check("probe.ml", content=PROBE)  # the worker's own boot record is intact too
    assert again.verdict is Verdict.PASS, again.diagnostics
