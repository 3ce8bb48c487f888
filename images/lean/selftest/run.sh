#!/bin/sh
# Self-test of the lean image: good.lean (with Mathlib) checks, bad.lean is rejected, and the REPL
# answers a command.
set -u
fail() { echo "SELFTEST FAILED: $*"; exit 1; }
lean --version || fail "lean does not run"
timeout 600 lean-mathlib good.lean > good.log 2>&1 || { cat good.log; fail "good.lean was rejected"; }
if timeout 600 lean-mathlib bad.lean > bad.log 2>&1; then fail "bad.lean was accepted"; fi
cat bad.log
grep -q "error" bad.log || fail "bad.lean failed without a Lean error"
printf '{"cmd": "theorem t : 1 + 1 = 2 := rfl"}\n\n' | timeout 300 lean-mathlib repl > repl.log 2>&1
grep -q '"env"' repl.log || { cat repl.log; fail "the REPL did not answer"; }
echo "SELFTEST PASSED: good.lean checked, bad.lean rejected, the REPL answers"
