"""A protocol double of `isabelle server` (Isabelle2025-2), for tests: no Isabelle inside.

`isabelle_server_double.py server -n NAME -p PORT [--log FILE] [--conceal]` prints the real
address line,
`server "NAME" = 127.0.0.1:PORT (password "...")`, and serves the real TCP protocol on loopback:
the password line, then commands; replies `OK json` / `ERROR json` and, for tasks, `NOTE json`
then `FINISHED json` or `FAILED json`, each framed as Isabelle's Byte_Message does (a message over
100 bytes or with a newline is preceded by a line with its length + 1). Recorded replies from
transcripts/isabelle/ (shipped by the isabelle-client package, 1.1.2, Apache-2.0: see
tests/doubles/README.md) are replayed where a command has one: `help` and `session_start`'s
notes.

How `use_theories` decides (see tests/doubles/README.md):
- each theory file is read from master_dir; its `theory NAME imports ... begin` must name the
  file; an import must be a known session theory (KNOWN_THEORIES) or a file beside it;
- `lemma`/`theorem` NAME: "PROP" followed by its proof: `sorry` gives the theorem the
  `Pure.skip_proof` oracle, `oops` stores no theorem, a false literal equation such as
  "(2::nat) + 2 = 5" proved `by simp`/`auto`/`arith` fails with Isabelle's `Failed to finish
  proof` message; each stored theorem gets the `theorem PROP` writeln message;
- `axiomatization ... where NAME: "PROP" and NAME2: "PROP2"` adds an axiom per name;
  `definition` adds its NAME_def; `typedef T`, `datatype T`, `codatatype T` add
  `type_definition_T` and `record T` adds `type_definition_T_ext` (what Isabelle's typedef
  package names them), which the report lists as the typedef package's;
- the kit's report theory (recognized by PROOFLOCK-REPORT) is answered with those theorems,
  oracles and axioms, and with the target compared as whitespace-normalized text; a target
  naming a type `undeclared_...` cannot be read (`Undefined type name`);
- markers in a comment: `double:sleep` runs until `cancel`, `double:hang` ignores `cancel`,
  `double:crash` kills the server process.
It announces itself where the real server says who it is, in its answer to the password:
`OK {"isabelle_id": "double", ..., "double": "..."}` (Isabelle's has no `double` field), so the
kit marks its verdicts `double`; `--conceal` drops that field (only for the test that the kit
reads it).
"""

from __future__ import annotations

import json
import os
import re
import secrets
import socket
import sys
import threading
import time
import uuid
from pathlib import Path

TRANSCRIPTS = Path(__file__).resolve().parent / "transcripts" / "isabelle"
KNOWN_SESSIONS = {"Pure", "HOL", "HOL-Library", "HOL-Analysis", "Main"}
KNOWN_THEORIES = {
    "Main",
    "Complex_Main",
    "Pure",
    "HOL.HOL",
    "HOL-Library.Multiset",
    "HOL-Library.FuncSet",
}
IDENTITY = {"isabelle_id": "double", "isabelle_name": "Isabelle2025-2"}
DOUBLE = "tests/doubles/isabelle_server_double.py (a protocol double, not Isabelle)"
STATEMENT = re.compile(
    r"^[ \t]*(lemma|theorem|corollary|proposition)\s+(?:(\w+)\s*(?:\[[^\]]*\])?\s*:)?\s*\"((?:[^\"\\]|\\.)*)\"",
    re.MULTILINE,
)
AXIOMATIZATION = re.compile(
    r"^[ \t]*axiomatization\b.*?(?=^[ \t]*(?:lemma|theorem|definition|end|axiomatization)\b|\Z)",
    re.MULTILINE | re.DOTALL,
)
AXIOM = re.compile(r"\b(?:where|and)\s+(\w+)\s*(?:\[[^\]]*\]\s*)?:\s*\"")
DEFINITION = re.compile(r"^[ \t]*definition\s+(\w+)", re.MULTILINE)
# The new type's name, after any type parameters: `typedef 'a T`, `datatype ('a, 'b) T`.
TYPEDEF = re.compile(
    r"^[ \t]*(typedef|datatype|codatatype|record)\s+(?:\([^)]*\)\s*|'\w+\s+)*(\w+)", re.MULTILINE
)
FALSE_ARITH = re.compile(r"^\(?(\d+)\s*(?:::\s*\w+\))?\s*([-+*])\s*(\d+)\s*=\s*(\d+)$")
SYMBOL = re.compile(r"\\<[^>]*>|.", re.DOTALL)


