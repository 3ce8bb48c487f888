#!/bin/sh
# Self-test of the asymptote image: good.asy renders to SVG (latex + dvisvgm) and PDF (pdflatex +
# Ghostscript) with its labels; bad.asy is rejected with an Asymptote error.
set -u
fail() { echo "SELFTEST FAILED: $*"; exit 1; }
asy -version 2>&1 | head -n 1
asy -f svg -o good good.asy > svg.log 2>&1 || { cat svg.log; fail "good.asy did not render to SVG"; }
grep -q "<svg" good.svg || fail "good.svg is not an SVG"
grep -q "<path" good.svg || fail "good.svg has no drawing"
asy -f pdf -o good good.asy > pdf.log 2>&1 || { cat pdf.log; fail "good.asy did not render to PDF"; }
head -c 5 good.pdf | grep -q "%PDF-" || fail "good.pdf is not a PDF"
if [ -f /usr/share/asymptote/olympiad.asy ]; then
    printf 'import olympiad;\nsize(3cm);\npair A=(0,0), B=(3,0), C=(1,2);\ndraw(A--B--C--cycle);\ndot(circumcenter(A,B,C));\n' > oly.asy
    asy -f svg -o oly oly.asy > oly.log 2>&1 || { cat oly.log; fail "olympiad.asy is installed but does not load"; }
    echo "olympiad.asy: loads"
fi
if asy -f svg -o bad bad.asy > bad.log 2>&1; then fail "bad.asy was accepted"; fi
cat bad.log
grep -q "drawtriangle_that_does_not_exist" bad.log || fail "bad.asy failed without naming the error"
echo "SELFTEST PASSED: good.asy rendered to SVG and PDF, bad.asy rejected"
