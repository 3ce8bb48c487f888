#!/bin/sh
# Self-test of the rocq-9.2 image: coqc is 9.2, and it does what every rocq line must
# (coq.sh, shared with the rocq image: good.v and libs.v accepted, bad.v rejected, coqchk works).
# libs.v is this line's own: the libraries forky carries for 9.2.
set -u
fail() { echo "SELFTEST FAILED: $*"; exit 1; }
coqc --version | grep -q "9.2" || fail "coqc is not 9.2"
. ./coq.sh
echo "SELFTEST PASSED: coqc 9.2 accepts good.v and libs.v, rejects bad.v; coqchk works"