def frame(text: str) -> bytes:
    """Isabelle's Byte_Message.write_line_message."""
    data = text.encode("utf-8")
    if len(data) > 100 or b"\n" in data:
        return str(len(data) + 1).encode() + b"\n" + data + b"\n"
    return data + b"\n"


def recorded(name: str) -> list[str]:
    """The messages of a recorded reply file, unframed."""
    raw = (TRANSCRIPTS / name).read_bytes()
    out, i = [], 0
    while i < len(raw):
        end = raw.find(b"\n", i)
        end = len(raw) if end < 0 else end
        line = raw[i:end]
        if line.strip().isdigit():
            size = int(line)
            out.append(raw[end + 1 : end + 1 + size].decode().rstrip("\n"))
            i = end + 1 + size
        else:
            if line.strip():
                out.append(line.decode())
            i = end + 1
    return out


def compact(value: object) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def position(text: str, offset: int, length: int, file: str) -> dict:
    """Isabelle's position: line, and offsets counted in symbols from 1."""
    line = text.count("\n", 0, offset) + 1
    symbols = len(SYMBOL.findall(text[:offset]))
    width = len(SYMBOL.findall(text[offset : offset + length]))
    return {"line": line, "offset": symbols + 1, "end_offset": symbols + 1 + width, "file": file}


class Theory:
    def __init__(self, name: str, text: str, file: str):
        self.name, self.text, self.file = name, text, file
        self.messages: list[dict] = []
        self.errors: list[dict] = []
        self.theorems: dict[str, list[str]] = {}
        self.axioms: list[str] = []
        self.typedefs: list[str] = []  # the axioms the typedef package registered
        self.statements: dict[str, str] = {}


class Session:
    def __init__(self, log: Path | None):
        self.log = log
        self.loaded: dict[str, Theory] = {}
        self.cancelled: set[str] = set()
        self.lock = threading.Lock()

    def note(self, line: str) -> None:
        if self.log is not None:
            with self.lock, self.log.open("a") as handle:
                handle.write(line + "\n")


