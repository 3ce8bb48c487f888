"""A protocol double of the Lean REPL (leanprover-community/repl), for tests: no Lean inside.

It speaks the REPL's wire format byte for byte (REPL/Main.lean at the image's pinned commit):
a request is JSON lines up to a blank line (lines starting `#` or `--` are skipped), a reply is
Lean's `Json.pretty` rendering (width 80, object keys in descending order, the layout of
`Format`) followed by a blank line. `tests/test_lean.py` checks the renderer reproduces every
reply of the transcripts exactly. The transcripts in transcripts/lean/ are authored for prooflock
in that format (not recordings, not copied from the REPL's test suite: see README.md).

How it decides, in this order (see tests/doubles/README.md):
1. a command in transcripts/lean/*.in gets its transcript's reply (env numbers renumbered,
   positions shifted by the blank lines before the command text);
2. `{"cmd": "import A\\n..."}` without env: the header. Modules in KNOWN_MODULES load; another
   gives Lean's own `unknown module prefix` / `object file ... does not exist` error;
3. a command on an env: declarations are found by a regex (theorem, lemma, def, abbrev, axiom,
   instance, example); a `sorry` gives a sorries entry and Lean's `declaration uses `sorry``
   warning; `axiom X` and a declaration naming X depend on X; `native_decide` (`bv_decide`) in
   the proof of X adds and depends on the axiom `X._native.native_decide.ax_1_1`
   (`X._native.bv_decide.ax_1_1`), as Lean >= 4.29 names it (`Lean.ofReduceBool` when the command
   holds the marker `double:lean-4.28`); Classical tactics on [propext, Classical.choice, Quot.sound], `simp`-like
   tactics on [propext]; `decide` on a false literal equation, and `exact`/`apply` of a name
   nobody declared, are errors with Lean's messages;
4. `#print axioms X` answers from those dependencies with Lean's exact sentence; the kit's two
   meta-programs (recognized by their PROOFLOCK-DECLS / PROOFLOCK-TARGET markers) answer with
   the declarations of the env and with a comparison of whitespace-normalized statements;
5. markers in a comment drive failures: `double:sleep` hangs, `double:crash` dies (SIGABRT-like
   exit), `double:memory` allocates until something stops it.
It announces itself: its reply to a header (a command without `env`) carries a top-level
`"double"` field, which the real REPL never sends, so the kit marks its verdicts `double`.
`--log FILE` appends every command received, one JSON line each (tests count header imports);
`--conceal` drops the announcement (only for the test that the kit reads it); `--replay NAME`
answers with transcript NAME's replies in order, byte for byte (tests of the kit's reading);
`--recheck CONFIG` stands in for the image's `lean-mathlib recheck` (comparator; see `Recheck`).
"""

from __future__ import annotations

import json
import os
import re
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

