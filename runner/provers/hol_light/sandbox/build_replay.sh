#!/bin/sh
# Builds prooflock's HOL Light replayer in the current directory: HOL Light's own lib.ml and
# fusion.ml (unchanged, from HOLLIGHT_DIR) and replay.ml, read with HOL Light's syntax (camlp5 and
# pa_j), then the server loop (replay_server.ml, plain OCaml). Native code, no toplevel: the
# replayer can run nothing but the kernel and the checker.
set -eu
HOL=${HOLLIGHT_DIR:-/usr/share/hol-light}
if [ -f "$HOL/hol_lib.ml" ]; then
  # 3.0.0 (OCaml 5): lib.ml's bignums are HOL Light's own Bignum (its bignum_zarith.ml over
  # zarith, shipped as bytecode and source), which hol_lib.ml includes before lib.ml; OCaml 5
  # keeps unix and zarith in directories of their own.
  cp "$HOL/bignum_zarith.ml" bignum.ml
  ocamlopt -I +zarith -w -a -c bignum.ml
  bignums='include Bignum;;'
  incs='-I +zarith -I +unix'
  libs='zarith.cmxa unix.cmxa bignum.cmx'
else
  bignums='open Num;;'
  incs=''
  libs='nums.cmxa unix.cmxa'
fi
{
  echo 'set_jrh_lexer;;'
  echo "$bignums"
  # printers need the toplevel; the replayer prints nothing of lib.ml's
  grep -v -e '^#install_printer' -e '^let print_fpf = ' "$HOL/lib.ml"
  grep -v '^needs ' "$HOL/fusion.ml"
  cat replay.ml
} > replay_core.ml
# pa_j announces itself on stdout before the AST: the binary AST starts at its magic number.
cat > pp.sh <<PP
#!/bin/sh
camlp5o -I $(ocamlc -where)/camlp-streams camlp_streams.cma $HOL/pa_j.cmo "\$1" > "\$1.pp" || exit 1
at=\$(grep -abo -m1 Caml1999 "\$1.pp" | head -n1 | cut -d: -f1)
[ -n "\$at" ] || exit 1
tail -c +\$((at + 1)) "\$1.pp"
PP
chmod +x pp.sh
# shellcheck disable=SC2086 # the lists are split on purpose
ocamlopt -I +camlp-streams $incs -pp ./pp.sh -w -a -c replay_core.ml
# shellcheck disable=SC2086
ocamlopt $incs -c replay_server.ml
# shellcheck disable=SC2086
ocamlopt $incs $libs replay_core.cmx replay_server.cmx -o replay