class Handler:
    def __init__(self, conn: socket.socket, password: str, session: Session, identity: dict):
        self.conn, self.password, self.session = conn, password, session
        self.identity = identity
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.reader = conn.makefile("rb")
        self.write_lock = threading.Lock()

    def send(self, text: str) -> None:
        with self.write_lock:
            self.conn.sendall(frame(text))

    def read_message(self) -> str | None:
        line = self.reader.readline()
        if not line:
            return None
        if line.strip().isdigit():
            return self.reader.read(int(line)).decode().rstrip("\n")
        return line.decode().rstrip("\n")

    def serve(self) -> None:
        if self.read_message() != self.password:
            self.conn.close()
            return
        self.send(f"OK {compact(self.identity)}")
        while True:
            message = self.read_message()
            if message is None:
                return
            self.session.note(message)
            command, _, rest = message.partition(" ")
            args = json.loads(rest) if rest.strip() else None
            handler = getattr(self, "do_" + command, None)
            if handler is None:
                self.send(f"ERROR {json.dumps(f'Bad command {command!r}')}")
                continue
            handler(args)

    # -- commands -------------------------------------------------------------------------

    def do_help(self, args: object) -> None:
        for message in recorded("help"):
            self.send(message)

    def do_echo(self, args: object) -> None:
        self.send(f"OK {compact(args)}")

    def do_cancel(self, args: dict) -> None:
        self.session.cancelled.add(args["task"])
        self.send("OK")

    def do_shutdown(self, args: object) -> None:
        self.send("OK")
        os._exit(0)

    def do_session_start(self, args: dict) -> None:
        task = str(uuid.uuid4())
        self.send(f"OK {compact({'task': task})}")
        name = args.get("session", "HOL")
        if name not in KNOWN_SESSIONS:
            failed = {"kind": "error", "message": f'Undefined session(s): "{name}"', "task": task}
            self.send(f"FAILED {compact(failed)}")
            return
        recorded_task = None
        for message in recorded("session_start"):
            kind, _, body = message.partition(" ")
            data = json.loads(body)
            recorded_task = recorded_task or data.get("task")
            if kind == "NOTE":
                self.send("NOTE " + body.replace(recorded_task or "", task))
        finished = {
            "session_id": str(uuid.uuid4()),
            "tmp_dir": "/tmp/isabelle-/server_session",
            "task": task,
        }
        self.send(f"FINISHED {compact(finished)}")

    def do_session_stop(self, args: dict) -> None:
        task = str(uuid.uuid4())
        self.send(f"OK {compact({'task': task})}")
        self.send(f"FINISHED {compact({'ok': True, 'return_code': 0, 'task': task})}")

    def do_purge_theories(self, args: dict) -> None:
        with self.session.lock:
            names = list(self.session.loaded) if args.get("all") else args.get("theories", [])
            purged = [self.session.loaded.pop(n) for n in names if n in self.session.loaded]
        rows = [{"node_name": t.file, "theory_name": f"Draft.{t.name}"} for t in purged]
        self.send(f"OK {compact({'purged': rows, 'retained': []})}")

    def do_use_theories(self, args: dict) -> None:
        task = str(uuid.uuid4())
        self.send(f"OK {compact({'task': task})}")
        threading.Thread(target=self.use_theories, args=(args, task), daemon=True).start()

    def use_theories(self, args: dict, task: str) -> None:
        master = Path(args["master_dir"])
        theories: list[Theory] = []
        for name in args["theories"]:
            path = master / f"{name}.thy"
            theory = Theory(name, path.read_text(encoding="utf-8"), str(path))
            if "double:crash" in theory.text:
                os._exit(137)
            if "double:sleep" in theory.text or "double:hang" in theory.text:
                hang = "double:hang" in theory.text
                while hang or task not in self.session.cancelled:
                    time.sleep(0.02)
                self.send(
                    f"FAILED {compact({'kind': 'error', 'message': 'Interrupt', 'task': task})}"
                )
                return
            theories.append(theory)
        done: dict[str, Theory] = {}
        for theory in theories:
            self.process(theory, done)
            done[theory.name] = theory
            with self.session.lock:
                self.session.loaded[theory.name] = theory
            note = {
                "percentage": 100,
                "task": task,
                "message": f"theory Draft.{theory.name} 100%",
                "kind": "writeln",
                "session": "",
                "theory": f"Draft.{theory.name}",
            }
            self.send(f"NOTE {compact(note)}")
        errors = [e for t in theories for e in t.errors]
        nodes = [node(t) for t in theories]
        self.send(
            f"FINISHED {compact({'ok': not errors, 'errors': errors, 'nodes': nodes, 'task': task})}"
        )

    # -- theories -------------------------------------------------------------------------

    def process(self, theory: Theory, done: dict[str, Theory]) -> None:
        header = re.match(r"\s*theory\s+(\S+)\s+imports\s+(.*?)\s+begin\b", theory.text, re.DOTALL)
        if header is None or header.group(1) != theory.name:
            theory.errors.append(
                error(theory, 0, 6, f'Bad theory header for file "{theory.name}.thy"')
            )
            return
        for imported in re.findall(r'"([^"]+)"|(\S+)', header.group(2)):
            name = imported[0] or imported[1]
            if name not in KNOWN_THEORIES and name not in done:
                theory.errors.append(
                    error(theory, header.start(2), len(name), f'Bad theory import "{name}"')
                )
                return
        if "PROOFLOCK-REPORT" in theory.text:
            self.report(theory, done)
            return
        for block in AXIOMATIZATION.finditer(theory.text):
            for match in AXIOM.finditer(block.group(0)):
                theory.axioms.append(f"{theory.name}.{match.group(1)}")
        for match in DEFINITION.finditer(theory.text):
            theory.axioms.append(f"{theory.name}.{match.group(1)}_def")
        for match in TYPEDEF.finditer(theory.text):
            suffix = "_ext" if match.group(1) == "record" else ""
            axiom = f"{theory.name}.type_definition_{match.group(2)}{suffix}"
            theory.axioms.append(axiom)
            theory.typedefs.append(axiom)
        statements = list(STATEMENT.finditer(theory.text))
        for index, match in enumerate(statements):
            end = statements[index + 1].start() if index + 1 < len(statements) else len(theory.text)
            self.statement(theory, match, theory.text[match.end() : end])

    def statement(self, theory: Theory, match: re.Match, proof: str) -> None:
        name = match.group(2) or f"_unnamed_{match.start()}"
        prop = match.group(3)
        if re.search(r"\boops\b", proof):
            return
        arith = FALSE_ARITH.match(" ".join(prop.split()))
        method = re.search(r"\bby\b", proof)
        if arith and method:
            a, op, b, c = int(arith[1]), arith[2], int(arith[3]), int(arith[4])
            value = a + b if op == "+" else a * b if op == "*" else max(a - b, 0)
            if value != c:
                offset = match.end() + method.start()
                message = f"Failed to finish proof\\<^here>:\ngoal (1 subgoal):\n 1. {prop}"
                theory.errors.append(error(theory, offset, 2, message))
                theory.messages.append(theory.errors[-1])
                return
        oracles = ["Pure.skip_proof"] if re.search(r"\bsorry\b", proof) else []
        full = f"{theory.name}.{name}"
        theory.theorems[full] = oracles
        theory.statements[full] = prop
        where = position(theory.text, match.start(1), len(match.group(1)), theory.file)
        theory.messages.append({"kind": "writeln", "message": f"theorem {prop}", "pos": where})

    def report(self, theory: Theory, done: dict[str, Theory]) -> None:
        artifact = next(
            (t for t in done.values() if f'"{t.name}"' in theory.text.split("begin")[0]), None
        )
        if artifact is None or artifact.errors:
            theory.errors.append(error(theory, 0, 6, "Bad theory import (the artifact failed)"))
            return
        target: object = "null"
        wanted = re.search(r'read_prop ctxt "((?:[^"\\]|\\.)*)"', theory.text)
        named = re.search(r'get_thm thy "((?:[^"\\]|\\.)*)"', theory.text)
        if wanted and named:
            statement = wanted.group(1).replace('\\"', '"')
            full = f"{artifact.name}.{named.group(1)}"
            undefined = re.search(r"::\s*(undeclared_\w*)", statement)
            if undefined:
                target = {
                    "status": "bad_target",
                    "message": f'Undefined type name: "{undefined.group(1)}"\\<^here>',
                }
            elif full not in artifact.statements:
                target = {"status": "missing"}
            else:
                same = normal(artifact.statements[full]) == normal(statement)
                target = {
                    "status": "same" if same else "differs",
                    "theorem": artifact.statements[full],
                    "target": statement,
                }
        rows = [{"name": n, "oracles": o} for n, o in artifact.theorems.items()]
        data = {
            "theorems": rows,
            "axioms": artifact.axioms,
            "typedefs": artifact.typedefs,
            "target": target,
        }
        where = position(theory.text, 0, 6, theory.file)
        theory.messages.append(
            {"kind": "writeln", "message": "PROOFLOCK-REPORT " + compact(data), "pos": where}
        )