TRANSCRIPTS = Path(__file__).resolve().parent / "transcripts" / "lean"
KNOWN_MODULES = {
    "Init",
    "Lean",
    "Std",
    "Batteries",
    "Mathlib",
    "Mathlib.Tactic",
    "Mathlib.Tactic.Ring",
    "Mathlib.Tactic.Cases",
    "Mathlib.Tactic.Linarith",
    "Mathlib.Tactic.NormNum",
    "Mathlib.Algebra.Group.Basic",
    "Mathlib.Data.Nat.Basic",
    "Mathlib.Data.Real.Basic",
    "Mathlib.Logic.Basic",
    "Mathlib.Order.Basic",
}
KNOWN_PACKAGES = {m.split(".")[0] for m in KNOWN_MODULES}
SEARCH_PATH = ["/opt/mathlib/.lake/build/lib/lean", "/opt/lean/lib/lean"]
KNOWN_LEMMAS = {
    "rfl",
    "trivial",
    "Nat.succ_pos",
    "Nat.one_pos",
    "Nat.zero_le",
    "Nat.add_comm",
    "Nat.le_refl",
    "le_refl",
    "add_comm",
    "mul_comm",
    "True.intro",
}
CLASSICAL = re.compile(r"\b(Classical|by_contra|by_cases|push_neg|tauto|choose)\b")
PROPEXT = re.compile(
    r"\b(simp|omega|norm_num|ring|ring_nf|linarith|nlinarith|positivity|field_simp)\b"
)
DECL = re.compile(
    r"^[ \t]*(?:@\[[^\]]*\][ \t]*)?(?:(?:private|protected|noncomputable)[ \t]+)*"
    r"(theorem|lemma|def|abbrev|axiom|instance|example|opaque)\b[ \t]*([^\s:({\[]*)",
    re.MULTILINE,
)
TARGET_PREFIX = "__prooflock_target_"
DOUBLE = "tests/doubles/lean_repl_double.py (a protocol double, not Lean)"
RECHECK_DOUBLE = "tests/doubles/lean_repl_double.py --recheck (a double of comparator, not it)"
# Lean >= 4.29: a proof that trusts compiled code gets an axiom of its own.
NATIVE_TACTICS = re.compile(r"\b(native_decide|bv_decide)\b")
ARITH = re.compile(r"^\s*(\d+)\s*([-+*])\s*(\d+)\s*=\s*(\d+)\s*$")


# -- Lean's Json.pretty --------------------------------------------------------------------


def lean_escape(text: str) -> str:
    out = ['"']
    for c in text:
        if c == '"':
            out.append('\\"')
        elif c == "\\":
            out.append("\\\\")
        elif c == "\n":
            out.append("\\n")
        elif c == "\r":
            out.append("\\r")
        elif c == "\t":
            out.append("\\t")
        elif ord(c) < 0x20 or ord(c) == 0x7F:
            out.append(f"\\u{ord(c):04x}")
        else:
            out.append(c)
    out.append('"')
    return "".join(out)


# A document is a list of ("text", s) | ("line",) | ("nest", n, doc) | ("group", doc).
def _doc(value: object) -> list:
    if isinstance(value, dict):
        items: list = []
        for index, key in enumerate(sorted(value, reverse=True)):
            if index:
                items += [("text", ","), ("line",)]
            items.append(
                ("group", [("text", lean_escape(key) + ":"), ("line",), *_doc(value[key])])
            )
        return [("group", [("nest", 1, [("text", "{"), *items, ("text", "}")])])]
    if isinstance(value, list):
        items = []
        for index, item in enumerate(value):
            if index:
                items += [("text", ","), ("line",)]
            items += _doc(item)
        return [("group", [("nest", 1, [("text", "["), *items, ("text", "]")])])]
    if isinstance(value, bool):
        return [("text", "true" if value else "false")]
    if value is None:
        return [("text", "null")]
    if isinstance(value, str):
        return [("text", lean_escape(value))]
    return [("text", json.dumps(value))]


def _flat_width(doc: list) -> int:
    width = 0
    for item in doc:
        if item[0] == "text":
            width += len(item[1])
        elif item[0] == "line":
            width += 1
        elif item[0] == "nest":
            width += _flat_width(item[2])
        else:
            width += _flat_width(item[1])
    return width


def pretty(value: object, width: int = 80) -> str:
    """Lean's `Json.pretty`: a group goes on one line when it fits in what is left of the line."""
    out: list[str] = []
    column = 0
    # (indent, flat, item) work items, consumed left to right.
    stack: list[tuple[int, bool, tuple]] = [(0, False, item) for item in reversed(_doc(value))]
    while stack:
        indent, flat, item = stack.pop()
        kind = item[0]
        if kind == "text":
            out.append(item[1])
            column += len(item[1])
        elif kind == "line":
            if flat:
                out.append(" ")
                column += 1
            else:
                out.append("\n" + " " * indent)
                column = indent
        elif kind == "nest":
            stack.extend((indent + item[1], flat, sub) for sub in reversed(item[2]))
        else:
            fits = flat or column + _flat_width(item[1]) + _rest_width(stack) <= width
            stack.extend((indent, fits, sub) for sub in reversed(item[1]))
    return "".join(out)


