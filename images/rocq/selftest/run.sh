#!/bin/sh
# Self-test of the rocq image: coqc accepts good.v and libs.v and rejects bad.v with a type error;
# coqchk audits good.vo; the OCaml toolchain the warm worker is built with links coq-core.
set -u
fail() { echo "SELFTEST FAILED: $*"; exit 1; }
coqc --version || fail "coqc does not run"
coqc -q good.v > good.log 2>&1 || { cat good.log; fail "good.v was rejected"; }
[ -s good.vo ] || fail "good.v compiled but no good.vo"
coqc -q libs.v > libs.log 2>&1 || { cat libs.log; fail "libs.v was rejected (mathcomp, Coquelicot, Interval)"; }
if coqc -q bad.v > bad.log 2>&1; then fail "bad.v was accepted"; fi
cat bad.log
grep -q "Error" bad.log || fail "bad.v failed without a Coq error"
coqchk -silent -o -Q . "" -norec good > good.chk 2>&1 || { cat good.chk; fail "coqchk rejected good.vo"; }
grep -q "CONTEXT SUMMARY" good.chk || { cat good.chk; fail "coqchk printed no context summary"; }
# The warm worker links against coq-core: the toolchain must build a program that uses it.
echo 'let () = print_endline Coq_config.version' > worker_probe.ml
ocamlfind ocamlopt -rectypes -package coq-core.config -linkpkg worker_probe.ml -o worker_probe > probe.log 2>&1 \
    || { cat probe.log; fail "the OCaml toolchain cannot build against coq-core"; }
./worker_probe | grep -q "8.16" || fail "the worker toolchain links a Coq other than 8.16"
[ -s /usr/share/prooflock/coq-checker/mod_checking.ml ] || fail "coqchk's sources are missing"
echo "SELFTEST PASSED: good.v and libs.v accepted, bad.v rejected, coqchk and the worker toolchain work"
