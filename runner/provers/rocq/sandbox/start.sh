# Starts the Rocq worker: builds it from srv/ unless a built copy was shipped, then runs it as
# coqc runs (`-q -Q . "" Artifact.v`; Artifact.v holds the prefix to load first; the worker
# writes no .glob itself).
# It links coqchk's own checker modules, from Debian's coq source package, installed by
# images/rocq/checker-sources (in the rocq image; on a host for the local backend).
set -u
BIN=srv/prooflock-rocq-server
CHECKER=/usr/share/prooflock/coq-checker
MODULES="analyze values validate checkFlags checkTypes checkInductive mod_checking check_stat"
# What a shipped binary must have been built against: the same coq-core, compiler and libc.
here=$( (ocamlfind ocamlopt -version; ldd --version | head -n 1;
         cat /usr/lib/ocaml/coq-core/kernel/kernel.cmxa /usr/lib/ocaml/coq-core/META \
             "$CHECKER"/*.ml "$0") 2>&1 | md5sum)
# Builds the kit kept (srv/cand/N/): the one built against this sandbox's coq-core, if any.
for cand in srv/cand/*; do
    if [ -s "$cand/prooflock-rocq-server" ] && [ "$(cat "$cand/build.id")" = "$here" ]; then
        mv "$cand/prooflock-rocq-server" "$BIN" && cp "$cand/build.id" srv/build.id
        break
    fi
done
rm -rf srv/cand
if [ -s "$BIN" ] && [ "$(cat srv/build.id 2>/dev/null)" != "$here" ]; then
    rm -f "$BIN"
fi
if [ ! -s "$BIN" ]; then
    sources=""
    for m in $MODULES; do
        if ! cp "$CHECKER/$m.mli" "$CHECKER/$m.ml" srv/ 2>/dev/null; then
            echo "no coqchk sources in $CHECKER (run images/rocq/checker-sources)" > srv/build.log
            tail -n 1 srv/build.log
            exit 1
        fi
        sources="$sources $m.mli $m.ml"
    done
    # One hook in coqchk's Mod_checking, the rest is coqchk's own: the opaque proofs whose
    # bodies this process leaves to another of the re-check's processes (server.ml,
    # share_proofs). Its line must be there exactly once, or the worker is not built.
    if [ "$(grep -c '^    | Some bd ->$' srv/mod_checking.ml)" != 1 ]; then
        echo "coqchk's Mod_checking has no single body check to hook" > srv/build.log
        tail -n 1 srv/build.log
        exit 1
    fi
    sed -i -e '/^    | Some bd ->$/i \    | Some _ when !skip_body cb -> ()' \
        -e '/^let set_indirect_accessor /a let skip_body : (constant_body -> bool) ref = ref (fun _ -> false)' \
        srv/mod_checking.ml
    echo 'val skip_body : (Declarations.constant_body -> bool) ref' >> srv/mod_checking.mli
    if ! (cd srv && ocamlfind ocamlopt -rectypes -thread -w -a -package coq-core.toplevel \
            -linkpkg -linkall $sources server.ml -o prooflock-rocq-server) > srv/build.log 2>&1
    then
        tail -n 20 srv/build.log
        exit 1
    fi
    rm -f srv/*.cm[iox] srv/*.o
    for m in $MODULES; do rm -f "srv/$m.ml" "srv/$m.mli"; done
    printf '%s' "$here" > srv/build.id
fi
chmod +x "$BIN"
# Transparent huge pages for malloc's large blocks (the OCaml heaps): a child forked per check
# then faults in 2 MB at a time, not 4 kB (half the page faults, a tenth less CPU per run).
GLIBC_TUNABLES=glibc.malloc.hugetlb=1
export GLIBC_TUNABLES
# Coq starts its helper programs (`par:`'s tactic workers, ...) from the directory of the
# running executable, with its arguments: Debian's, beside the worker.
bindir=$(dirname "$(command -v coqc)")
for helper in coqtacticworker coqproofworker coqqueryworker; do
    ln -sf "$bindir/$helper.opt" "srv/$helper.opt"
done
exec "$BIN" -q -Q . "" Artifact.v