def _rest_width(stack: list[tuple[int, bool, tuple]]) -> int:
    """Width of what follows a group up to the next possible line break (Wadler's `fits`)."""
    width = 0
    for _, _, item in reversed(stack):
        if item[0] == "text":
            width += len(item[1])
        else:
            return width
    return width


# -- transcripts ---------------------------------------------------------------------------


def frames(text: str) -> list[str]:
    return [chunk.strip("\n") for chunk in re.split(r"\n\s*\n", text) if chunk.strip()]


def transcript_replies() -> dict[str, str]:
    """Command text → its reply, for every command of every transcript."""
    table: dict[str, str] = {}
    for path in sorted(TRANSCRIPTS.glob("*.in")):
        requests = [json.loads(f) for f in frames(path.read_text())]
        replies = frames(path.with_suffix(".expected.out").read_text())
        for request, reply in zip(requests, replies, strict=False):
            if "cmd" in request:
                table.setdefault(request["cmd"].strip(), reply)
    return table


# -- environments --------------------------------------------------------------------------


@dataclass
class Decl:
    name: str
    kind: str
    axioms: set[str]
    statement: str = ""
    value: str = ""  # the proof or definition body as written (what comparator's double compares)


@dataclass
class Env:
    decls: dict[str, Decl] = field(default_factory=dict)


