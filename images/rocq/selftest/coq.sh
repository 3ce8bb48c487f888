#!/bin/sh
# What every rocq line's image must do (sourced by run.sh): coqc accepts good.v and libs.v and
# rejects bad.v with a type error; coqchk audits good.vo.
coqc -q good.v > good.log 2>&1 || { cat good.log; fail "good.v was rejected"; }
[ -s good.vo ] || fail "good.v compiled but no good.vo"
coqc -q libs.v > libs.log 2>&1 || { cat libs.log; fail "libs.v was rejected (mathcomp, Coquelicot, Interval)"; }
if coqc -q bad.v > bad.log 2>&1; then fail "bad.v was accepted"; fi
cat bad.log
grep -q "Error" bad.log || fail "bad.v failed without a Coq error"
coqchk -silent -o -Q . "" -norec good > good.chk 2>&1 || { cat good.chk; fail "coqchk rejected good.vo"; }
grep -q "CONTEXT SUMMARY" good.chk || { cat good.chk; fail "coqchk printed no context summary"; }
