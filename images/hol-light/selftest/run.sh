#!/bin/sh
# Self-test of the hol-light image: load HOL Light (about three minutes), prove good.ml and refuse
# bad.ml. Loading without libnum prints errors yet exits 0, so success is judged from what was
# proved, never from the exit code alone.
set -u
fail() { echo "SELFTEST FAILED: $*"; exit 1; }
cat > driver.ml <<'ML'
#use "/usr/share/hol-light/hol.ml";;
let selftest_use file = try Toploop.use_file Format.std_formatter file with _ -> false;;
let selftest_good = selftest_use "good.ml";;
let selftest_bad = selftest_use "bad.ml";;
Printf.printf "\nSELFTEST-RESULT good=%b bad=%b\n%!" selftest_good selftest_bad;;
ML
timeout 1500 /usr/share/hol-light/ocaml < driver.ml > hol.log 2>&1
code=$?
grep -n -E "^(# )?(Error|Exception)|Unbound|Error in included file" hol.log | head -n 20
tail -n 12 hol.log
[ "$code" -eq 0 ] || fail "the toplevel exited $code"
if grep -q "Error in included file" hol.log; then fail "hol.ml did not load cleanly"; fi
grep -q "SELFTEST-RESULT good=true bad=false" hol.log || fail "expected good.ml proved and bad.ml refused"
echo "SELFTEST PASSED: HOL Light loaded, good.ml proved, bad.ml refused"
