#!/bin/sh
# Self-test of the lean image: good.lean (with Mathlib) checks, bad.lean is rejected, and the REPL
# answers a command and `#print axioms` the way the kit reads them
# (runner/provers/lean/sandbox/lean_server.py), including the name Lean >= 4.29 gives the axiom
# of a `native_decide` proof (runner/provers/lean/judging.py recognises it by `._native.`).
set -u
fail() { echo "SELFTEST FAILED: $*"; exit 1; }
lean --version || fail "lean does not run"
command -v python3 >/dev/null || fail "python3 (for the kit's REPL server) is missing"
cat /opt/prooflock/lean-pins.txt || fail "the pins file is missing"
timeout 600 lean-mathlib good.lean > good.log 2>&1 || { cat good.log; fail "good.lean was rejected"; }
if timeout 600 lean-mathlib bad.lean > bad.log 2>&1; then fail "bad.lean was accepted"; fi
cat bad.log
grep -q "error" bad.log || fail "bad.lean failed without a Lean error"
printf '%s\n\n%s\n\n%s\n\n%s\n\n%s\n\n' \
    '{"cmd": "import Mathlib.Tactic"}' \
    '{"cmd": "theorem t : 1 + 1 = 2 := by decide\ntheorem u : (2 : ℕ) ≤ 3 := by sorry", "env": 0}' \
    '{"cmd": "#print axioms t\n#print axioms u", "env": 1}' \
    '{"cmd": "theorem n : 10 < 20 := by native_decide", "env": 0}' \
    '{"cmd": "#print axioms n", "env": 3}' \
    | timeout 600 lean-mathlib repl > repl.log 2>&1
cat repl.log
grep -q '"env"' repl.log || fail "the REPL did not answer"
grep -q "'t' does not depend on any axioms" repl.log || fail "#print axioms t did not answer as expected"
grep -q "'u' depends on axioms: \[sorryAx\]" repl.log || fail "#print axioms u did not report sorryAx"
grep -q "'n' depends on axioms: \[.*n\._native\.native_decide\." repl.log \
    || fail "#print axioms n did not name n's own native axiom (n._native.native_decide.*)"
echo "SELFTEST PASSED: good.lean checked, bad.lean rejected, the REPL answers with axioms"
