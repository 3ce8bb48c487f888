#!/bin/sh
# Self-test of the rocq image: coqc accepts good.v and libs.v and rejects bad.v with a type error;
# coqchk audits good.vo; the OCaml toolchain the warm worker is built with links coq-core.
set -u
fail() { echo "SELFTEST FAILED: $*"; exit 1; }
coqc --version || fail "coqc does not run"
. ./coq.sh
# The warm worker links against coq-core: the toolchain must build a program that uses it.
echo 'let () = print_endline Coq_config.version' > worker_probe.ml
ocamlfind ocamlopt -rectypes -package coq-core.config -linkpkg worker_probe.ml -o worker_probe > probe.log 2>&1 \
    || { cat probe.log; fail "the OCaml toolchain cannot build against coq-core"; }
./worker_probe | grep -q "8.16" || fail "the worker toolchain links a Coq other than 8.16"
[ -s /usr/share/prooflock/coq-checker/mod_checking.ml ] || fail "coqchk's sources are missing"
echo "SELFTEST PASSED: good.v and libs.v accepted, bad.v rejected, coqchk and the worker toolchain work"
