/* prooflock: what the HOL Light worker needs of the kernel that OCaml's libraries do not offer. */
#include <sys/prctl.h>
#include <caml/mlvalues.h>

/* No process of this user may ptrace the worker, read or write its memory or open its file
   descriptors through /proc: a checked file's shells cannot reach the worker or its checks. */
value prooflock_nondumpable(value unit) { return Val_int(prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)); }

/* Processes orphaned below the worker (a check's setsid escapees) become its children. */
value prooflock_subreaper(value unit) { return Val_int(prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)); }
