"""The HOL Light replayer alone: HOL Light's own kernel re-derives what an export claims, or fails.

The replayer (runner/provers/hol_light/sandbox/replay.ml) is built here from Debian's HOL Light
sources, as the kit builds it in its sandbox, and fed proof exports written by hand: the same
format the worker writes (export.ml), so each case says exactly which inference an attacker
sends. Nothing boots HOL Light, so this runs in seconds.
"""

from __future__ import annotations

import json
import resource
import shutil
import subprocess
from pathlib import Path

import pytest

from runner.provers.hol_light import worker as hol_worker
from tests.helpers import SHARES_HOL_LIGHT_BOOTS

HOL_DIR = Path("/usr/share/hol-light")

pytestmark = [
    SHARES_HOL_LIGHT_BOOTS,
    pytest.mark.skipif(
        not (HOL_DIR / "fusion.ml").exists() or shutil.which("ocamlopt") is None,
        reason="needs Debian's hol-light and the OCaml native compiler",
    ),
]


class Export:
    """A proof export written record by record (see the format in replay.ml)."""

    def __init__(self) -> None:
        self.data = bytearray(b"PLHP1\n")
        self.strings: dict[str, int] = {}
        self.types = self.terms = self.thms = 0

    def _int(self, n: int) -> None:
        while n >= 128:
            self.data.append(128 | (n & 127))
            n >>= 7
        self.data.append(n)

    def _record(self, tag: str, *ints: int) -> None:
        self.data += tag.encode()
        for n in ints:
            self._int(n)

    def s(self, text: str) -> int:
        if text not in self.strings:
            raw = text.encode()
            self.data += b"s"
            self._int(len(raw))
            self.data += raw
            self.strings[text] = len(self.strings)
        return self.strings[text]

    def tyvar(self, name: str) -> int:
        self._record("v", self.s(name))
        self.types += 1
        return self.types - 1

    def tyapp(self, name: str, *args: int) -> int:
        self._record("t", self.s(name), len(args), *args)
        self.types += 1
        return self.types - 1

    def _term(self, tag: str, *ints: int) -> int:
        self._record(tag, *ints)
        self.terms += 1
        return self.terms - 1

    def var(self, name: str, ty: int) -> int:
        return self._term("V", self.s(name), ty)

    def const(self, name: str, ty: int) -> int:
        return self._term("K", self.s(name), ty)

    def comb(self, f: int, x: int) -> int:
        return self._term("C", f, x)

    def abs(self, v: int, body: int) -> int:
        return self._term("A", v, body)

    def thm(self, tag: str, *ints: int) -> int:
        self._record(tag, *ints)
        self.thms += 1
        return self.thms - 1

    def new_type(self, name: str, arity: int) -> None:
        self._record("T", self.s(name), arity)

    def root(self, name: str, thm: int) -> None:
        self._record("R", self.s(name), thm)

    def target(self, term: int) -> None:
        self._record("G", term)

    def eq(self, ty: int, left: int, right: int) -> int:
        fun = self.tyapp("fun", ty, self.tyapp("fun", ty, self.bool()))
        return self.comb(self.comb(self.const("=", fun), left), right)

    def bool(self) -> int:
        return self.tyapp("bool")


def library_export() -> bytes:
    """Two chunks, as the worker writes them while HOL Light loads: the first keeps `x = x` and an
    axiom `p`, the second, from the first's `x = x` alone, keeps another theorem."""
    first = Export()
    refl = first.thm("r", first.var("x", first.bool()))
    axiom = first.thm("X", first.var("p", first.bool()))
    first._record("S", refl)  # library theorem 0
    first._record("S", axiom)  # library theorem 1
    first.data += b"Z"
    second = Export()
    again = second.thm("L", 0)
    chained = second.thm("x", again, again)
    second._record("S", chained)  # library theorem 2
    second.data += b"Z"
    return bytes(first.data) + bytes(second.data[len(b"PLHP1\n") :])


