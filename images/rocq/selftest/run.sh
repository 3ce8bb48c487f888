#!/bin/sh
# Self-test of the rocq image: coqc accepts good.v and libs.v and rejects bad.v with a type error.
set -u
fail() { echo "SELFTEST FAILED: $*"; exit 1; }
coqc --version || fail "coqc does not run"
coqc -q good.v > good.log 2>&1 || { cat good.log; fail "good.v was rejected"; }
[ -s good.vo ] || fail "good.v compiled but no good.vo"
coqc -q libs.v > libs.log 2>&1 || { cat libs.log; fail "libs.v was rejected (mathcomp, Coquelicot, Interval)"; }
if coqc -q bad.v > bad.log 2>&1; then fail "bad.v was accepted"; fi
cat bad.log
grep -q "Error" bad.log || fail "bad.v failed without a Coq error"
echo "SELFTEST PASSED: good.v and libs.v accepted, bad.v rejected"
