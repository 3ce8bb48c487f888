#!/bin/sh
# Self-test of the rocq-8.20 image: coqc is 8.20, and it does what every rocq line must
# (coq.sh, shared with the rocq image: good.v and libs.v accepted, bad.v rejected, coqchk works).
set -u
fail() { echo "SELFTEST FAILED: $*"; exit 1; }
coqc --version | grep -q "8.20" || fail "coqc is not 8.20"
. ./coq.sh
echo "SELFTEST PASSED: coqc 8.20 accepts good.v and libs.v, rejects bad.v; coqchk works"