class Repl:
    def __init__(self, log: Path | None, announce: bool = True):
        self.envs: list[Env] = []
        self.table = transcript_replies()
        self.log = log
        self.announce = announce
        self.proof_states = 0  # one counter for the whole session, as the REPL's is

    def next_proof_state(self) -> int:
        self.proof_states += 1
        return self.proof_states - 1

    def new_env(self, env: Env) -> int:
        self.envs.append(env)
        return len(self.envs) - 1

    def handle(self, request: dict) -> str:
        if self.log is not None:
            with self.log.open("a") as handle:
                handle.write(json.dumps(request) + "\n")
        if "cmd" not in request:
            return pretty({"message": "the double only speaks command mode"})
        cmd, env_id = request["cmd"], request.get("env")
        if env_id is not None and not 0 <= env_id < len(self.envs):
            return pretty({"message": "Unknown environment."})
        text = cmd.strip()
        if text in self.table:
            return self.replay(self.table[text], cmd, env_id)
        if env_id is None:
            return self.header(cmd)
        base = self.envs[env_id]
        if "PROOFLOCK-DECLS" in cmd:
            return self.listing(base)
        if "PROOFLOCK-TARGET" in cmd:
            return self.compare(base, cmd)
        if text.startswith("#print axioms"):
            return self.print_axioms(base, cmd)
        return self.body(base, cmd)

    def replay(self, reply: str, cmd: str, env_id: int | None) -> str:
        parsed = json.loads(reply)
        shift = len(cmd) - len(cmd.lstrip())
        lines = cmd[:shift].count("\n")
        parent = self.envs[env_id] if env_id is not None else Env()
        if "env" in parsed:
            parsed["env"] = self.new_env(Env(dict(parent.decls)))
        if env_id is None and self.announce:
            parsed["double"] = DOUBLE
        for entry in parsed.get("messages", []) + parsed.get("sorries", []):
            for where in ("pos", "endPos"):
                if entry.get(where) and entry[where]["line"]:
                    entry[where]["line"] += lines
        return pretty(parsed)

    def header(self, cmd: str) -> str:
        imports = re.findall(r"^\s*import\s+(\S+)", cmd, re.MULTILINE)
        for module in imports:
            if module in KNOWN_MODULES:
                continue
            root = module.split(".")[0]
            if root not in KNOWN_PACKAGES:
                data = (
                    f"unknown module prefix '{root}'\n\nNo directory '{root}' or file "
                    f"'{root}.olean' in the search path entries:\n" + "\n".join(SEARCH_PATH)
                )
            else:
                path = f"{SEARCH_PATH[0]}/{module.replace('.', '/')}.olean"
                data = f"object file '{path}' of module {module} does not exist"
            message = {"severity": "error", "pos": {"line": 1, "column": 0}, "data": data}
            return pretty({"messages": [message], "env": self.new_env(Env()), **self.announced()})
        return pretty({"env": self.new_env(Env()), **self.announced()})

    def announced(self) -> dict:
        """What a header's reply adds to say this is a double (`--conceal`: nothing)."""
        return {"double": DOUBLE} if self.announce else {}

    def body(self, base: Env, cmd: str) -> str:
        markers(cmd)
        env = Env(dict(base.decls))
        messages: list[dict] = []
        sorries: list[dict] = []
        starts = list(DECL.finditer(cmd))
        for index, match in enumerate(starts):
            end = starts[index + 1].start() if index + 1 < len(starts) else len(cmd)
            prefix = namespace_at(cmd, match.start())
            self.declaration(env, cmd, match, end, messages, sorries, prefix)
        reply: dict = {"env": self.new_env(env)}
        if messages:
            reply["messages"] = messages
        if sorries:
            reply["sorries"] = sorries
        return pretty(reply)

    def declaration(
        self,
        env: Env,
        cmd: str,
        match: re.Match,
        end: int,
        messages: list,
        sorries: list,
        prefix: str = "",
    ) -> None:
        kind, name = match.group(1), plain_name(match.group(2))
        if name and prefix:
            name = f"{prefix}.{name}"
        chunk = cmd[match.end() : end]
        statement, _, proof = chunk.partition(":=")
        statement = statement.strip()
        if statement.startswith(":"):
            statement = statement[1:].strip()
        where = name_position(cmd, match)
        if name.startswith(TARGET_PREFIX):  # the kit's target, elaborated before the artifact
            value = proof.strip()[1:-1].strip()
            unknown = re.search(r"\bundeclared_\w*", value)
            if unknown:
                offset = cmd.index(unknown.group(0))
                messages.append(
                    {
                        "severity": "error",
                        "pos": at(cmd, offset),
                        "endPos": at(cmd, offset + len(unknown.group(0))),
                        "data": f"Unknown identifier `{unknown.group(0)}`",
                    }
                )
                return
            env.decls[name] = Decl(name, "def", set(), value)
            return
        if kind == "axiom":
            env.decls[name] = Decl(name, "axiom", {name}, statement)
            return
        axioms: set[str] = set()
        for other in list(env.decls.values()):
            if re.search(rf"(?<![\w.']){re.escape(other.name)}(?![\w'])", proof):
                axioms |= other.axioms
        if CLASSICAL.search(proof):
            axioms |= {"propext", "Classical.choice", "Quot.sound"}
        elif PROPEXT.search(proof):
            axioms.add("propext")
        if re.search(r"\bsorryAx\b", proof):  # what `sorry` elaborates to, named outright
            axioms.add("sorryAx")
        for tactic in sorted(set(NATIVE_TACTICS.findall(proof))):
            if "double:lean-4.28" in cmd:
                axioms.add("Lean.ofReduceBool")
                continue
            native = f"{name or '_example'}._native.{tactic}.ax_1_1"
            env.decls[native] = Decl(native, "axiom", {native})
            axioms.add(native)
        failed = self.errors(env, cmd, match.end() + len(chunk) - len(proof), proof, statement)
        messages.extend(failed)
        for sorry in re.finditer(r"\b(sorry|admit)\b", proof):
            offset = match.end() + len(chunk) - len(proof) + sorry.start()
            sorries.append(
                {
                    "proofState": self.next_proof_state(),
                    "pos": at(cmd, offset),
                    "goal": goal_of(statement),
                    "endPos": at(cmd, offset + 5),
                }
            )
            axioms.add("sorryAx")
        if "sorryAx" in axioms and not failed:
            messages.append({"severity": "warning", **where, "data": "declaration uses `sorry`"})
        if failed or kind == "example":
            return
        env.decls[name] = Decl(
            name,
            "theorem" if kind in ("theorem", "lemma") else "def",
            axioms,
            statement,
            " ".join(proof.split()),
        )

    def errors(self, env: Env, cmd: str, start: int, proof: str, statement: str) -> list[dict]:
        arith = ARITH.match(statement)
        decided = re.search(r"\bdecide\b", proof)
        if arith and decided:
            a, op, b, c = int(arith[1]), arith[2], int(arith[3]), int(arith[4])
            value = a + b if op == "+" else a * b if op == "*" else max(a - b, 0)
            if value != c:
                shown = " ".join(statement.split())
                data = f"Tactic `decide` proved that the proposition\n  {shown}\nis false"
                offset = start + decided.start()
                return [
                    {
                        "severity": "error",
                        "pos": at(cmd, offset),
                        "endPos": at(cmd, offset + 6),
                        "data": data,
                    }
                ]
        for used in re.finditer(r"\b(?:exact|apply)\s+([A-Za-z_][\w.']*)", proof):
            name = used.group(1)
            if name not in env.decls and name not in KNOWN_LEMMAS:
                offset = start + used.start(1)
                return [
                    {
                        "severity": "error",
                        "pos": at(cmd, offset),
                        "endPos": at(cmd, offset + len(name)),
                        "data": f"Unknown identifier `{name}`",
                    }
                ]
        return []

    def listing(self, env: Env) -> str:
        rows = [
            {"name": d.name, "kind": d.kind, "internal": is_internal(d.name)}
            for d in env.decls.values()
        ]
        data = "PROOFLOCK-DECLS " + json.dumps(rows, separators=(",", ":"), ensure_ascii=False)
        return self.info(env, data)

    def compare(self, env: Env, cmd: str) -> str:
        name, target = re.findall(r'String\.toName "((?:[^"\\]|\\.)*)"', cmd)[:2]
        found, wanted = env.decls.get(name), env.decls.get(target)
        if found is None:
            status = "missing"
        elif found.kind != "theorem":
            status = "not_a_theorem"
        elif wanted is None:
            status = "no_target"
        else:
            status = "same" if normal(found.statement) == normal(wanted.statement) else "differs"
        shown = {
            "status": status,
            "theorem": found.statement if found else "",
            "target": wanted.statement if wanted else "",
        }
        return self.info(
            env, "PROOFLOCK-TARGET " + json.dumps(shown, separators=(",", ":"), ensure_ascii=False)
        )

    def info(self, env: Env, data: str) -> str:
        message = {
            "severity": "info",
            "pos": {"line": 1, "column": 0},
            "endPos": {"line": 1, "column": 5},
            "data": data,
        }
        return pretty({"messages": [message], "env": self.new_env(Env(dict(env.decls)))})

    def print_axioms(self, env: Env, cmd: str) -> str:
        messages = []
        for number, line in enumerate(cmd.splitlines(), start=1):
            name = line.removeprefix("#print axioms").strip()
            pos = {"pos": {"line": number, "column": 0}, "endPos": {"line": number, "column": 6}}
            decl = env.decls.get(name)
            if decl is None:
                messages.append({"severity": "error", **pos, "data": f"Unknown constant `{name}`"})
            elif not decl.axioms:
                messages.append(
                    {"severity": "info", **pos, "data": f"'{name}' does not depend on any axioms"}
                )
            else:
                listed = ", ".join(sorted(decl.axioms, key=name_order))
                messages.append(
                    {"severity": "info", **pos, "data": f"'{name}' depends on axioms: [{listed}]"}
                )
        return pretty({"messages": messages, "env": self.new_env(Env(dict(env.decls)))})


