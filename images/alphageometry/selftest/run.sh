#!/bin/sh
# Self-test of the alphageometry image (DD+AR only): the isosceles base angles are proved; a false
# goal is refused, either by the numerical check when the figure is built or by DD+AR.
set -u
fail() { echo "SELFTEST FAILED: $*"; exit 1; }
python3 -c "import ddar, graph, problem" || fail "AlphaGeometry's DD+AR modules do not import"
timeout 600 python3 ddar_check.py good.txt isosceles_base_angles > good.log 2>&1 \
    || { tail -n 30 good.log; fail "the good problem was not proved"; }
if timeout 600 python3 ddar_check.py bad.txt isosceles_false_right_angle > bad.log 2>&1; then
    fail "the false goal was proved"
fi
tail -n 3 bad.log
echo "SELFTEST PASSED: good problem proved, false goal refused"
