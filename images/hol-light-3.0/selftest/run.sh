#!/bin/sh
# Self-test of the hol-light-3.0 image: the package is 3.0.0, HOL Light loads in its toplevel
# (ocaml-hol; about three minutes), proves good.ml (shared with the hol-light image), refuses
# bad.ml, and has a theorem 3.0 added (DIV_ADD_EQ). Loading prints errors yet exits 0, so
# success is judged from what was proved, never from the exit code alone.
set -u
fail() { echo "SELFTEST FAILED: $*"; exit 1; }
hol=/usr/share/hol-light
dpkg-query -W -f '${Version}\n' hol-light | grep -q '^1:3\.0\.0-' || fail "hol-light is not 3.0.0"
ocamlopt -version | grep -q '^5\.3\.' || fail "ocamlopt is not OCaml 5.3"
cat > driver.ml <<'ML'
#use "/usr/share/hol-light/hol.ml";;
let selftest_use file = try Toploop.use_file Format.std_formatter file with _ -> false;;
let selftest_good = selftest_use "good.ml";;
let selftest_bad = selftest_use "bad.ml";;
let selftest_new = try ignore (concl DIV_ADD_EQ); true with _ -> false;;
Printf.printf "\nSELFTEST-RESULT good=%b bad=%b new=%b\n%!" selftest_good selftest_bad selftest_new;;
ML
timeout 1500 "$hol/ocaml-hol" -I "$hol" < driver.ml > hol.log 2>&1
code=$?
grep -n -E "^(# )?(Error|Exception)|Unbound|Error in included file" hol.log | head -n 20
tail -n 12 hol.log
[ "$code" -eq 0 ] || fail "the toplevel exited $code"
if grep -q "Error in included file" hol.log; then fail "hol.ml did not load cleanly"; fi
grep -q "SELFTEST-RESULT good=true bad=false new=true" hol.log \
    || fail "expected good.ml proved, bad.ml refused and 3.0's DIV_ADD_EQ"
echo "SELFTEST PASSED: HOL Light 3.0.0 loaded, good.ml proved, bad.ml refused"
