"""Runs INSIDE the sandbox: keeps a Lean REPL with one import header elaborated, checks files on it.

`python3 lean_server.py --header header.lean --memory-mb M ...` is a JSON-lines worker
(jsonlines_worker.py, shipped beside it). It starts the REPL (`lean-mathlib repl`, or the command in
PROOFLOCK_LEAN_REPL) and sends it the header once. Then it boots with `{"header_ok": true,
"messages": [...], "double": null, ...}`. Each request {"body", "timeout_s", "target"} gets one
reply {"status", ...}. The REPL's stdout and stderr are pipes read here, so nothing it prints
reaches the kit.

The REPL protocol (leanprover-community/repl, REPL/Main.lean): a command is one JSON object followed
by a blank line. `{"cmd": text}` runs in a fresh environment (imports allowed); `{"cmd": text,
"env": n}` runs on top of environment n. Each reply is one JSON object followed by a blank line:
`{"env": n, "messages": [...], "sorries": [...]}`, or `{"message": text}` for an error.

Per check, all on top of the header's environment H:
1. with a target: `def «__prooflock_target_<request id>» : Prop := (<statement>)` on H. This runs
   before the artifact exists, so nothing the artifact declares can change how the target
   elaborates.
2. the artifact's body (its header blanked, so lines and columns match the file);
3. LISTING: a fixed meta-program listing every constant the environment gained since the
   imports, with its kind. It reads `env.constants.map₂`, the same map the REPL pickles.
4. `#print axioms` for each of those names that is not an internal detail (the kernel's view);
5. with a target: TARGET compares the named theorem's type with the target definition's value
   using `Lean.Expr.eqv` (alpha-equivalence of elaborated terms, never text).
The queries call functions directly (no `toString`, `++`, `==` or `for`). So an instance the
artifact declared for a common type cannot change what they report.

The REPL has no timeout, so this server keeps the deadline. Past it, or past the memory cap (from
/proc/<pid>/status VmRSS), it kills the REPL. The next check gets a fresh one. It also recycles the
REPL after --recycle-after checks or past --recycle-rss-mb, since the REPL keeps every environment
it ever made.

A REPL that is a protocol double (tests/doubles/) says so in its reply to the header: a top-level
`double` field the real REPL never sends. The server passes that on at boot and in every reply, so
the kit can mark such results as a double's.
"""

import argparse
import contextlib
import json
import os
import resource
import select
import shlex
import signal
import subprocess
import threading
import time

import jsonlines_worker

DECLS_MARK = "PROOFLOCK-DECLS "
TARGET_MARK = "PROOFLOCK-TARGET "
TARGET_PREFIX = "__prooflock_target_"
STDERR_KEEP = 64 * 1024
POLL_S = 0.05

LISTING = """#eval show Lean.Elab.Command.CommandElabM Unit from do
  let env ← Lean.getEnv
  let rows := env.constants.map₂.toList.map fun (entry : Lean.Name × Lean.ConstantInfo) =>
    let user := (Lean.privateToUserName? entry.1).getD entry.1
    let kind : String := match entry.2 with
      | .axiomInfo _ => "axiom"
      | .thmInfo _ => "theorem"
      | .defnInfo _ => "def"
      | .opaqueInfo _ => "opaque"
      | .inductInfo _ => "inductive"
      | .ctorInfo _ => "constructor"
      | .recInfo _ => "recursor"
      | .quotInfo _ => "quot"
    Lean.Json.mkObj [("name", Lean.Json.str (Lean.Name.toString user)),
      ("kind", Lean.Json.str kind), ("internal", Lean.Json.bool (Lean.Name.isInternal user))]
  Lean.logInfo (Lean.MessageData.ofFormat (Std.Format.text
    (String.append "PROOFLOCK-DECLS " (Lean.Json.compress (Lean.Json.arr rows.toArray)))))"""