NAMESPACE = re.compile(r"^[ \t]*(namespace|end)\b[ \t]*([^\s]*)", re.MULTILINE)


def namespace_at(cmd: str, offset: int) -> str:
    """The namespace open at `offset` (`namespace X` ... `end X`), components unescaped."""
    opened: list[str] = []
    for found in NAMESPACE.finditer(cmd, 0, offset):
        if found.group(1) == "namespace":
            opened.append(plain_name(found.group(2)))
        elif opened and found.group(2):
            opened.pop()
    return ".".join(opened)


def plain_name(name: str) -> str:
    """A dotted name with its `«»` escapes dropped: `«123».foo` → `123.foo`."""
    return name.replace("«", "").replace("»", "")


def is_internal(name: str) -> bool:
    """Lean's `Name.isInternal`: some component starts with `_`."""
    return any(part.startswith("_") for part in name.split("."))


def name_order(name: str) -> tuple[str, ...]:
    return tuple(name.split("."))


BINDERS = re.compile(r"^((?:[({\[][^)}\]]*[)}\]]\s*)+):\s*(.*)$", re.DOTALL)


def normal(statement: str) -> str:
    """What the double compares: binders before the colon become a `∀`, spacing is collapsed,
    parentheses around the whole statement are dropped (they change no term)."""
    statement = unwrapped(statement.strip())
    binders = BINDERS.match(statement)
    if binders:
        statement = f"∀ {binders.group(1).strip()}, {binders.group(2)}"
    return " ".join(statement.replace("(", " ( ").replace(")", " ) ").replace(",", " , ").split())


