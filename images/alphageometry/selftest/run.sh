#!/bin/sh
# Self-test of the alphageometry image (DD+AR only): the isosceles base angles are proved; a false
# goal is refused. AlphaGeometry's Graph.build_problem redraws the figure for as long as the goal
# fails its numerical check, so the false goal is given 60 s: no proof within them is a refusal.
set -u
fail() { echo "SELFTEST FAILED: $*"; exit 1; }
python3 -c "import ddar, graph, problem" || fail "AlphaGeometry's DD+AR modules do not import"
timeout 600 python3 ddar_check.py good.txt isosceles_base_angles > good.log 2>&1 \
    || { tail -n 30 good.log; fail "the good problem was not proved"; }
grep "proved" good.log
timeout 60 python3 ddar_check.py bad.txt isosceles_false_right_angle > bad.log 2>&1
status=$?
[ "$status" -eq 0 ] && fail "the false goal was proved"
[ "$status" -eq 1 ] || [ "$status" -eq 124 ] || { tail -n 30 bad.log; fail "exit code $status"; }
echo "false goal: $([ "$status" -eq 124 ] && echo "no diagram satisfies it in 60 s" || echo "not proved")"
echo "SELFTEST PASSED: good problem proved, false goal refused"