def start_replayer(work: Path, library: bytes, address_space: int | None = None):
    for name, data in hol_worker.sandbox_files(hol_worker.REPLAYER_FILES).items():
        (work / name).write_bytes(data)
    build = subprocess.run(
        ["sh", "build_replay.sh"], cwd=work, capture_output=True, text=True, timeout=600
    )
    assert build.returncode == 0, build.stdout + build.stderr
    (work / "library.export").write_bytes(library)

    def limit() -> None:  # the local backend's memory limit: the address space
        if address_space is not None:
            resource.setrlimit(resource.RLIMIT_AS, (address_space, address_space))

    proc = subprocess.Popen(
        [str(work / "replay"), "library.export"],
        cwd=work,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        preexec_fn=limit,
    )
    assert proc.stdout is not None and proc.stdin is not None
    ready = proc.stdout.readline().split()

    def replay(export: Export, target: Export | None = None) -> dict:
        body, goal = bytes(export.data), bytes(target.data) if target else b""
        proc.stdin.write(f"CHECK {len(body)} {len(goal)} 30000\n".encode() + body + goal)
        proc.stdin.flush()
        return json.loads(proc.stdout.readline())

    return proc, ready, replay


@pytest.fixture(scope="module")
def replayer(tmp_path_factory):
    """The replayer built as the kit builds it, serving checks against an empty library."""
    proc, ready, replay = start_replayer(tmp_path_factory.mktemp("replayer"), Export().data)
    assert ready[0] == b"READY", ready
    yield replay
    proc.kill()
    proc.wait()


def test_a_library_in_chunks_keeps_only_what_it_says_and_checks_refer_to_it(tmp_path):
    proc, ready, replay = start_replayer(tmp_path, library_export())
    try:
        assert ready[0] == b"READY" and ready[2:4] == [b"3", b"1"]  # kept, axioms
        e = Export()
        e.root("CHAINED", e.thm("L", 2))
        e.root("AXIOM", e.thm("L", 1))
        chained, axiom = replay(e)["theorems"]
        assert chained["statement"] == "|- x <=> x" and chained["library_axioms"] == []
        assert axiom["library_axioms"] == ["|- p"]
        beyond = Export()
        beyond.thm("L", 3)
        assert "no library theorem 3" in replay(beyond)["error"]
        smuggled = Export()  # a check cannot add to the library
        smuggled._record("S", smuggled.thm("r", smuggled.var("y", smuggled.bool())))
        assert replay(smuggled)["ok"] is False
    finally:
        proc.kill()
        proc.wait()


def reflexive(name: str = "x") -> tuple[Export, int]:
    """An export proving `name = name` (booleans) by REFL, bound as R."""
    e = Export()
    x = e.var(name, e.bool())
    th = e.thm("r", x)
    e.root("R", th)
    return e, th


def test_a_primitive_proof_replays_with_its_statement(replayer):
    export, _ = reflexive()
    [theorem] = replayer(export)["theorems"]
    assert theorem["name"] == "R"
    assert theorem["statement"] == "|- x <=> x"
    assert (theorem["hypotheses"], theorem["axioms"], theorem["definitions"]) == (0, [], [])


def test_an_inference_the_kernel_refuses_fails_the_whole_replay(replayer):
    e = Export()
    x, y = e.var("x", e.bool()), e.var("y", e.bool())
    # x = x and y = y do not chain: TRANS needs the middle terms to agree
    bad = e.thm("x", e.thm("r", x), e.thm("r", y))
    e.root("FORGED", bad)
    result = replayer(e)
    assert result["ok"] is False
    assert "TRANS" in result["error"]


def test_an_ill_typed_term_is_refused_by_the_kernels_constructors(replayer):
    e = Export()
    x = e.var("x", e.bool())
    e.comb(x, x)  # a boolean applied to itself
    assert "mk_comb" in replayer(e)["error"]