BINDER = re.compile(r"\s*[({\[]([^)}\]]*)[)}\]]")


def goal_of(statement: str) -> str:
    """The goal Lean shows at a sorry: one hypothesis line per binder group, then `⊢`."""
    hypotheses, rest = [], statement.strip()
    while (binder := BINDER.match(rest)) is not None:
        inner = binder.group(1)
        hypotheses.append(inner if " : " in inner else f"inst✝ : {inner}")
        rest = rest[binder.end() :]
    rest = rest.strip().removeprefix(":").strip()
    return "\n".join([*hypotheses, f"⊢ {rest}"])


def unwrapped(statement: str) -> str:
    """`(S)` → `S` when the first parenthesis closes at the very end."""
    if not statement.startswith("("):
        return statement
    depth = 0
    for index, c in enumerate(statement):
        depth += {"(": 1, ")": -1}.get(c, 0)
        if depth == 0:
            return statement[1:-1].strip() if index == len(statement) - 1 else statement
    return statement


def at(text: str, offset: int) -> dict:
    line = text.count("\n", 0, offset) + 1
    return {"line": line, "column": offset - (text.rfind("\n", 0, offset) + 1)}


def name_position(cmd: str, match: re.Match) -> dict:
    if match.group(2):
        start, end = match.start(2), match.end(2)
    else:
        start = match.start(1)
        end = start + len(match.group(1))
    return {"pos": at(cmd, start), "endPos": at(cmd, end)}


def markers(cmd: str) -> None:
    if "double:sleep" in cmd:
        time.sleep(3600)
    if "double:crash" in cmd:
        sys.stderr.write("INTERNAL PANIC: the double was told to crash\n")
        sys.stderr.flush()
        os._exit(134)
    if "double:memory" in cmd:
        hoard = []
        while True:
            hoard.append(bytearray(32 * 1024 * 1024))  # touched: it counts in VmRSS


def read_request(stdin) -> str | None:
    """The REPL's getLines: lines up to a blank line, each right-trimmed, joined."""
    lines: list[str] = []
    while True:
        line = stdin.readline()
        if not line:
            return "".join(lines) if lines else None
        if not line.strip():
            return "".join(lines) + line  # a blank line alone is a (bad) request, as in Lean
        lines.append(line.rstrip())


