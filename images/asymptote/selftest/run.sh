#!/bin/sh
# Self-test of the asymptote image: good.asy renders to SVG (latex + dvisvgm) and PDF (pdflatex +
# Ghostscript) with its labels; bad.asy is rejected with an Asymptote error. Then what the
# adapter relies on: a frozen clock through libfaketime, no LuaTeX or XeTeX, and kpathsea taking
# shell_escape/openin_any/openout_any from the environment.
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
frozen=$(TZ=UTC env 'LD_PRELOAD=/usr/$LIB/faketime/libfaketime.so.1' 'FAKETIME=2000-01-01 00:00:00' \
    sh -c 'date +%s; sleep 1; date +%s' 2>&1 | tr '\n' ' ')
[ "$frozen" = "946684800 946684800 " ] || fail "libfaketime does not freeze the clock: $frozen"
for engine in luatex lualatex luahbtex xetex xelatex texlua; do
    if command -v "$engine" >/dev/null; then fail "$engine is installed"; fi
done
vars=$(for v in shell_escape openin_any openout_any; do
    shell_escape=f openin_any=p openout_any=p kpsewhich -var-value "$v"; done | tr '\n' ' ')
[ "$vars" = "f p p " ] || fail "kpathsea ignores the environment: $vars"
echo "SELFTEST PASSED: good.asy rendered to SVG and PDF, bad.asy rejected, clock frozen, pdfTeX only"