def normal(prop: str) -> str:
    return " ".join(prop.replace("(", " ( ").replace(")", " ) ").split())


def error(theory: Theory, offset: int, length: int, message: str) -> dict:
    return {
        "kind": "error",
        "message": message,
        "pos": position(theory.text, offset, length, theory.file),
    }


def node(theory: Theory) -> dict:
    failed = 1 if theory.errors else 0
    status = {
        "percentage": 100,
        "unprocessed": 0,
        "running": 0,
        "finished": 1,
        "failed": failed,
        "total": 1 + failed,
        "consolidated": True,
        "canceled": False,
        "ok": not failed,
        "warned": 0,
    }
    return {
        "messages": theory.messages,
        "exports": [],
        "status": status,
        "theory_name": f"Draft.{theory.name}",
        "node_name": theory.file,
    }


def main() -> None:
    args = sys.argv[1:]
    if not args or args[0] != "server":
        sys.exit("the double only runs `server`")
    name = args[args.index("-n") + 1] if "-n" in args else "isabelle"
    port = int(args[args.index("-p") + 1]) if "-p" in args else 0
    log = Path(args[args.index("--log") + 1]) if "--log" in args else None
    identity = IDENTITY if "--conceal" in args else {**IDENTITY, "double": DOUBLE}
    password = str(uuid.UUID(bytes=secrets.token_bytes(16)))
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", port))
    listener.listen()
    sys.stdout.write(
        f'server "{name}" = 127.0.0.1:{listener.getsockname()[1]} (password "{password}")\n'
    )
    sys.stdout.flush()
    session = Session(log)
    while True:
        conn, _ = listener.accept()
        handler = Handler(conn, password, session, identity)
        threading.Thread(target=handler.serve, daemon=True).start()


if __name__ == "__main__":
    main()