TARGET_QUERY = """#eval show Lean.Elab.Command.CommandElabM Unit from do
  let env ← Lean.getEnv
  let found := env.find? (String.toName {name})
  let wanted := env.find? (String.toName {target})
  let status : String := match found, wanted with
    | some (.thmInfo t), some (.defnInfo d) => cond (Lean.Expr.eqv t.type d.value) "same" "differs"
    | some (.thmInfo _), _ => "no_target"
    | some _, _ => "not_a_theorem"
    | none, _ => "missing"
  let shown ← Lean.Elab.Command.liftTermElabM do
    let a ← match found with
      | some (.thmInfo t) => Lean.Meta.ppExpr t.type
      | _ => pure (Std.Format.text "")
    let b ← match wanted with
      | some (.defnInfo d) => Lean.Meta.ppExpr d.value
      | _ => pure (Std.Format.text "")
    pure (Std.Format.pretty a 100, Std.Format.pretty b 100)
  Lean.logInfo (Lean.MessageData.ofFormat (Std.Format.text (String.append "PROOFLOCK-TARGET "
    (Lean.Json.compress (Lean.Json.mkObj [("status", Lean.Json.str status),
      ("theorem", Lean.Json.str shown.1), ("target", Lean.Json.str shown.2)])))))"""


class ReplDied(Exception):
    def __init__(self, verdict, detail):
        super().__init__(detail)
        self.verdict = verdict  # crash, memory, timeout


class Repl:
    """One REPL process, spoken to in its JSON protocol."""

    def __init__(self, argv, memory_mb, address_space_mb):
        self.memory_kb = memory_mb * 1024
        limit = address_space_mb * 1024 * 1024
        _, hard = resource.getrlimit(resource.RLIMIT_AS)
        if hard != resource.RLIM_INFINITY:
            limit = min(limit, hard)  # a child cannot raise what its parent was given

        def limit_memory():
            resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
            resource.setrlimit(resource.RLIMIT_CORE, (0, 0))

        self.proc = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
            preexec_fn=limit_memory,
        )
        self.stderr = bytearray()
        self.stderr_reader = threading.Thread(target=self._drain_stderr, daemon=True)
        self.stderr_reader.start()
        self.buffer = b""
        self.peak_kb = 0
        self.checks = 0

    def _drain_stderr(self):
        while True:
            chunk = self.proc.stderr.read1(65536)
            if not chunk:
                return
            self.stderr += chunk
            del self.stderr[:-STDERR_KEEP]

    def rss_kb(self):
        try:
            with open(f"/proc/{self.proc.pid}/status") as status:
                for line in status:
                    if line.startswith("VmRSS:"):
                        return int(line.split()[1])
        except (OSError, ValueError):
            pass
        return 0

    def command(self, payload, deadline):
        """Send one command; its reply as a dict. Raises ReplDied (timeout, memory, crash)."""
        data = json.dumps(payload, ensure_ascii=False).encode() + b"\n\n"
        try:
            self.proc.stdin.write(data)
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            raise self._died() from None
        raw = self._read_reply(deadline)
        try:
            return json.loads(raw)
        except ValueError:
            self.kill()
            raise ReplDied("crash", "the REPL sent a reply that is not JSON") from None

    def _read_reply(self, deadline):
        fd = self.proc.stdout.fileno()
        while b"\n\n" not in self.buffer.lstrip(b"\n"):
            now = time.monotonic()
            if now >= deadline:
                self.kill()
                raise ReplDied("timeout", "the check did not finish within its time limit")
            rss = self.rss_kb()
            self.peak_kb = max(self.peak_kb, rss)
            if rss > self.memory_kb:
                self.kill()
                raise ReplDied("memory", f"the REPL used {rss // 1024} MiB, over the memory limit")
            ready, _, _ = select.select([fd], [], [], min(POLL_S, deadline - now))
            if ready:
                chunk = os.read(fd, 1 << 20)
                if not chunk:
                    raise self._died()
                self.buffer += chunk
        self.buffer = self.buffer.lstrip(b"\n")
        reply, _, self.buffer = self.buffer.partition(b"\n\n")
        return reply

    def _died(self):
        _, status, usage = os.wait4(self.proc.pid, 0)
        self.proc.returncode = os.waitstatus_to_exitcode(status)
        self.kill()
        self.stderr_reader.join(2)  # its last words, before they are quoted
        peak = max(self.peak_kb, usage.ru_maxrss)
        if peak >= 0.9 * self.memory_kb:
            return ReplDied("memory", f"the REPL died at {peak // 1024} MiB, near the memory limit")
        code = self.proc.returncode
        how = f"signal {-code}" if code < 0 else f"exit status {code}"
        tail = bytes(self.stderr[-2000:]).decode("utf-8", "replace").strip()
        return ReplDied("crash", f"the REPL died ({how})" + (f": {tail}" if tail else ""))

    def kill(self):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(5)


