#!/bin/sh
# The kit's stand-in for the programs that write asy's output: gs, dvisvgm, pdflatex and pdftex
# (render.py links it under those names ahead of the real ones on asy's PATH; a diagram cannot
# name another program: guard.py). It runs the real program, and when that program writes the
# render, $PROOFLOCK_RENDER (asy's out/diagram.<fmt>), it keeps a copy as $PROOFLOCK_KEEP, where
# no code of the diagram can write: asy writes only into out/, TeX only below it
# (openout_any=p), ghostscript only its output file (SAFER). The kit takes that copy as the
# render, never the file in out/.
#
# Two things a diagram could otherwise do through these programs are stopped here:
# - gs: asy passes -P, and ghostscript then reads its init files (gs_init.ps) from the current
#   directory first; asy runs it in out/, where the diagram writes, and an init file runs
#   before SAFER. -P is dropped.
# - dvisvgm runs the PostScript specials of a DVI file without SAFER (a label's
#   \special{ps:...} could start a shell), so SVG comes from pdfTeX's PDF through ghostscript
#   (render.py asks asy for pdflatex); a DVI file is refused.
tool=${0##*/}
real=$(PATH=$PROOFLOCK_PATH command -v "$tool") || {
  echo "prooflock: $tool is not installed" >&2
  exit 127
}
output=
case $tool in
gs)
  for arg; do
    shift
    case $arg in
    -P) continue ;;
    -sOutputFile=*) output=${arg#-sOutputFile=} ;;
    esac
    set -- "$@" "$arg"
  done
  set -- -P- "$@"
  ;;
dvisvgm)
  for arg; do
    case $arg in
    -o*) output=${arg#-o} ;;
    --output=*) output=${arg#--output=} ;;
    *.dvi)
      echo "prooflock: refused: SVG from a DVI file (settings.tex = \"latex\" or \"tex\"):" \
        "dvisvgm runs its PostScript specials without ghostscript's SAFER;" \
        "use pdflatex (the default for SVG here), or another format" >&2
      exit 1
      ;;
    esac
  done
  ;;
pdflatex | pdftex)
  # asy renames pdfTeX's out/diagram_.pdf to out/diagram.pdf when the output is PDF.
  # asy passes `\nonstopmode\input` and `diagram_.tex` (one argument or two).
  directory=.
  for arg; do
    case $arg in -output-directory=*) directory=${arg#-output-directory=} ;; esac
  done
  case "$*" in
  *'\input '*)
    job=${*##*\\input }
    job=${job%% *}
    output=$directory/${job%.tex}.pdf
    ;;
  esac
  ;;
esac

absolute() { # $1, with its directory resolved; empty if that directory does not exist
  (cd "$(dirname -- "$1")" 2>/dev/null && printf '%s/%s' "$(pwd -P)" "${1##*/}")
}

# Whatever the program is to write goes first (a page pattern, diagram_%d.ps, all its pages):
# afterwards only what the program wrote is there, never a file of the diagram's that asy then
# hands to the next program (dvisvgm runs a PostScript file it is given outside SAFER).
kept=
if [ -n "$output" ]; then
  for old in $(printf '%s' "$output" | sed 's/%[0-9]*d/*/g'); do rm -f -- "$old"; done
  becomes=$(absolute "$output")
  case $tool in pdf*) becomes=${becomes%_.pdf}.pdf ;; esac
  if [ -n "$becomes" ] && [ "$becomes" = "$PROOFLOCK_RENDER" ]; then
    kept=$output
  fi
fi
"$real" "$@"
status=$?
if [ -n "$kept" ] && [ "$status" -eq 0 ] && [ -f "$kept" ]; then
  cp -- "$kept" "$PROOFLOCK_KEEP" || status=1
fi
exit "$status"
