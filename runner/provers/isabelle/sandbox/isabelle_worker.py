"""Runs INSIDE the sandbox: one Isabelle server with one session, theories checked on it.

`python3 isabelle_worker.py --session HOL` is a JSON-lines worker (jsonlines_worker.py, shipped
beside it). At boot it:
1. starts `isabelle server -n prooflock -p 0` (or the command in PROOFLOCK_ISABELLE);
2. reads its address line `server "prooflock" = 127.0.0.1:PORT (password "...")`;
3. connects and sends the password;
4. starts the session (`session_start`);
5. boots with {"ok", "isabelle": <the server's identity>, ...}.

Each request is {"theories": [{"name", "text"}], "timeout_s", "target"}. Its theories and a report
theory are written into a fresh directory and run with one `use_theories`. They are purged
afterwards (`purge_theories`). The reply is {"status", ...}. The server's own output goes to
worker.log.

Server protocol (Isabelle system manual, chapter "The Isabelle server"): the client sends lines. A
message is one line. A message longer than 100 bytes, or multi-line, is a line with its byte count
(n + 1, the newline included) followed by those bytes. Replies are `OK json` or `ERROR json`.
Asynchronous tasks reply `NOTE json` ... then `FINISHED json` or `FAILED json`.

The report theory imports the artifact and runs a fixed ML block. It lists:
- each fact the artifact added, with its oracles (`Thm_Deps.all_oracles`: `skip_proof` is what
  sorry leaves);
- the theory's own axioms;
- the axioms the typedef package registered: `type_definition_T` of every typedef, and so of
  every datatype and record (`Typedef.get_info_global` over `Sign.logical_types`);
- with a target, whether the named theorem's proposition is alpha-equivalent (`aconv`) to the
  target. The target is read in the context of the artifact's imports alone.

A task past its deadline gets `cancel`. If it does not stop, the server is restarted.
"""

import argparse
import contextlib
import json
import os
import queue
import re
import shlex
import shutil
import signal
import socket
import subprocess
import threading
import time

import jsonlines_worker

REPORT_MARK = "PROOFLOCK-REPORT "
ADDRESS = re.compile(r'server "([^"]*)" = ([\d.]+):(\d+) \(password "([^"]*)"\)')
SYMBOL = re.compile(r"\\<\^?[A-Za-z][A-Za-z0-9_']*>")  # \<forall>, \<^sub>: whole symbols only
CANCEL_GRACE_S = 15
COMMAND_S = 120

REPORT_THEORY = """theory {report} imports "{artifact}" begin
ML \\<open>
let
  val thy = \\<^theory>\\<open>{artifact}\\<close>;
  val parents = Theory.parents_of thy;
  val base = Theory.join_theory parents;
  fun esc s = String.translate (fn #"\\"" => "\\\\\\"" | #"\\\\" => "\\\\\\\\"
    | c => if Char.ord c < 32 then " " else String.str c) s;
  fun str s = "\\"" ^ esc s ^ "\\"";
  fun arr xs = "[" ^ space_implode "," xs ^ "]";
  val facts = Facts.dest_static false (map Global_Theory.facts_of parents)
    (Global_Theory.facts_of thy);
  fun oracles ths = distinct (op =) (map (fn ((name, _), _) => name) (Thm_Deps.all_oracles ths));
  val thms = map (fn (name, ths) =>
    "{{\\"name\\":" ^ str name ^ ",\\"oracles\\":" ^ arr (map str (oracles ths)) ^ "}}") facts;
  val axioms = map (str o #1) (Theory.axioms_of thy);
  fun typedef_axioms name =
    map (fn ((info, _): Typedef.info) => #axiom_name info) (Typedef.get_info_global thy name);
  val typedefs = map str (distinct (op =) (maps typedef_axioms (Sign.logical_types thy)));
  val target = {target};
in
  writeln ("PROOFLOCK-REPORT {{\\"theorems\\":" ^ arr thms ^ ",\\"axioms\\":" ^ arr axioms
    ^ ",\\"typedefs\\":" ^ arr typedefs ^ ",\\"target\\":" ^ target ^ "}}")
end
\\<close>
end
"""

TARGET_ML = """(let
    val ctxt = Proof_Context.init_global base;
    val wanted = Logic.varify_global (Syntax.read_prop ctxt {statement});
    fun shown t = YXML.content_of (Syntax.string_of_term ctxt t);
    val found = SOME (Global_Theory.get_thm thy {name}) handle ERROR _ => NONE;
  in
    case found of
      NONE => "{{\\"status\\":\\"missing\\"}}"
    | SOME th => "{{\\"status\\":" ^ str (if Thm.prop_of th aconv wanted then "same" else "differs")
        ^ ",\\"theorem\\":" ^ str (shown (Thm.prop_of th))
        ^ ",\\"target\\":" ^ str (shown wanted) ^ "}}"
  end handle ERROR msg =>
    "{{\\"status\\":\\"bad_target\\",\\"message\\":" ^ str (YXML.content_of msg) ^ "}}")"""