class Server:
    def __init__(self, args):
        self.args = args
        self.argv = shlex.split(os.environ.get("PROOFLOCK_LEAN_REPL", "")) or [
            "lean-mathlib",
            "repl",
        ]
        with open(args.header, encoding="utf-8") as handle:
            self.header = handle.read()
        self.repl = None
        self.header_env = None
        self.double = None  # what a protocol double said it is, in its reply to the header
        self.stats = {"repl_starts": 0, "header_elaborations": 0, "checks": 0, "recycled": 0}

    def fresh_repl(self, deadline):
        """A REPL with the header elaborated; its messages when the header failed."""
        if self.repl is not None and self.repl.proc.poll() is None:
            return []
        self.repl = Repl(self.argv, self.args.memory_mb, self.args.address_space_mb)
        self.stats["repl_starts"] += 1
        reply = self.repl.command({"cmd": self.header}, deadline)
        self.stats["header_elaborations"] += 1
        self.double = reply.get("double") or self.double
        messages = reply.get("messages", [])
        if "message" in reply:
            messages = [{"severity": "error", "data": reply["message"]}]
        if "env" not in reply or any(m.get("severity") == "error" for m in messages):
            self.stop_repl()
            return messages or [{"severity": "error", "data": "the REPL did not accept the header"}]
        self.header_env = reply["env"]
        return []

    def stop_repl(self):
        if self.repl is not None:
            self.repl.kill()
        self.repl = None

    def boot(self):
        started = time.monotonic()
        died = None
        try:
            problems = self.fresh_repl(started + self.args.header_timeout_s)
        except ReplDied as exc:
            problems, died = [], {"verdict": exc.verdict, "detail": str(exc)}
            self.repl = None
        facts = {
            "header_ok": not problems and died is None,
            "messages": problems,
            "died": died,
            "boot_ms": int((time.monotonic() - started) * 1000),
            "repl": " ".join(self.argv),
            "double": self.double,
        }
        return facts

    def check(self, request, request_id):
        started = time.monotonic()
        try:
            problems = self.fresh_repl(started + self.args.header_timeout_s)
        except ReplDied as exc:
            self.repl = None
            if exc.verdict == "timeout":  # it imported in time before: not this file's doing
                raise jsonlines_worker.Failed(f"the header did not import again: {exc}") from None
            return {"status": exc.verdict, "detail": f"while importing the header: {exc}"}
        if problems:
            return {"status": "header_failed", "messages": problems}
        deadline = time.monotonic() + float(request["timeout_s"])
        self.stats["checks"] += 1
        self.repl.checks += 1
        try:
            reply = self.run_check(request, request_id, deadline)
        except ReplDied as exc:
            self.stop_repl()
            reply = {"status": exc.verdict, "detail": str(exc)}
        reply["cpu_ms"] = _children_cpu_ms()
        reply["wall_ms"] = int((time.monotonic() - started) * 1000)
        self.maybe_recycle()
        reply["stats"] = dict(self.stats)
        reply["double"] = self.double
        return reply

    def run_check(self, request, request_id, deadline):
        base = self.header_env
        target = request.get("target")
        target_def = TARGET_PREFIX + request_id
        if target is not None:
            text = f"def «{target_def}» : Prop :=\n(\n{target['statement']}\n)"
            made = self.repl.command({"cmd": text, "env": base}, deadline)
            errors = _errors(made)
            if errors:
                return {"status": "bad_target", "messages": errors}
            base = made["env"]
        body = self.repl.command({"cmd": request["body"], "env": base}, deadline)
        if "message" in body:
            return {"status": "repl_error", "detail": body["message"]}
        after = body["env"]
        result = {
            "status": "ok",
            "messages": body.get("messages", []),
            "sorries": body.get("sorries", []),
        }
        listing = self.repl.command({"cmd": LISTING, "env": after}, deadline)
        declarations = _marked(listing, DECLS_MARK)
        if not isinstance(declarations, list):
            return {
                **result,
                "status": "query_failed",
                "query": "declarations",
                "detail": _describe(listing),
            }
        declarations = [d for d in declarations if not d["name"].startswith(TARGET_PREFIX)]
        result["declarations"] = declarations
        names = [d["name"] for d in declarations if not d["internal"]]
        result["axioms"] = self.axioms_of(names, after, deadline) if names else {}
        if target is not None:
            query = TARGET_QUERY.replace("{name}", json.dumps(target["name"]))
            query = query.replace("{target}", json.dumps(target_def))
            compared = _marked(
                self.repl.command({"cmd": query, "env": after}, deadline), TARGET_MARK
            )
            if not isinstance(compared, dict):
                return {**result, "status": "query_failed", "query": "target"}
            result["target"] = compared
        return result

    def axioms_of(self, names, env, deadline):
        """`#print axioms` for each name: {name: [axioms]} or {name: None} where it failed."""
        text = "\n".join(f"#print axioms {name}" for name in names)
        reply = self.repl.command({"cmd": text, "env": env}, deadline)
        found = {name: None for name in names}
        for message in reply.get("messages", []):
            line = message.get("pos", {}).get("line", 0)
            if 1 <= line <= len(names) and message.get("severity") == "info":
                found[names[line - 1]] = _axiom_list(message.get("data", ""))
        return found

    def maybe_recycle(self):
        repl = self.repl
        if repl is None:
            return
        worn = repl.checks >= self.args.recycle_after
        heavy = repl.rss_kb() > self.args.recycle_rss_mb * 1024
        if worn or heavy:
            self.stats["recycled"] += 1
            self.stop_repl()


