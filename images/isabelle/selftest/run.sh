#!/bin/sh
# Self-test of the isabelle image: on the prebuilt HOL heap, session Selftest_Good builds,
# session Selftest_Bad fails on its false lemma, and session Selftest_Axioms builds (its ML, the
# kit's report ML, finds no assumption in a datatype, a record, a typedef and a definition).
set -u
fail() { echo "SELFTEST FAILED: $*"; exit 1; }
isabelle version || fail "isabelle does not run"
timeout 900 isabelle build -D good > good.log 2>&1 \
    || { tail -n 30 good.log; fail "Selftest_Good did not build"; }
if timeout 900 isabelle build -D bad > bad.log 2>&1; then
    fail "Selftest_Bad (a false lemma) built"
fi
tail -n 10 bad.log
grep -q "Failed to finish proof" bad.log || fail "Selftest_Bad failed for another reason"
timeout 900 isabelle build -D axioms > axioms.log 2>&1 \
    || { tail -n 30 axioms.log; fail "the kit's reading of typedef and definition axioms is wrong"; }
echo "SELFTEST PASSED: Selftest_Good built, Selftest_Bad refused, Selftest_Axioms built"