def ml_string(text):
    """An ML string literal; Isabelle symbols such as \\<forall> pass through as they are."""
    out = []
    i = 0
    while i < len(text):
        symbol = SYMBOL.match(text, i)
        if symbol:
            out.append(symbol.group(0))
            i = symbol.end()
            continue
        c = text[i]
        out.append({'"': '\\"', "\\": "\\\\", "\n": " ", "\t": " "}.get(c, c))
        i += 1
    return '"' + "".join(out) + '"'


class ServerDied(Exception):
    pass


class Connection:
    """One TCP connection to the server, with a reader thread splitting its messages."""

    def __init__(self, host, port, password):
        self.sock = socket.create_connection((host, port), timeout=COMMAND_S)
        self.sock.settimeout(None)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # small frames, no waiting
        self.file = self.sock.makefile("rb")
        self.messages = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        self.send(password)
        kind, body = self.next(time.monotonic() + COMMAND_S)
        if kind != "OK":
            raise ServerDied(f"the server refused the password: {kind} {body}")
        self.identity = body

    def _read(self):
        try:
            while True:
                line = self.file.readline()
                if not line:
                    break
                if line.strip().isdigit():
                    line = self.file.read(int(line.strip()))
                text = line.decode("utf-8", "replace").rstrip("\n")
                kind, _, rest = text.partition(" ")
                try:
                    body = json.loads(rest) if rest.strip() else None
                except ValueError:
                    body = rest
                self.messages.put((kind, body))
        finally:
            self.messages.put(None)

    def send(self, line):
        data = line.encode("utf-8")
        try:
            self.sock.sendall(data + b"\n")
        except OSError as exc:
            raise ServerDied(f"the server connection broke: {exc}") from None

    def next(self, deadline):
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError
        try:
            item = self.messages.get(timeout=remaining)
        except queue.Empty:
            raise TimeoutError from None
        if item is None:
            self.messages.put(None)
            raise ServerDied("the server closed the connection")
        return item

    def command(self, name, args, deadline):
        """A synchronous command: its OK body (raises ServerDied on ERROR)."""
        self.send(f"{name} {json.dumps(args)}")
        while True:
            kind, body = self.next(deadline)
            if kind == "OK":
                return body
            if kind == "ERROR":
                raise ServerDied(f"{name} failed: {body}")

    def task(self, name, args, deadline, on_timeout=None):
        """An asynchronous command: (FINISHED or FAILED, body, notes)."""
        task = self.command(name, args, deadline)["task"]
        notes = []
        while True:
            try:
                kind, body = self.next(deadline)
            except TimeoutError:
                if on_timeout is None:
                    raise
                on_timeout(task)
                on_timeout = None
                deadline = time.monotonic() + CANCEL_GRACE_S
                continue
            if isinstance(body, dict) and body.get("task") not in (None, task):
                continue
            if kind in ("FINISHED", "FAILED"):
                return kind, body, notes
            if kind == "NOTE":
                notes.append(body)

    def close(self):
        with contextlib.suppress(OSError):
            self.sock.close()