def test_an_axiom_is_reported_under_the_theorem_that_uses_it(replayer):
    e = Export()
    p = e.var("p", e.bool())
    axiom = e.thm("X", p)
    e.root("P", axiom)
    result = replayer(e)
    # the typed key (what an allowed axiom is named by) says what the printing hides
    assert result["axioms"] == [{"statement": "|- p", "placeholder": False, "typed": "|- (p:bool)"}]
    assert result["theorems"][0]["axioms"] == ["|- p"]


def test_a_theorem_let_go_still_counts_under_what_cites_it_and_cannot_be_cited_again(replayer):
    # The worker lets the replayer drop each step after its last use ('F'), so a long
    # computation's replay holds what the kernel needs. What rests on a dropped step still says so.
    e = Export()
    p = e.var("p", e.bool())
    axiom = e.thm("X", p)
    refl = e.thm("r", p)
    proved = e.thm("q", refl, axiom)  # EQ_MP: p = p, p |- p
    e._record("F", axiom)
    e._record("F", refl)
    e.root("P", proved)
    result = replayer(e)
    assert result["ok"] is True, result
    [theorem] = result["theorems"]
    assert (theorem["statement"], theorem["axioms"]) == ("|- p", ["|- p"])

    for late in ("cite", "name", "again"):
        e = Export()
        refl = e.thm("r", e.var("x", e.bool()))
        e._record("F", refl)
        if late == "cite":
            e.thm("x", refl, refl)
        elif late == "name":
            e.root("GONE", refl)
        else:
            e._record("F", refl)
        assert "was let go" in replayer(e)["error"], late
    # a named theorem let go after its name is no theorem either (not the replayer's placeholder)
    e = Export()
    refl = e.thm("r", e.var("x", e.bool()))
    e.root("R", refl)
    e._record("F", refl)
    assert "was let go" in replayer(e)["error"]


def test_a_replay_out_of_memory_says_so_and_the_replayer_serves_on(tmp_path):
    # 12,000 named theorems, each a fresh copy of a 4,000-node statement (INST x -> y, then back):
    # about 1.2 GB kept, under an address space of 768 MB.
    proc, ready, replay = start_replayer(tmp_path, Export().data, address_space=768 << 20)
    try:
        assert ready[0] == b"READY", ready
        e = Export()
        x, y = e.var("x", e.bool()), e.var("y", e.bool())
        f = e.var("f", e.tyapp("fun", e.bool(), e.tyapp("fun", e.bool(), e.bool())))
        big = x
        for _ in range(1000):
            big = e.comb(e.comb(f, big), x)
        th = e.thm("r", big)
        for step in range(12000):
            new, old = (y, x) if step % 2 == 0 else (x, y)
            th = e.thm("i", 1, new, old, th)
            e.root("T", th)
        result = replay(e)
        assert (result["ok"], result.get("memory")) == (False, True), result
        again, _ = reflexive()
        assert replay(again)["ok"] is True  # the check ran in a child: the server lives on
    finally:
        proc.kill()
        proc.wait()


def test_assumptions_stay_hypotheses(replayer):
    e = Export()
    th = e.thm("a", e.var("p", e.bool()))
    e.root("H", th)
    [theorem] = replayer(e)["theorems"]
    assert theorem["hypotheses"] == 1
    assert theorem["statement"] == "p |- p"


def test_a_target_is_compared_up_to_bound_names_not_free_ones(replayer):
    export, _ = reflexive("x")
    same, other = Export(), Export()
    same.target(same.eq(same.bool(), same.var("x", same.bool()), same.var("x", same.bool())))
    other.target(other.eq(other.bool(), other.var("y", other.bool()), other.var("y", other.bool())))
    assert replayer(export, same)["theorems"][0]["target"] == "same"
    assert replayer(export, other)["theorems"][0]["target"] == "differs"