class Recheck:
    """`--recheck CONFIG`: comparator's checks on a project, decided by this double's rules.

    It reads comparator's `config.json` in the current directory, elaborates the challenge and
    the solution modules apart (each on a fresh environment, as lake builds them), and makes
    comparator's checks in its order (leanprover/comparator `Main.lean`, `Compare.lean`,
    `Axioms.lean`): every theorem and definition hole present in both, of the same kind, with the
    same statement (here: text after `normal`); every constant of the challenge those
    statements use, the same in both; the solution's theorems and holes resting only on
    permitted axioms. It prints comparator's progress lines and `Your solution is okay!`, or an
    error as Lean's runtime reports an uncaught one (`uncaught exception: ...`, exit 1). It has
    no kernel: the kernel replay always accepts. Its first line announces the double."""

    def __init__(self, announce: bool):
        self.repl = Repl(None, announce=False)
        self.announce = announce

    def run(self, config_path: str) -> int:
        if self.announce:
            print(f"double: {RECHECK_DOUBLE}")
        config = json.loads(Path(config_path).read_text())
        try:
            fresh(Path.cwd(), config)
            challenge = self.build(config["challenge_module"])
            solution = self.build(config["solution_module"])
            theorems = [plain_name(n) for n in config["theorem_names"]]
            holes = [plain_name(n) for n in config.get("definition_names") or []]
            compare(challenge, solution, theorems, holes)
            check_axioms(solution, theorems, holes, set(config["permitted_axioms"]))
        except Rejected as exc:
            sys.stdout.flush()
            sys.stderr.write(f"uncaught exception: {exc}\n")
            return 1
        print("Running Lean default kernel on solution.")
        print("Lean default kernel accepts the solution")
        print("Your solution is okay!")
        return 0

    def build(self, module: str) -> Env:
        """The module's environment, as `lake build` makes it; a module that does not elaborate
        fails as comparator's sandboxed build does."""
        print(f"Building {module}")
        path = Path(*module_parts(module)).with_suffix(".lean")
        try:
            text = path.read_text()
        except OSError:
            raise Rejected("Child exited with 1") from None
        imports = re.findall(r"^\s*import\s+(\S+)", text, re.MULTILINE)
        if any(m not in KNOWN_MODULES for m in imports):
            raise Rejected("Child exited with 1")
        body = re.sub(r"^\s*import\s+\S+", lambda m: " " * len(m.group(0)), text, flags=re.M)
        reply = json.loads(self.repl.body(Env(), body))
        if any(m["severity"] == "error" for m in reply.get("messages", [])):
            raise Rejected("Child exited with 1")
        return self.repl.envs[reply["env"]]


def fresh(directory: Path, config: dict) -> None:
    """The kit promises a sandbox the REPL never ran in: only the project's own files."""
    own = {"config.json", "Solution.lean", module_parts(config["challenge_module"])[0]}
    own.add(f"{module_parts(config['challenge_module'])[0]}.lean")
    others = sorted(p.name for p in directory.iterdir() if p.name not in own)
    if others:
        raise Rejected(f"double: the re-check's directory is not fresh: {', '.join(others)}")


class Rejected(Exception):
    """Comparator's objection, worded as comparator words it."""


def module_parts(module: str) -> list[str]:
    """`Challenge.«12.34».«5»` → [Challenge, 12.34, 5]: dots inside «» do not split."""
    return [a or b for a, b in re.findall(r"«([^»]*)»|([^.«]+)", module)]


def used_locals(text: str, env: Env) -> list[str]:
    """The environment's declarations a statement or value names (the double's getUsedConstants)."""
    return [
        name for name in env.decls if re.search(rf"(?<![\w.']){re.escape(name)}(?![\w'])", text)
    ]


def both(challenge: Env, solution: Env, name: str) -> tuple[Decl, Decl]:
    """A target's declaration in the challenge and in the solution, as comparator looks it up."""
    want, got = challenge.decls.get(name), solution.decls.get(name)
    if want is None:
        raise Rejected(f"Const not found in challenge: '{name}'")
    if got is None:
        raise Rejected(f"Const not found in solution: '{name}'")
    return want, got


