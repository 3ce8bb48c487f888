#!/bin/sh
# Self-test of the newclid image: the base angles of an isosceles triangle are proved equal, and a
# false goal (a right angle at the apex) is refused because its numerical check fails. newclid
# exits 0 on "Not Solved" too, so success is read from its run summary, not its exit code.
# newclid's default definitions and rules serve here; at check time the kit passes AlphaGeometry's.
set -u
fail() { echo "SELFTEST FAILED: $*"; exit 1; }
python3 -c "import importlib.metadata as m; print('newclid', m.version('newclid'))" \
    || fail "newclid is not installed"
timeout 600 newclid --problem good.txt:isosceles_base_angles --seed 1 -o good_out > good.log 2>&1 \
    || { tail -n 30 good.log; fail "newclid failed on the good problem"; }
grep -E "Solved|success" good.log
grep -q "'success': True" good.log || fail "the good problem was not solved"
if timeout 600 newclid --problem bad.txt:isosceles_false_right_angle --seed 1 -o bad_out \
        > bad.log 2>&1; then
    grep -q "'success': True" bad.log && fail "the false goal was proved"
fi
tail -n 1 bad.log
grep -q "Numerical check failed" bad.log || fail "the false goal failed for another reason"
echo "SELFTEST PASSED: good problem solved, false goal refused"