def _errors(reply):
    if "message" in reply:
        return [{"severity": "error", "data": reply["message"]}]
    return [m for m in reply.get("messages", []) if m.get("severity") == "error"]


def _marked(reply, mark):
    """The JSON a query printed after its marker, or None."""
    for message in reply.get("messages", []):
        data = message.get("data", "")
        if message.get("severity") == "info" and data.startswith(mark):
            try:
                return json.loads(data[len(mark) :])
            except ValueError:
                return None
    return None


def _describe(reply):
    errors = _errors(reply)
    return errors[0].get("data", "")[:500] if errors else "no answer from the query"


def _axiom_list(data):
    """`'x' depends on axioms: [a, b]` → [a, b]; `'x' does not depend on any axioms` → []."""
    if "does not depend on any axioms" in data:
        return []
    _, found, listed = data.partition("depends on axioms:")
    if not found:
        return None
    return [name.strip() for name in listed.strip().strip("[]").split(",") if name.strip()]


def _children_cpu_ms():
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return int((usage.ru_utime + usage.ru_stime) * 1000)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--header", required=True)
    parser.add_argument("--memory-mb", type=int, required=True)
    parser.add_argument("--address-space-mb", type=int, required=True)
    parser.add_argument("--header-timeout-s", type=float, default=600)
    parser.add_argument("--recycle-after", type=int, default=50)
    parser.add_argument("--recycle-rss-mb", type=int, default=1 << 20)
    server = Server(parser.parse_args())
    jsonlines_worker.serve(server.boot, server.check, on_error=server.stop_repl)


if __name__ == "__main__":
    main()
