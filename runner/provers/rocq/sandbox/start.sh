# Starts the Rocq worker: builds it from srv/ unless a built copy was shipped, then runs it as
# coqc runs (`-q -noglob -Q . "" Artifact.v`; Artifact.v holds the prefix to load first).
set -u
BIN=srv/prooflock-rocq-server
MODULES="analyze values validate checkFlags checkTypes checkInductive mod_checking check_stat"
if [ ! -s "$BIN" ]; then
    sources=""
    for m in $MODULES; do sources="$sources $m.mli $m.ml"; done
    if ! (cd srv && ocamlfind ocamlopt -rectypes -thread -w -a -package coq-core.toplevel \
            -linkpkg -linkall $sources server.ml -o prooflock-rocq-server) > srv/build.log 2>&1
    then
        tail -n 20 srv/build.log
        exit 1
    fi
    rm -f srv/*.cm[iox] srv/*.o
fi
chmod +x "$BIN"
exec "$BIN" -q -noglob -Q . "" Artifact.v
