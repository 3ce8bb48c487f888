#!/bin/sh
# Builds prooflock's HOL Light replayer in the current directory: HOL Light's own lib.ml and
# fusion.ml (unchanged, from HOLLIGHT_DIR) and replay.ml, read with HOL Light's syntax (camlp5 and
# pa_j), then the server loop (replay_server.ml, plain OCaml). Native code, no toplevel: the
# replayer can run nothing but the kernel and the checker.
set -eu
HOL=${HOLLIGHT_DIR:-/usr/share/hol-light}
{
  echo 'set_jrh_lexer;;'
  echo 'open Num;;'
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
ocamlopt -I +camlp-streams -pp ./pp.sh -w -a -c replay_core.ml
ocamlopt -c replay_server.ml
ocamlopt nums.cmxa unix.cmxa replay_core.cmx replay_server.cmx -o replay