def compare(challenge: Env, solution: Env, theorems: list[str], holes: list[str]) -> None:
    """comparator's `compareAt`: targets first, then every challenge constant they use."""
    worklist: list[str] = []
    for name in theorems:
        want, got = both(challenge, solution, name)
        if want.kind != got.kind or want.kind not in ("theorem", "axiom"):
            raise Rejected(f"Challenge and solution constant kind don't match: '{name}'")
        if normal(want.statement) != normal(got.statement):
            raise Rejected(f"Challenge and solution theorem statement do not match: '{name}'")
        worklist += used_locals(want.statement, challenge)
    for name in holes:
        want, got = both(challenge, solution, name)
        if want.kind != "def":
            raise Rejected(f"Challenge constant is not a definition: '{name}'")
        if got.kind != "def":
            raise Rejected(f"Solution constant is not a definition: '{name}'")
        if normal(want.statement) != normal(got.statement):
            raise Rejected(f"Const does not match between challenge and target '{name}'")
        worklist.append(name)
    checked: set[str] = set()
    while worklist:
        name = worklist.pop()
        if name in checked:
            continue
        checked.add(name)
        want, got = challenge.decls.get(name), solution.decls.get(name)
        if want is None:
            raise Rejected(f"Const not found in challenge '{name}'")
        if got is None:
            raise Rejected(f"Const not found in solution '{name}'")
        if name in theorems or name in holes:
            worklist += used_locals(got.statement, challenge)
            continue
        if (want.kind, normal(want.statement), want.value) != (
            got.kind,
            normal(got.statement),
            got.value,
        ):
            raise Rejected(f"Const does not match between challenge and target '{name}'")
        worklist += used_locals(f"{want.statement} {want.value}", challenge)


def check_axioms(solution: Env, theorems: list[str], holes: list[str], permitted: set[str]) -> None:
    """comparator's `checkAxioms`: each theorem and hole of the solution, its axioms permitted."""
    for name, kind in [*((t, "theorem") for t in theorems), *((h, "definition") for h in holes)]:
        decl = solution.decls.get(name)
        if decl is None:
            raise Rejected(f"Const not found in solution: '{name}'")
        if decl.kind != ("theorem" if kind == "theorem" else "def"):
            raise Rejected(f"Solution constant is not a {kind}: '{name}'")
    for name in [*theorems, *holes]:
        for axiom in sorted(solution.decls[name].axioms - permitted):
            raise Rejected(f"Illegal axiom detected: '{axiom}'")


class Replay:
    """`--replay NAME`: the transcript NAME's replies, in order and byte for byte, whatever is asked.

    It tests how the kit reads each reply shape (pickling, tactic mode, errors) on exactly the
    bytes a transcript holds; it decides nothing."""

    def __init__(self, name: str):
        self.replies = frames((TRANSCRIPTS / f"{name}.expected.out").read_text())

    def handle(self, request: dict) -> str:
        if not self.replies:
            sys.exit(0)  # the transcript ends here: the REPL's stdout closes
        return self.replies.pop(0)


def main() -> None:
    args = sys.argv[1:]
    log = Path(args[args.index("--log") + 1]) if "--log" in args else None
    if "--recheck" in args:
        sys.exit(Recheck(announce="--conceal" not in args).run(args[args.index("--recheck") + 1]))
    repl: Repl | Replay = Repl(log, announce="--conceal" not in args)
    if "--replay" in args:
        repl = Replay(args[args.index("--replay") + 1])
    while True:
        query = read_request(sys.stdin)
        if query is None:
            return
        if query.startswith("#") or query.startswith("--"):
            continue
        try:
            request = json.loads(query)
        except ValueError as exc:
            sys.stderr.write(
                "uncaught exception: "
                + json.dumps({"message": f"Could not parse JSON:\n{exc}"})
                + "\n"
            )
            sys.exit(1)
        reply = repl.handle(request)
        sys.stdout.write(reply + "\n\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