def test_a_constant_the_file_defines_cannot_stand_for_a_free_variable_of_the_target(replayer):
    """The target says `c = c` for a variable c; the file defines a constant c and proves that."""
    e = Export()
    b = e.bool()
    fun = e.tyapp("fun", b, b)
    v = e.var("v", b)
    identity = e.abs(v, v)
    e.thm("D", e.eq(fun, e.var("c", fun), identity))
    th = e.thm("r", e.const("c", fun))
    e.root("R", th)
    goal = Export()
    gfun = goal.tyapp("fun", goal.bool(), goal.bool())
    goal.target(goal.eq(gfun, goal.var("c", gfun), goal.var("c", gfun)))
    result = replayer(e, goal)
    assert result["ok"] is True
    assert result["theorems"][0]["target"] == "differs"
    assert result["definitions"] == ["|- c = (\\v. v)"]


def test_a_target_that_mentions_a_constant_the_library_lacks_is_no_target(replayer):
    export, _ = reflexive()
    goal = Export()
    goal.target(goal.const("undefined_constant", goal.bool()))
    assert replayer(export, goal)["ok"] is False


def test_a_library_theorem_that_does_not_exist_is_no_proof(replayer):
    e = Export()
    e._record("L", 12345)
    assert "library" in replayer(e)["error"]


@pytest.mark.parametrize("cut", [1, 7, 20])
def test_a_truncated_or_garbled_export_fails_without_breaking_the_replayer(replayer, cut):
    export, _ = reflexive()
    broken = Export()
    broken.data = export.data[:-cut] if cut < len(export.data) else bytearray(b"junk")
    assert replayer(broken)["ok"] is False
    again, _ = reflexive()
    assert replayer(again)["ok"] is True  # the next check is served as usual


def test_a_type_whose_name_has_a_space_is_just_a_name(replayer):
    e = Export()
    e.new_type("a b", 0)
    th = e.thm("r", e.var("x", e.tyapp("a b")))
    e.root("R", th)
    result = replayer(e)
    assert result["types"] == [{"name": "a b", "arity": 0}]
    assert result["theorems"][0]["statement"] == "|- x = x"


def exponential(e: Export, depth: int) -> int:
    """t(depth), where t(n+1) = (t(n) = t(n)): 2^depth nodes as a tree, depth as a DAG."""
    term = e.var("x", e.bool())
    for _ in range(depth):
        term = e.eq(e.bool(), term, term)
    return term


def test_a_valid_proof_whose_statement_is_an_exponential_tree_is_reported_at_once(replayer):
    e = Export()
    e.root("BIG", e.thm("r", exponential(e, 60)))
    goal = Export()
    goal.target(goal.var("x", goal.bool()))
    result = replayer(e, goal)  # within the 30 s the replayer gives it, or a timeout
    assert result["ok"] is True, result
    [theorem] = result["theorems"]
    assert theorem["statement"] == "|- <a term too large to print: over 20000 nodes>"
    assert theorem["typed"].startswith("<too large to key")
    assert theorem["target"] == "differs"


def test_a_name_that_reads_as_something_else_is_braced_and_quoted_in_keys(replayer):
    e = Export()
    e.new_type("num", 0)
    num = e.tyapp("num")
    for name in ("5", "a:b}"):
        e._record("N", e.s(name), num)
    e.root("FIVE", e.thm("r", e.const("5", num)))
    e.root("ODD", e.thm("r", e.const("a:b}", num)))
    e.root("SUM", e.thm("r", e.var("2 + 2", num)))
    five, odd, var = replayer(e)["theorems"]
    assert five["statement"] == "|- {5} = {5}"
    assert five["typed"] == "|- (({=:(num,(num,bool)fun)fun} {5:num}) {5:num})"
    assert odd["statement"] == "|- {a:b\\}} = {a:b\\}}"
    assert '{"a:b}":num}' in odd["typed"]
    assert var["statement"] == "|- {2 + 2} = {2 + 2}"
    assert var["typed"] == "|- (({=:(num,(num,bool)fun)fun} (2 + 2:num)) (2 + 2:num))"