class Worker:
    def __init__(self, args):
        self.args = args
        prefix = shlex.split(os.environ.get("PROOFLOCK_ISABELLE", "")) or ["isabelle"]
        self.argv = [*prefix, "server", "-n", "prooflock", "-p", "0"]
        self.proc = None
        self.conn = None
        self.session_id = None
        self.identity = None  # what the server said it is, answering the password
        self.stats = {
            "server_starts": 0,
            "session_starts": 0,
            "checks": 0,
            "cancels": 0,
            "purged": 0,
        }

    def start(self, deadline):
        self.proc = subprocess.Popen(
            self.argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        self.stats["server_starts"] += 1
        first = self.proc.stdout.readline().decode("utf-8", "replace")
        threading.Thread(target=_drain, args=(self.proc.stdout,), daemon=True).start()
        threading.Thread(target=_drain, args=(self.proc.stderr,), daemon=True).start()
        match = ADDRESS.search(first)
        if match is None:
            raise ServerDied(f"isabelle server did not print its address: {first.strip()[:300]!r}")
        self.conn = Connection(match.group(2), int(match.group(3)), match.group(4))
        self.identity = self.conn.identity
        args = {"session": self.args.session, "options": ["quick_and_dirty=false"]}
        if self.args.dirs:
            args["dirs"] = self.args.dirs
        kind, body, _ = self.conn.task("session_start", args, deadline)
        self.stats["session_starts"] += 1
        if kind != "FINISHED":
            message = body.get("message") if isinstance(body, dict) else body
            raise ServerDied(f"session {self.args.session} did not start: {message}")
        self.session_id = body["session_id"]

    def stop(self):
        if self.conn is not None:
            self.conn.close()
        if self.proc is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(5)
        self.proc = self.conn = self.session_id = None

    def boot(self):
        started = time.monotonic()
        facts = {"session": self.args.session}
        try:
            self.start(started + self.args.boot_timeout_s)
            facts.update(ok=True)
        except (ServerDied, TimeoutError, OSError) as exc:
            facts.update(ok=False, problem=str(exc) or "the session did not start in time")
            self.stop()
        facts["isabelle"] = self.identity
        facts["boot_ms"] = int((time.monotonic() - started) * 1000)
        return facts

    def check(self, request, request_id):
        started = time.monotonic()
        if self.conn is None:
            try:
                self.start(started + self.args.boot_timeout_s)
            except (ServerDied, TimeoutError, OSError) as exc:
                self.stop()
                raise jsonlines_worker.Failed(
                    f"the Isabelle server did not restart: {exc}"
                ) from None
        self.stats["checks"] += 1
        directory = os.path.abspath(f"check-{request_id}")
        os.mkdir(directory)
        try:
            reply = self.run_check(
                request, request_id, directory, started + float(request["timeout_s"])
            )
        finally:
            shutil.rmtree(directory, ignore_errors=True)
        reply["wall_ms"] = int((time.monotonic() - started) * 1000)
        reply["stats"] = dict(self.stats)
        return reply

    def run_check(self, request, request_id, directory, deadline):
        names = []
        for theory in request["theories"]:
            with open(
                os.path.join(directory, theory["name"] + ".thy"), "w", encoding="utf-8"
            ) as out:
                out.write(theory["text"])
            names.append(theory["name"])
        report = f"Prooflock_Report_{request_id}"
        target = request.get("target")
        target_ml = '"null"'
        if target is not None:
            target_ml = TARGET_ML.format(
                statement=ml_string(target["statement"]), name=ml_string(target["name"])
            )
        with open(os.path.join(directory, report + ".thy"), "w", encoding="utf-8") as out:
            out.write(REPORT_THEORY.format(report=report, artifact=names[-1], target=target_ml))
        args = {
            "session_id": self.session_id,
            "theories": [*names, report],
            "master_dir": directory,
            "unicode_symbols": False,
            "watchdog_timeout": max(1.0, deadline - time.monotonic()),
        }
        cancelled = []

        def cancel(task):
            cancelled.append(task)
            self.stats["cancels"] += 1
            self.conn.send(f"cancel {json.dumps({'task': task})}")

        try:
            kind, body, _ = self.conn.task("use_theories", args, deadline, on_timeout=cancel)
        except TimeoutError:
            self.stop()  # the task ignored `cancel`: a fresh server for the next check
            return {
                "status": "timeout",
                "detail": "the check did not stop when cancelled; the server was restarted",
            }
        except ServerDied as exc:
            self.stop()
            return {"status": "crash", "detail": str(exc)}
        if cancelled:
            self.purge([*names, report], directory)
            return {"status": "timeout", "detail": "the check did not finish within its time limit"}
        self.purge([*names, report], directory)
        if kind == "FAILED":
            return {
                "status": "failed",
                "detail": body.get("message") if isinstance(body, dict) else body,
            }
        return self.result(body, names, report)

    def purge(self, names, directory):
        try:
            purged = self.conn.command(
                "purge_theories",
                {
                    "session_id": self.session_id,
                    "theories": names,
                    "master_dir": directory,
                    "all": True,
                },
                time.monotonic() + COMMAND_S,
            )
            self.stats["purged"] += len((purged or {}).get("purged", []))
        except (ServerDied, TimeoutError):
            self.stop()

    def result(self, body, names, report):
        nodes = {
            node.get("theory_name", "").rsplit(".", 1)[-1]: node for node in body.get("nodes", [])
        }
        messages = []
        for name in names:
            node = nodes.get(name, {})
            for message in node.get("messages", []):
                messages.append({**message, "theory": name})
        found = None
        for message in nodes.get(report, {}).get("messages", []):
            text = message.get("message", "")
            if message.get("kind") == "writeln" and text.startswith(REPORT_MARK):
                try:
                    found = json.loads(text[len(REPORT_MARK) :])
                except ValueError:
                    found = None
        errors = [m for m in body.get("errors", []) if not _in_report(m)]
        return {
            "status": "ok",
            "ok": body.get("ok"),
            "errors": errors,
            "messages": messages,
            "report": found,
        }


def _in_report(message):
    """Whether a message is about the report theory (which fails whenever the artifact does)."""
    file = str((message.get("pos") or {}).get("file", ""))
    return os.path.basename(file).startswith("Prooflock_Report_")


def _drain(stream):
    with open(jsonlines_worker.LOG, "ab") as log:
        for line in stream:
            log.write(line)
            log.flush()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--session", default="HOL")
    parser.add_argument("--dirs", nargs="*", default=[])
    parser.add_argument("--boot-timeout-s", type=float, default=1800)
    worker = Worker(parser.parse_args())
    jsonlines_worker.serve(worker.boot, worker.check, on_error=worker.stop)


if __name__ == "__main__":
    main()
