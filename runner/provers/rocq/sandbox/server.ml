(* The warm Rocq worker: coqc's own compile and coqchk's own checks, in forks of a parent that
   has a file's leading `Require`s loaded.

   The parent (P) starts Coq exactly as `coqc -q -Q . "" Artifact.v` does (library
   `Artifact`, the Prelude), then runs the prefix the kit wrote to Artifact.v. Per check it
   forks, from that same pristine state:
   - K1, the compile: coqc's loop (Vernac.load_vernac_core, with the kit's refusals checked on
     Coq's own parse of each sentence) over the file with its prefix blanked, so every
     location is the file's own; then coqc's end (pending proofs, Library.save_library_to);
   - K2, the audit, once K1 has ended: coqchk's checking modules (checker/, from Coq 8.16.1,
     LGPL-2.1, unchanged but for one hook start.sh adds: the opaque proofs a process leaves to
     another when a long re-check is split over several, see [share_proofs]) validate and
     re-check Artifact.vo against the parent's libraries
     and print coqchk's trace and context summary; the axioms the library's constants reach are
     collected by Print Assumptions' traversal (memoized per library object in P, which also
     takes what the kit learned from other workers and earlier runs, see [learn]); a target
     statement is elaborated before anything of the file is loaded and compared with the
     theorem the .vo holds.
   The base worker (empty prefix) serves a file with another prefix through a sub-parent: a
   fork of P that loaded exactly that prefix and then serves as P does (the few most recently
   used are kept). Children report on a pipe only their parent holds, their output goes to
   files, and the work dir is cleaned before each check: nothing a check does survives it.
   Each check has its own K1 and K2, never reused; the next check's pair is forked as soon as
   a check was answered (while the kit reads the reply) and waits, idle, until its check starts:
   forks of the same pristine parent as forks at the check's start would be.

   Wire format (stdin/stdout; the checks' processes hold neither):
     ready:   "\n@@PROOFLOCK-ROCQ-READY <ok|failed> <boot_ms>\n"
     request: "CHECK <nonce> <timeout_ms> <fields>\n", then per field "<name> <len>\n<bytes>"
              (an optional field "memo": MEMO lines to adopt first, as srv/memo at boot)
     reply:   "\n@@<nonce> <TAG> <len>\n<bytes>" ... "\n@@<nonce> DONE\n"
   PROOFLOCK_ROCQ_PROFILE=1 prints CPU/wall marks of each phase into the children's output. *)

let artifact_v = "Artifact.v"
let artifact_vo = "Artifact.vo"

(* ------------------------------------------------------------------------------------------ *)
(* Small helpers *)

let read_all path =
  try
    let ic = open_in_bin path in
    let n = in_channel_length ic in
    let s = really_input_string ic n in
    close_in ic;
    s
  with Sys_error _ -> ""

let write_all path data =
  let oc = open_out_bin path in
  output_string oc data;
  close_out oc

let remove path = try Sys.remove path with Sys_error _ -> ()

let rec remove_tree path =
  match (Unix.lstat path).Unix.st_kind with
  | Unix.S_DIR ->
    Array.iter (fun n -> remove_tree (Filename.concat path n)) (try Sys.readdir path with _ -> [||]);
    (try Unix.rmdir path with Unix.Unix_error _ -> ())
  | _ -> remove path
  | exception Unix.Unix_error _ -> ()

(* What the places a check can write held once the worker was up, entry by entry and
   recursively (the sandbox keeps them per worker). Before and after each check everything
   else is removed: files, directories, links, fifos, System V IPC objects (its own namespace,
   shared by every check of this worker). An entry that was there and changed (its contents,
   kind, or where a link points) cannot be put back: the reply then asks the kit to retire the
   worker, so no later check sees it. *)
(* The places besides the work dir, and the IPC namespace, are the sandbox's own only where the
   kit says so (PROOFLOCK_PRIVATE_SCRATCH=1: a container, bubblewrap). Unsandboxed they are the
   host's, with other programs' files and shared memory in them: those are never touched. *)
let private_scratch = Sys.getenv_opt "PROOFLOCK_PRIVATE_SCRATCH" = Some "1"
let scratch = "." :: (if private_scratch then ["/tmp"; "/dev/shm"; "/dev/mqueue"] else [])
(* Rewritten whole by the worker for every check (removed first: a check may leave a link). *)
let rewritten = [Filename.concat "." artifact_v]

type stamp = Entry of Unix.file_kind * int * int * float * int | Link of string

let stamp path =
  match Unix.lstat path with
  | { Unix.st_kind = Unix.S_LNK; _ } -> Some (Link (try Unix.readlink path with _ -> ""))
  | { Unix.st_kind = Unix.S_DIR as k; st_ino; st_perm; _ } -> Some (Entry (k, st_ino, 0, 0., st_perm))
  | { Unix.st_kind; st_ino; st_size; st_mtime; st_perm; _ } ->
    Some (Entry (st_kind, st_ino, st_size, st_mtime, st_perm))
  | exception Unix.Unix_error _ -> None

let entries dir = try Array.to_list (Sys.readdir dir) with Sys_error _ -> []

(* Every path under the scratch places, parents before their contents. *)
let rec walk f dir =
  List.iter
    (fun name ->
       let path = Filename.concat dir name in
       f path;
       match (Unix.lstat path).Unix.st_kind with
       | Unix.S_DIR -> walk f path
       | _ -> ()
       | exception Unix.Unix_error _ -> ())
    (entries dir)

let kept : (string, stamp option) Hashtbl.t = Hashtbl.create 64

(* System V IPC objects by kind (ipcrm's flag) and id, from /proc/sysvipc. *)
let ipc_objects () =
  if not private_scratch then [] else
  List.concat_map
    (fun (file, flag) ->
       match open_in ("/proc/sysvipc/" ^ file) with
       | exception Sys_error _ -> []
       | ic ->
         let rec rows acc =
           match input_line ic with
           | exception End_of_file -> close_in ic; List.rev acc
           | line ->
             (match List.filter (( <> ) "") (String.split_on_char ' ' line) with
              | _key :: id :: _ when int_of_string_opt id <> None -> rows ((flag, id) :: acc)
              | _ -> rows acc)
         in
         rows [])
    ["shm", "-m"; "sem", "-s"; "msg", "-q"]

let kept_ipc = ref []

let remember_work_dir () =
  Hashtbl.reset kept;
  List.iter (walk (fun path -> Hashtbl.replace kept path (stamp path))) scratch;
  kept_ipc := ipc_objects ()

let remove_ipc objects =
  let args = List.concat_map (fun (flag, id) -> [flag; id]) objects in
  if args <> [] then begin
    let null = Unix.openfile "/dev/null" [Unix.O_RDWR] 0 in
    (match Unix.create_process "ipcrm" (Array.of_list ("ipcrm" :: args)) null null null with
     | pid -> (try ignore (Unix.waitpid [] pid) with Unix.Unix_error _ -> ())
     | exception Unix.Unix_error _ -> ());
    Unix.close null
  end

(* Everything a check left removed; whether it changed something that was there before. *)
let clean_work_dir () =
  List.iter remove rewritten;
  let changed = ref false in
  List.iter
    (walk (fun path ->
         match Hashtbl.find_opt kept path with
         | None -> remove_tree path
         | Some before ->
           if stamp path <> before && not (List.mem path rewritten) then changed := true))
    scratch;
  Hashtbl.iter (fun path before -> if stamp path <> before && not (List.mem path rewritten)
                 then changed := true) kept;
  remove_ipc (List.filter (fun o -> not (List.mem o !kept_ipc)) (ipc_objects ()));
  !changed

let flush_everything () =
  Format.pp_print_flush !Topfmt.std_ft ();
  Format.pp_print_flush !Topfmt.err_ft ();
  Format.pp_print_flush Format.std_formatter ();
  Format.pp_print_flush Format.err_formatter ();
  flush_all ()

(* A child's end: its output flushed, its exit code and CPU time written after its report
   (the parent then need not wait for the kernel to tear the process down), none of the
   parent's exit handlers run. *)
let child_exit w code =
  flush_everything ();
  let t = Unix.times () in
  let cpu = int_of_float ((t.Unix.tms_utime +. t.Unix.tms_stime) *. 1000.) in
  let trailer = Bytes.of_string (Printf.sprintf "\n@@END %d %d\n" code cpu) in
  (try ignore (Unix.write w trailer 0 (Bytes.length trailer)); Unix.close w with _ -> ());
  Unix._exit code

let now_ms () = Unix.gettimeofday () *. 1000.

let profile = Sys.getenv_opt "PROOFLOCK_ROCQ_PROFILE" <> None
let mark what =
  if profile then Printf.eprintf "@@T %s %.1f %.1f\n%!" what (Sys.time () *. 1000.) (now_ms ())

(* Output beyond this is cut: the kit keeps a few MB per check at most. *)
let output_cap = 4 * 1024 * 1024  (* as the backends cap a process's output *)

let capped s = if String.length s <= output_cap then s else String.sub s 0 output_cap

(* Run [f] with fds 1 and 2 sent to files; the parent keeps its own. *)
let with_redirect ~out ~err f =
  flush_everything ();
  let saved_out = Unix.dup Unix.stdout and saved_err = Unix.dup Unix.stderr in
  let fd_out = Unix.openfile out [Unix.O_WRONLY; Unix.O_CREAT; Unix.O_TRUNC] 0o600 in
  let fd_err = Unix.openfile err [Unix.O_WRONLY; Unix.O_CREAT; Unix.O_TRUNC] 0o600 in
  Unix.dup2 fd_out Unix.stdout;
  Unix.dup2 fd_err Unix.stderr;
  Unix.close fd_out;
  Unix.close fd_err;
  let restore () =
    flush_everything ();
    Unix.dup2 saved_out Unix.stdout;
    Unix.dup2 saved_err Unix.stderr;
    Unix.close saved_out;
    Unix.close saved_err
  in
  match f () with
  | v -> restore (); v
  | exception e -> restore (); raise e

(* ------------------------------------------------------------------------------------------ *)
(* The memory cgroup's OOM-kill count, so a child the kernel killed for memory is reported as
   such (from the cgroup, never from what the child printed). None when not readable. *)

let oom_kills () =
  let count_in path key =
    match open_in path with
    | exception Sys_error _ -> None
    | ic ->
      let rec loop () =
        match input_line ic with
        | exception End_of_file -> None
        | line ->
          (match String.split_on_char ' ' line with
           | [k; v] when k = key -> int_of_string_opt v
           | _ -> loop ())
      in
      let r = loop () in
      close_in ic;
      r
  in
  match count_in "/sys/fs/cgroup/memory.events" "oom_kill" with
  | Some n -> Some n
  | None -> count_in "/sys/fs/cgroup/memory/memory.oom_control" "oom_kill"

(* ------------------------------------------------------------------------------------------ *)
(* Children: forked with their output in files and a private pipe back to the parent. *)

type ended = Exited of int | Signaled of int | Timed_out | Memory

type child = {
  ended : ended;
  report : string;  (* what the child wrote on its private pipe *)
  cpu_ms : int;
  wall_ms : int;
}

let devnull () = Unix.openfile "/dev/null" [Unix.O_RDWR] 0

let children_cpu () =
  let t = Unix.times () in
  t.Unix.tms_cutime +. t.Unix.tms_cstime

(* Children that ended with a trailer, reaped later, off the check's critical path. *)
let zombies = ref []

let reap_zombies () =
  zombies :=
    List.filter
      (fun pid ->
         match Unix.waitpid [Unix.WNOHANG] pid with
         | 0, _ -> true
         | _ -> false
         | exception Unix.Unix_error _ -> false)
      !zombies

let trailer = Str.regexp "\n@@END \\([0-9]+\\) \\([0-9]+\\)\n$"

let write_fd fd s =
  let b = Bytes.unsafe_of_string s in
  let rec go off =
    if off < Bytes.length b then go (off + Unix.write fd b off (Bytes.length b - off))
  in
  go 0

(* Pipe ends only a parent may hold (to its sub-parents, to its spare children): a child
   closes them all before anything else, so no check's code can reach another process. *)
let parent_fds : Unix.file_descr list ref = ref []
let hold fd = parent_fds := fd :: !parent_fds
let release fd =
  parent_fds := List.filter (fun f -> f <> fd) !parent_fds;
  (try Unix.close fd with Unix.Unix_error _ -> ())
let close_parent_fds () =
  List.iter (fun fd -> try Unix.close fd with Unix.Unix_error _ -> ()) !parent_fds;
  parent_fds := []

(* What a forked child is told when its check starts: a compile, or an audit (its target, and
   which of the re-check's [shards] processes it is: 0 also reports, see [check_library]). *)
type audit = { target : (string * string list * string) option; shard : int; shards : int }
type go = Compile | Audit of audit

(* A child forked ahead of its check: it waits, doing nothing, until [go] sends it the check.
   Forking is a large part of a check's cost; a parent forks its next children while the kit
   reads the last reply, and they are forks of the same pristine state a fork at the check's
   start would be. *)
type forked = { pid : int; report : Unix.file_descr; start : Unix.file_descr }

(* After a minor collection the minor heap (coqc's is 256 MB) holds only garbage, yet its pages
   stay resident: each fork copies their page tables and each child's first writes copy them
   again. Gc.set reallocates the minor heap only on a change of size, and glibc maps one this
   large afresh: so a size one page off swaps in an untouched heap, and the parent forks about
   half as much memory. The size alternates; the GC behaves as before. Swapping costs some
   milliseconds (OCaml's page table), so between checks it waits until the parent has written
   [enough] words into the heap since the last swap. *)
let swapped_at = ref neg_infinity
let fresh_minor_heap ?(enough = 0.) () =
  if Gc.minor_words () -. !swapped_at >= enough then begin
    let gc = Gc.get () in
    let page = 4096 / (Sys.word_size / 8) in
    let words = gc.Gc.minor_heap_size in
    let other = if words / page mod 2 = 0 then words + page else words - page in
    Gc.set { gc with Gc.minor_heap_size = other };
    swapped_at := Gc.minor_words ()
  end

(* With the major GC off, a check's garbage is never freed: Nia.v's re-check grew to 4 GB that
   way, where coqchk with its GC on peaks at 745 MB. So once a child's heap has grown by half
   of what its memory limit leaves, the GC is back at the parent's setting. A usual check never
   grows that far, so it keeps the cheap fork. The limit is the sandbox's cgroup limit or its
   address-space limit, whichever is lower. A CPU-time timer looks; it ticks only while the
   child computes, so it never interrupts a blocking call. *)
let first_line path =
  match open_in path with
  | exception Sys_error _ -> None
  | ic ->
    Fun.protect ~finally:(fun () -> close_in_noerr ic) (fun () ->
      try Some (input_line ic) with End_of_file -> None)

(* cgroup v2's memory.max ("max": none), else v1's limit_in_bytes (about 2^63: none). *)
let cgroup_limit () =
  let read path = Option.bind (first_line path) (fun s -> float_of_string_opt (String.trim s)) in
  let limit =
    match read "/sys/fs/cgroup/memory.max" with
    | Some _ as v2 -> v2
    | None -> read "/sys/fs/cgroup/memory/memory.limit_in_bytes"
  in
  Option.bind limit (fun bytes -> if bytes < 2e18 then Some bytes else None)

(* The first line of [path] that starts with [prefix]. *)
let line_starting path prefix =
  match open_in path with
  | exception Sys_error _ -> None
  | ic ->
    Fun.protect ~finally:(fun () -> close_in_noerr ic) (fun () ->
      let rec find () =
        match input_line ic with
        | exception End_of_file -> None
        | line when String.starts_with ~prefix line -> Some line
        | _ -> find ()
      in
      find ())

(* /proc/self/limits: "Max address space  <soft>  <hard>  bytes" ("unlimited" reads as None). *)
let address_space_limit () =
  Option.bind (line_starting "/proc/self/limits" "Max address space") (fun line ->
      match List.filter (( <> ) "") (String.split_on_char ' ' line) with
      | _ :: _ :: _ :: soft :: _ -> float_of_string_opt soft
      | _ -> None)

let heap_bytes () = float_of_int ((Gc.quick_stat ()).Gc.heap_words * (Sys.word_size / 8))

let gc_off_budget () =
  let limits = List.filter_map (fun f -> f ()) [cgroup_limit; address_space_limit] in
  match limits with
  | [] -> 2e9
  | first :: rest ->
    (* Once on, the GC's first cycle copies the parent's heap it marks: count it twice. *)
    Float.max 128e6 ((List.fold_left Float.min first rest -. 2. *. heap_bytes ()) /. 2.)

let collect_again_past ~grown ~collecting =
  let start = heap_bytes () in
  let stop = { Unix.it_interval = 0.; it_value = 0. } in
  let look _ =
    if heap_bytes () -. start > grown then begin
      ignore (Unix.setitimer Unix.ITIMER_VIRTUAL stop);
      Gc.set { (Gc.get ()) with Gc.space_overhead = collecting };
      Gc.full_major ()  (* at once: a cycle paced by allocation would let the heap grow on *)
    end
  in
  Sys.set_signal Sys.sigvtalrm (Sys.Signal_handle look);
  ignore (Unix.setitimer Unix.ITIMER_VIRTUAL { Unix.it_interval = 0.2; it_value = 0.2 })

(* [body go w] runs in the child with its report pipe [w]; it must end the process itself. *)
let fork_child ~out ~err (body : go -> Unix.file_descr -> unit) =
  let r, w = Unix.pipe ~cloexec:true () in
  let start_r, start_w = Unix.pipe ~cloexec:true () in
  flush_everything ();
  match Unix.fork () with
  | 0 ->
    (* A child lives for one check: a major GC cycle there would mark (and so copy, page by
       page) the parent's whole heap for nothing. A heavy check turns it back on (below). *)
    let collecting = (Gc.get ()).Gc.space_overhead in
    Gc.set { (Gc.get ()) with Gc.space_overhead = 20_000 };
    (* Under a memory limit the kernel must kill a check, never the worker that forked it. *)
    (try write_all "/proc/self/oom_score_adj" "1000" with _ -> ());
    close_parent_fds ();
    Unix.close r;
    Unix.close start_w;
    let null = devnull () in
    List.iter (Unix.dup2 null) [Unix.stdin; Unix.stdout; Unix.stderr];
    Unix.close null;
    let go =
      match (Marshal.from_channel (Unix.in_channel_of_descr start_r) : go) with
      | go -> go
      | exception _ -> Unix._exit 0  (* its parent went, or forked a fresh child instead *)
    in
    Unix.close start_r;
    mark "forked";
    (* The re-check's processes run at once: each has its share of the memory. *)
    let sharing = match go with Audit a -> a.shards | Compile -> 1 in
    collect_again_past ~grown:(gc_off_budget () /. float_of_int sharing) ~collecting;
    let fd_out = Unix.openfile out [Unix.O_WRONLY; Unix.O_CREAT; Unix.O_TRUNC] 0o600 in
    let fd_err = Unix.openfile err [Unix.O_WRONLY; Unix.O_CREAT; Unix.O_TRUNC] 0o600 in
    Unix.dup2 fd_out Unix.stdout;
    Unix.dup2 fd_err Unix.stderr;
    List.iter Unix.close [fd_out; fd_err];
    (try body go w with _ -> ());
    child_exit w 120
  | pid ->
    Unix.close w;
    Unix.close start_r;
    hold r;
    hold start_w;
    { pid; report = r; start = start_w }

let discard child =
  (try Unix.kill child.pid Sys.sigkill with Unix.Unix_error _ -> ());
  release child.report;
  release child.start;
  (try ignore (Unix.waitpid [] child.pid) with Unix.Unix_error _ -> ())

(* A forked child that is still waiting for its check (one the kernel killed meanwhile, or
   that went, is discarded). *)
let waiting child =
  match Unix.waitpid [Unix.WNOHANG] child.pid with
  | 0, _ -> true
  | _ -> discard child; false
  | exception Unix.Unix_error _ -> discard child; false

type running = { child : forked; kills_before : int option; cpu_before : float; started : float }

(* Start [child] on its check. *)
let start_forked child go =
  reap_zombies ();
  let kills_before = oom_kills () in
  let cpu_before = children_cpu () and started = now_ms () in
  parent_fds := List.filter (fun f -> f <> child.report) !parent_fds;
  let message = Marshal.to_string (go : go) [] in
  (try write_fd child.start message with Unix.Unix_error _ -> ());
  release child.start;
  { child; kills_before; cpu_before; started }

(* Wait for a started child's end. *)
let await_forked ~deadline { child; kills_before; cpu_before; started } =
  let r = child.report and pid = child.pid in
  (
    let buf = Buffer.create 4096 and chunk = Bytes.create 65536 in
    let rec pump () =
      let left = (deadline -. now_ms ()) /. 1000. in
      if left <= 0. then false
      else
        match Unix.select [r] [] [] left with
        | [], _, _ -> false
        | _ ->
          (match Unix.read r chunk 0 (Bytes.length chunk) with
           | 0 -> true
           | n ->
             if Buffer.length buf < 16 * output_cap then Buffer.add_subbytes buf chunk 0 n;
             pump ())
        | exception Unix.Unix_error (Unix.EINTR, _, _) -> pump ()
    in
    let finished = pump () in
    Unix.close r;
    let report = Buffer.contents buf in
    let ended_well =
      let n = String.length report in
      match Str.search_backward trailer report (n - 1) with
      | at when finished && Str.match_end () = n ->
        Some (String.sub report 0 at, int_of_string (Str.matched_group 1 report),
              int_of_string (Str.matched_group 2 report))
      | _ -> None
      | exception (Not_found | Invalid_argument _) -> None
    in
    match ended_well with
    | Some (report, code, cpu_ms) ->
      zombies := pid :: !zombies;
      { ended = Exited code; report; cpu_ms; wall_ms = int_of_float (now_ms () -. started) }
    | None ->
    if not finished then (try Unix.kill pid Sys.sigkill with Unix.Unix_error _ -> ());
    let rec reap () =
      try snd (Unix.waitpid [] pid) with Unix.Unix_error (Unix.EINTR, _, _) -> reap ()
    in
    let status = reap () in
    let killed_for_memory () =
      match kills_before, oom_kills () with
      | Some a, Some b -> b > a
      | _ -> false
    in
    let ended =
      if not finished then Timed_out
      else
        match status with
        | Unix.WEXITED n -> Exited n
        | Unix.WSIGNALED s when s = Sys.sigkill && killed_for_memory () -> Memory
        | Unix.WSIGNALED s -> Signaled s
        | Unix.WSTOPPED s -> Signaled s
    in
    {
      ended;
      report;
      cpu_ms = int_of_float ((children_cpu () -. cpu_before) *. 1000.);
      wall_ms = int_of_float (now_ms () -. started);
    })

let run_forked ~deadline child go = await_forked ~deadline (start_forked child go)

(* ------------------------------------------------------------------------------------------ *)
(* Sentences the kit refuses, read from Coq's own parse of each sentence just before it runs
   (the kit refuses them before the file runs too; this is the second wall). *)

exception Refused of string

(* The kit's refusals (runner/provers/rocq/source.py says why each remains): what changes the
   kernel's theory in a way no re-check verifies, `Primitive` (coq/coq#18503), and `Load`,
   which would hide them. *)
let check_sentence (cmd : Vernacexpr.vernac_control) =
  let open Vernacexpr in
  let v = cmd.CAst.v in
  let theory n =
    match n with
    | ["Definitional"; "UIP"] | ["Cumulative"; "StrictProp"] -> true
    | _ -> false
  in
  match v.expr with
  | VernacLoad _ -> raise (Refused "Load")
  | VernacPrimitive _ -> raise (Refused "Primitive")
  | VernacRegister (_, RegisterCoqlib q)
    when Names.DirPath.equal (Libnames.qualid_path q) (Libnames.dirpath_of_string "kernel") ->
    raise (Refused "Register ... as kernel")
  | VernacSetOption (_, name, OptionSetTrue) when theory name ->
    raise (Refused ("Set " ^ String.concat " " name))
  | _ -> ()

(* ------------------------------------------------------------------------------------------ *)
(* K1: the compile, as coqc's Ccompile.compile does it (BuildVo), from the parent's state. *)

let check_pending_proofs filename =
  let open Pp in
  let pfs = Vernacstate.Declare.get_all_proof_names () [@ocaml.warning "-3"] in
  if not (CList.is_empty pfs) then
    CErrors.user_err
      (str "There are pending proofs in file " ++ str filename ++ str": "
       ++ (pfs |> List.rev |> prlist_with_sep pr_comma Names.Id.print) ++ str ".");
  let pm = Vernacstate.Declare.get_program () [@ocaml.warning "-3"] in
  let what_for = Pp.str ("file " ^ filename) in
  NeList.iter (fun pm -> Declare.Obls.check_solved_obligations ~what_for ~pm) pm

(* Vernac.load_vernac_core with the kit's refusals before each sentence runs. *)
let load_file ~state ~ldir file =
  let open Vernac.State in
  let in_chan = Util.open_utf8_file_in file in
  let dirpath = Some (Names.DirPath.to_string ldir) in
  let in_pa =
    Pcoq.Parsable.make ~loc:Loc.(initial (InFile {dirpath; file})) (Stream.of_channel in_chan)
  in
  let rec loop state =
    match Stm.parse_sentence ~doc:state.doc ~entry:Pvernac.main_entry state.sid in_pa with
    | None -> close_in in_chan; state
    | Some ast ->
      (* Vernac.checknav, as coqc's own loop does it *)
      if Vernacprop.is_navigation_vernac ast.CAst.v.Vernacexpr.expr
      && not (Vernacprop.is_reset ast.CAst.v.Vernacexpr.expr) then
        CErrors.user_err ?loc:ast.CAst.loc (Pp.str "Navigation commands forbidden in files.");
      (try check_sentence ast
       with Refused what ->
         CErrors.user_err ?loc:ast.CAst.loc
           Pp.(str ("`" ^ what ^ "` is not allowed in a checked file.")));
      let ast_loc = ast.CAst.loc in
      let state =
        try Flags.silently (fun () -> Vernac.process_expr ~state ast) ()
        with reraise ->
          let reraise, info = Exninfo.capture reraise in
          let info =
            match Loc.get_loc info with
            | None -> Option.cata (Loc.add_loc info) info ast_loc
            | Some _ -> info
          in
          Exninfo.iraise (reraise, info)
      in
      loop state
  in
  try loop state
  with any ->
    let e = Exninfo.capture any in
    close_in in_chan;
    Exninfo.iraise e

let compile_child ~state ~ldir w =
  let open Vernac.State in
  mark "k1-start";
  let code =
    try
      Topfmt.in_phase ~phase:Topfmt.CompilationPhase
        (fun () ->
           let state = load_file ~state ~ldir artifact_v in
           let _doc = Stm.join ~doc:state.doc in
           check_pending_proofs artifact_v;
           mark "k1-ran";
           Library.save_library_to Library.ProofsTodoNone ~output_native_objects:false ldir
             artifact_vo;
           mark "k1-saved")
        ();
      0
    with exn ->
      flush_everything ();
      Topfmt.print_err_exn exn;
      flush_everything ();
      if CErrors.is_anomaly exn then 129 else 1
  in
  child_exit w code

(* ------------------------------------------------------------------------------------------ *)
(* The axioms the library relies on: the traversal of `Print Assumptions` (vernac/assumptions.ml
   in Coq 8.16.1), over an explicit environment (the checked library on the parent's), from
   every constant the library declares. What a library object reaches never changes, so it is
   memoized: the parent keeps what its audits computed (they never read the artifact's data to
   compute it) and every later check starts from there. *)

module SS = Set.Make (String)

type audit_obj = Cst of Names.Constant.t | Mind of Names.MutInd.t | Var of Names.Id.t

module Obj_table = Hashtbl.Make (struct
    type t = audit_obj
    let equal a b =
      match a, b with
      | Cst x, Cst y -> Names.Constant.CanOrd.equal x y
      | Mind x, Mind y -> Names.MutInd.CanOrd.equal x y
      | Var x, Var y -> Names.Id.equal x y
      | _ -> false
    let hash = function
      | Cst x -> Names.Constant.CanOrd.hash x
      | Mind x -> (17 * Names.MutInd.CanOrd.hash x) + 1
      | Var x -> (31 * Names.Id.hash x) + 2
  end)

let obj_key = function
  | Cst c -> "C" ^ Names.KerName.to_string (Names.Constant.canonical c)
  | Mind m -> "I" ^ Names.KerName.to_string (Names.MutInd.canonical m)
  | Var id -> "V" ^ Names.Id.to_string id

(* Library objects → the axioms they reach. Lives in the parent; children inherit it by fork
   and report what they added (see [fresh_memo]), which the parent keeps. *)
let memo : SS.t Obj_table.t = Obj_table.create 4096
let fresh_memo : (audit_obj * SS.t) list ref = ref []

(* Reported entries for objects this process's environment does not hold (a base worker keeps
   what the children that loaded another prefix computed): a child that loads a prefix adopts
   those its own environment holds. *)
let pending_memo : (string, SS.t) Hashtbl.t = Hashtbl.create 1024

(* Every object of the current environment by [obj_key]. *)
let index_objects () =
  let env = Global.env () in
  let table = Hashtbl.create 65536 in
  Environ.fold_constants (fun c _ () -> Hashtbl.replace table (obj_key (Cst c)) (Cst c)) env ();
  Environ.fold_inductives (fun m _ () -> Hashtbl.replace table (obj_key (Mind m)) (Mind m)) env ();
  table

let index = ref None
let objects_by_key () =
  match !index with
  | Some table -> table
  | None -> let table = index_objects () in index := Some table; table

(* After loading a prefix: a fresh index, and the pending entries it now holds. *)
let adopt_pending () =
  index := None;
  if Hashtbl.length pending_memo > 0 then begin
    let table = objects_by_key () in
    Hashtbl.filter_map_inplace
      (fun key entries ->
         match Hashtbl.find_opt table key with
         | Some obj -> Obj_table.replace memo obj entries; None
         | None -> Some entries)
      pending_memo
  end

(* A kernel primitive: an operation (`Primitive add := #int63_add`) or one of the primitive
   types the kernel's retroknowledge names (`Primitive int := #int63_type`, which has no body). *)
let primitive env kn cb =
  match cb.Declarations.const_body with
  | Declarations.Primitive _ -> true
  | _ ->
    let rk = env.Environ.retroknowledge in
    List.exists (Option.cata (Names.Constant.CanOrd.equal kn) false)
      Retroknowledge.[rk.retro_int63; rk.retro_float64; rk.retro_array]

let audit ~env ~ldir ~own_opaque roots =
  let open Names in
  let open Declarations in
  let modcache = ref MPmap.empty in
  let rec search_mod_label lab = function
    | [] -> raise Not_found
    | (l, SFBmodule mb) :: _ when Label.equal l lab -> mb
    | _ :: fields -> search_mod_label lab fields
  in
  let rec search_cst_label lab = function
    | [] -> raise Not_found
    | (l, SFBconst cb) :: _ when Label.equal l lab -> cb
    | _ :: fields -> search_cst_label lab fields
  in
  let rec search_mind_label lab = function
    | [] -> raise Not_found
    | (l, SFBmind mind) :: _ when Label.equal l lab -> mind
    | _ :: fields -> search_mind_label lab fields
  in
  let open Mod_subst in
  let rec fields_of_functor f subs mp0 args = function
    | NoFunctor a -> f subs mp0 args a
    | MoreFunctor (mbid, _, e) ->
      (match args with
       | [] -> raise Not_found
       | mpa :: args ->
         let subs = join (map_mbid mbid mpa empty_delta_resolver) subs in
         fields_of_functor f subs mp0 args e)
  in
  let rec lookup_module_in_impl mp =
    match mp with
    | ModPath.MPfile _ | ModPath.MPbound _ -> Environ.lookup_module mp env
    | ModPath.MPdot (mp', lab') -> search_mod_label lab' (memoize_fields_of_mp mp')
  and memoize_fields_of_mp mp =
    match MPmap.find_opt mp !modcache with
    | Some l -> l
    | None ->
      let l = fields_of_mp mp in
      modcache := MPmap.add mp l !modcache;
      l
  and fields_of_mp mp =
    let mb = lookup_module_in_impl mp in
    let fields, inner_mp, subs = fields_of_mb empty_subst mb [] in
    let subs = if ModPath.equal inner_mp mp then subs else add_mp inner_mp mp mb.mod_delta subs in
    Modops.subst_structure subs fields
  and fields_of_mb subs mb args =
    match mb.mod_expr with
    | Algebraic expr -> fields_of_expression subs mb.mod_mp args expr
    | Struct sign -> fields_of_signature subs mb.mod_mp args sign
    | Abstract | FullStruct -> fields_of_signature subs mb.mod_mp args mb.mod_type
  and fields_of_signature x =
    fields_of_functor (fun subs mp0 args struc ->
        if args <> [] then raise Not_found;
        (struc, mp0, subs)) x
  and fields_of_expr subs mp0 args = function
    | MEident mp -> fields_of_mb subs (lookup_module_in_impl (subst_mp subs mp)) args
    | MEapply (me1, mp2) -> fields_of_expr subs mp0 (mp2 :: args) me1
    | MEwith _ -> raise Not_found
  and fields_of_expression x = fields_of_functor fields_of_expr x in
  let lookup_constant_in_impl cst fallback =
    try
      let mp, lab = KerName.repr (Constant.canonical cst) in
      search_cst_label lab (memoize_fields_of_mp mp)
    with Not_found ->
      (match fallback with
       | Some cb -> cb
       | None -> CErrors.anomaly Pp.(str "audit: unknown constant " ++ Constant.print cst))
  in
  let lookup_constant cst =
    if not (Environ.mem_constant cst env) then lookup_constant_in_impl cst None
    else
      let cb = Environ.lookup_constant cst env in
      if Declareops.constant_has_body cb then cb else lookup_constant_in_impl cst (Some cb)
  in
  let lookup_mind mind =
    if Environ.mem_mind mind env then Environ.lookup_mind mind env
    else
      try
        let mp, lab = KerName.repr (MutInd.canonical mind) in
        search_mind_label lab (memoize_fields_of_mp mp)
      with Not_found -> CErrors.anomaly Pp.(str "audit: unknown inductive " ++ MutInd.print mind)
  in
  let own_mp mp = DirPath.equal (ModPath.dp mp) ldir in
  let get_constant_body kn =
    let cb = lookup_constant kn in
    match cb.const_body with
    | Undef _ | Primitive _ -> None
    | Def c -> Some c
    | OpaqueDef o ->
      let _, _, dp, _ = Opaqueproof.repr o in
      (try
         if DirPath.equal dp ldir then Some (own_opaque o)
         else Some (fst (Global.force_proof Library.indirect_accessor o))
       with _ -> None)
  in
  let is_primitive kn = primitive env kn (lookup_constant kn) in
  let is_own = function
    | Cst c -> own_mp (Constant.modpath c)
    | Mind m -> own_mp (MutInd.modpath m)
    | Var _ -> true
  in
  let local : SS.t option Obj_table.t = Obj_table.create 256 in
  let rec closure obj =
    let known =
      match Obj_table.find_opt local obj with
      | Some (Some s) -> Some s
      | Some None -> Some SS.empty (* a recursive reference, within an inductive *)
      | None -> if is_own obj then None else Obj_table.find_opt memo obj
    in
    match known with
    | Some s -> s
    | None ->
      Obj_table.replace local obj None;
      let s =
        match obj with
        | Cst kn ->
          (match get_constant_body kn with
           | None when not (is_own obj) && is_primitive kn -> SS.empty
           | None -> SS.singleton ("AXIOM " ^ Constant.to_string kn)
           | Some body -> refs Context.Rel.empty SS.empty body)
        | Mind mind -> inductive_refs mind
        | Var id ->
          (match Environ.lookup_named id env with
           | Context.Named.Declaration.LocalAssum _ -> SS.singleton ("VARIABLE " ^ Id.to_string id)
           | Context.Named.Declaration.LocalDef (_, b, _) -> refs Context.Rel.empty SS.empty b
           | exception Not_found -> SS.singleton ("VARIABLE " ^ Id.to_string id))
      in
      Obj_table.replace local obj (Some s);
      if not (is_own obj) then begin
        Obj_table.replace memo obj s;
        fresh_memo := (obj, s) :: !fresh_memo
      end;
      s
  and refs ctx acc t =
    match Constr.kind t with
    | Constr.Var id -> SS.union acc (closure (Var id))
    | Constr.Const (kn, _) -> SS.union acc (closure (Cst kn))
    | Constr.Ind ((mind, _), _) | Constr.Construct (((mind, _), _), _) ->
      SS.union acc (closure (Mind mind))
    | Constr.Case (_, _, _, ([|_|], oty), _, c, [||]) when Vars.noccurn 1 oty ->
      (match Constr.kind c with
       | Constr.Const (kn, _) when not (Declareops.constant_has_body (lookup_constant kn)) ->
         SS.union acc (closure (Cst kn))
       | _ -> fold ctx acc t)
    | _ -> fold ctx acc t
  and fold ctx acc c =
    let open Context.Rel.Declaration in
    let f = refs in
    let g = Context.Rel.add in
    match Constr.kind c with
    | Constr.Rel _ | Constr.Meta _ | Constr.Var _ | Constr.Sort _ | Constr.Const _
    | Constr.Ind _ | Constr.Construct _ | Constr.Int _ | Constr.Float _ -> acc
    | Constr.Cast (c, _, t) -> f ctx (f ctx acc c) t
    | Constr.Prod (na, t, c) -> f (g (LocalAssum (na, t)) ctx) (f ctx acc t) c
    | Constr.Lambda (na, t, c) -> f (g (LocalAssum (na, t)) ctx) (f ctx acc t) c
    | Constr.LetIn (na, b, t, c) -> f (g (LocalDef (na, b, t)) ctx) (f ctx (f ctx acc b) t) c
    | Constr.App (c, l) -> Array.fold_left (f ctx) (f ctx acc c) l
    | Constr.Proj (_, c) -> f ctx acc c
    | Constr.Evar (_, l) -> List.fold_left (f ctx) acc l
    | Constr.Case (ci, u, pms, p, iv, c, bl) ->
      let mib = lookup_mind (fst ci.Constr.ci_ind) in
      let _, p, iv, c, bl = Inductive.expand_case_specif mib (ci, u, pms, p, iv, c, bl) in
      Array.fold_left (f ctx) (f ctx (Constr.fold_invert (f ctx) (f ctx acc p) iv) c) bl
    | Constr.Fix (_, (lna, tl, bl)) | Constr.CoFix (_, (lna, tl, bl)) ->
      let ctx' =
        CArray.fold_left2_i (fun i c n t -> g (LocalAssum (n, Vars.lift i t)) c) ctx lna tl
      in
      let fd = Array.map2 (fun t b -> (t, b)) tl bl in
      Array.fold_left (fun acc (t, b) -> f ctx' (f ctx acc t) b) acc fd
    | Constr.Array (_, t, def, ty) -> f ctx (f ctx (Array.fold_left (f ctx) acc t) def) ty
  and context_refs ctx acc ctxt =
    let open Context.Rel.Declaration in
    snd (Context.Rel.fold_outside (fun decl (ctx, acc) ->
        match decl with
        | LocalDef (_, c, t) -> (Context.Rel.add decl ctx, refs ctx (refs ctx acc t) c)
        | LocalAssum (_, t) -> (Context.Rel.add decl ctx, refs ctx acc t))
        ctxt ~init:(ctx, acc))
  and inductive_refs mind =
    let mib = lookup_mind mind in
    let param_ctx = mib.mind_params_ctxt in
    let nparam = List.length param_ctx in
    let acc = context_refs Context.Rel.empty SS.empty param_ctx in
    Array.fold_left
      (fun acc oib ->
         let arity_wo_param = List.rev (CList.skipn nparam (List.rev oib.mind_arity_ctxt)) in
         let acc = context_refs param_ctx acc arity_wo_param in
         Array.fold_left
           (fun acc cst_typ ->
              let param_ctx, cst_typ_wo_param = Term.decompose_prod_n_assum nparam cst_typ in
              refs param_ctx acc cst_typ_wo_param)
           acc oib.mind_user_lc)
      acc mib.mind_packets
  in
  List.fold_left (fun acc c -> SS.union acc (closure (Cst c))) SS.empty roots

(* ------------------------------------------------------------------------------------------ *)
(* K2: coqchk's checking of Artifact.vo (Check.intern_from_file and Safe_checking.import, on the
   parent's libraries instead of a fresh environment), its context summary, and the target. *)

type seg_univ = Univ.ContextSet.t * bool
type seg_proofs = Opaqueproof.opaque_proofterm option array

type summary_disk = {
  md_name : Names.DirPath.t;
  md_deps : (Names.DirPath.t * Safe_typing.vodigest) array;
  md_ocaml : string;
}

module Dyn = Dyn.Make ()
type obj = Dyn.t
type lib_objects = (Names.Id.t * obj) list
type library_disk = {
  md_compiled : Safe_typing.compiled_library;
  md_objects : lib_objects * lib_objects;
}

let marshal_in_segment ~value ~segment f ch =
  let () = LargeFile.seek_in ch segment.ObjFile.pos in
  let v =
    try
      let v = Analyze.parse_channel ch in
      let digest = Digest.input ch in
      if not (String.equal digest segment.ObjFile.hash) then raise_notrace Exit;
      v
    with _ -> CErrors.user_err Pp.(str "Corrupted file " ++ quote (str f))
  in
  Validate.validate value v;
  Obj.obj (Analyze.instantiate v)

type loaded = {
  sd : summary_disk;
  md : library_disk;
  table : seg_proofs;
  extra_univs : Univ.ContextSet.t;
  digest : Safe_typing.vodigest;
}

let load_vo f =
  let ch = System.with_magic_number_check (fun file -> ObjFile.open_in ~file) f in
  let seg name = ObjFile.get_segment ch ~segment:name in
  let seg_sd = seg "summary" and seg_md = seg "library" and seg_univs = seg "universes" in
  let seg_tasks = seg "tasks" and seg_opaque = seg "opaques" in
  ObjFile.close_in ch;
  let ch = open_in_bin f in
  let (sd : summary_disk) = marshal_in_segment ~value:Values.v_libsum ~segment:seg_sd f ch in
  let (md : library_disk) = marshal_in_segment ~value:Values.v_lib ~segment:seg_md f ch in
  let (univs : seg_univ option) =
    marshal_in_segment ~value:Values.v_univopaques ~segment:seg_univs f ch
  in
  let (tasks : Obj.t option) =
    marshal_in_segment ~value:Values.(Opt Any) ~segment:seg_tasks f ch
  in
  let (table : seg_proofs) =
    marshal_in_segment ~value:Values.v_opaquetable ~segment:seg_opaque f ch
  in
  close_in ch;
  System.check_caml_version ~caml:sd.md_ocaml ~file:f;
  if tasks <> None || univs <> None then
    CErrors.user_err Pp.(str "The file " ++ str f ++ str " is not a complete .vo file");
  { sd; md; table; extra_univs = Univ.ContextSet.empty;
    digest = Safe_typing.Dvo_or_vi seg_md.ObjFile.hash }

(* Check.indirect_accessor: the checked library's own proofs from its table; another library's
   (a functor it includes, say) as coqchk reads them from that library's .vo, here through
   Coq's own loader, which reads the same segment. *)
let opaque_accessor lib o =
  let sub, ci, dp, i = Opaqueproof.repr o in
  if not (Names.DirPath.equal dp lib.sd.md_name) then Global.force_proof Library.indirect_accessor o
  else
  let i = Opaqueproof.repr_handle i in
  let c =
    match lib.table.(i) with
    | None -> CErrors.user_err Pp.(str "Cannot access opaque delayed proof.")
    | Some c -> c
  in
  let c, prv = Discharge.cook_opaque_proofterm ci c in
  (List.fold_right Mod_subst.subst_mps sub c, prv)

(* The theorem the target names, in the checked library: Artifact.A.B.name. *)
let target_constant ldir name =
  match List.rev (String.split_on_char '.' name) with
  | [] -> None
  | last :: rev_mods ->
    (try
       let mp =
         List.fold_left
           (fun mp m -> Names.ModPath.MPdot (mp, Names.Label.make m))
           (Names.ModPath.MPfile ldir) (List.rev rev_mods)
       in
       Some (Names.Constant.make2 mp (Names.Label.make last))
     with _ -> None)

(* Burn universe ids the artifact used, so the target's fresh levels never share a name with
   the library's (both are named after the current library and a counter forked from P). *)
let skip_universe_ids univs =
  let top =
    Univ.Level.Set.fold
      (fun l acc ->
         match Univ.Level.name l with
         | Some g -> let _, _, n = Univ.UGlobal.repr g in max n acc
         | None -> acc)
      (Univ.ContextSet.levels univs) 0
  in
  let rec burn () =
    let _, _, n = Univ.UGlobal.repr (UnivGen.new_univ_global ()) in
    if n < top then burn ()
  in
  burn ()

let parse_and_run ~state text =
  let open Vernac.State in
  let pa = Pcoq.Parsable.make (Stream.of_string text) in
  let rec loop state =
    match Stm.parse_sentence ~doc:state.doc ~entry:Pvernac.main_entry state.sid pa with
    | None -> state
    | Some ast -> loop (Vernac.process_expr ~state ast)
  in
  loop state

(* The interpreter's state once the Prelude was loaded, before any prefix: the pristine session
   a target statement is elaborated in (saved at boot, inherited by every fork). *)
let pristine : Vernacstate.t option ref = ref None

(* Sentences run outside the document, from interpreter state [st]. *)
let interp_text ~st text =
  let pa = Pcoq.Parsable.make (Stream.of_string text) in
  let rec loop st =
    let entry = Pvernac.main_entry (Some (Vernacinterp.get_default_proof_mode ())) in
    match Pcoq.Entry.parse entry pa with
    | None -> st
    | Some ast -> loop (Vernacinterp.interp ~st ast)
  in
  loop st

(* The target, elaborated as the cold driver does: in the pristine session, after the target's
   own `requires` alone (`Require Import`), as `Definition __prooflock_target : Prop := <s>.`,
   before anything of the file is loaded. *)
let elaborate_target ~lib ~requires statement =
  skip_universe_ids
    (Univ.ContextSet.union (Safe_typing.univs_of_library lib.md.md_compiled) lib.extra_univs);
  let st = Option.get !pristine in
  Vernacstate.unfreeze_interp_state st;
  let run st text = try Ok (interp_text ~st text) with e when CErrors.noncritical e -> Error () in
  let imports = String.concat "" (List.map (fun r -> "Require Import " ^ r ^ ".\n") requires) in
  match run st imports with
  | Error () -> Error "REQUIRES"
  | Ok st ->
    (match run st ("Definition __prooflock_target : Prop := " ^ statement ^ ".") with
     | Error () -> Error "ELABORATE"
     | Ok _ ->
       let cst =
         Names.Constant.make2 (Global.current_modpath ()) (Names.Label.make "__prooflock_target")
       in
       (match (Environ.lookup_constant cst (Global.env ())).Declarations.const_body with
        | Declarations.Def c -> Ok c
        | _ -> Error "ELABORATE"))

(* MATCH when the named theorem's type is the target's body as Ltac's `constr_eq` sees it
   (syntactic, up to alpha-conversion and a consistent unification of universe levels). *)
let compare_target ~ldir ~env name body =
  match target_constant ldir name with
  | None -> "MISSING"
  | Some cst when not (Environ.mem_constant cst env) -> "MISSING"
  | Some cst ->
    (* The cold driver reads the body with `eval cbv delta [...]`, which drops casts. *)
    let rec strip c =
      match Constr.kind c with
      | Constr.Cast (c, _, _) -> strip c
      | _ -> Constr.map strip c
    in
    let sigma = Evd.from_env env in
    let sigma, thm = Evd.fresh_global env sigma (Names.GlobRef.ConstRef cst) in
    let thm_type = Retyping.get_type_of env sigma thm in
    (match EConstr.eq_constr_universes env sigma thm_type (EConstr.of_constr (strip body)) with
     | None -> "DIFFERS"
     | Some csts ->
       (match Evd.add_universe_constraints sigma csts with
        | _ -> "MATCH"
        | exception (UGraph.UniverseInconsistency _ | UState.UniversesDiffer) -> "DIFFERS"))

(* How coqchk (checker/checker.ml, explain_exn) reports an exception that ended its check: None
   for a rejection of the library (a type error, a universe inconsistency, ...), else the
   anomaly it prints, without its "Please report" part: the checker itself failed. *)
let coqchk_anomaly exn =
  let quoted s = "\"" ^ s ^ "\"" in
  match exn with
  | CErrors.UserError _ | Type_errors.TypeError _ | Type_errors.InductiveError _
  | CheckInductive.InductiveMismatch _ | UGraph.UniverseInconsistency _ | Failure _
  | Out_of_memory | Stack_overflow | Stream.Error _ | Sys.Break -> None
  | Stream.Failure -> Some "Anomaly: uncaught Stream.Failure."
  | Sys_error msg -> Some ("Anomaly: uncaught exception Sys_error " ^ quoted msg ^ ".")
  | Match_failure (file, line, char) ->
    Some (Printf.sprintf "Anomaly: Match failure in file %s at line %d character %d."
            (quoted file) line char)
  | Not_found -> Some "Anomaly: uncaught exception Not_found."
  | Invalid_argument s -> Some ("Anomaly: uncaught exception Invalid_argument " ^ quoted s ^ ".")
  | Assert_failure (file, line, char) ->
    Some (Printf.sprintf "Anomaly: assert failure (file %s, line %d, characters %d-%d)."
            (quoted file) line char (char + 6))
  | e when CErrors.is_anomaly e ->  (* an anomaly, or an exception no printer here handles *)
    Some ("Anomaly " ^ quoted (Pp.string_of_ppcmds (CErrors.print_no_report e)))
  | e ->  (* coqchk has no printer for it (Modops.ModuleTypingError, say) *)
    Some ("Anomaly " ^ quoted ("Uncaught exception " ^ Printexc.to_string e ^ "."))

(* The re-check split over [shards] processes. Each checks all that coqchk checks except the
   bodies of the other shards' opaque proofs: the kernel never unfolds an opaque proof, so no
   check depends on another's body, and together the shards check every body. Proofs go to
   shards largest first, each to the least loaded (a proof's size: its term's nodes, counted up
   to a cap), computed alike in every shard. The owner of each proof of the library's table. *)
let proof_owners (table : seg_proofs) shards =
  let cap = 1_000_000 in
  let size c =
    let n = ref 0 in
    let rec walk c = if !n < cap then begin incr n; Constr.iter walk c end in
    walk c;
    !n
  in
  let sized = Array.mapi (fun i p -> (i, match p with Some (c, _) -> size c | None -> 0)) table in
  Array.stable_sort (fun (_, a) (_, b) -> compare b a) sized;
  let load = Array.make shards 0 and owner = Array.make (Array.length table) 0 in
  Array.iter
    (fun (i, n) ->
       let least = ref 0 in
       Array.iteri (fun k l -> if l < load.(!least) then least := k) load;
       owner.(i) <- !least;
       load.(!least) <- load.(!least) + n + 1)
    sized;
  owner

(* Mod_checking's hook (the one line start.sh adds to coqchk's module): the bodies this shard
   leaves to others. Proofs of other libraries (a functor the file includes) are shard 0's. *)
let share_proofs lib ~shard ~shards =
  if shards > 1 then begin
    let owner = proof_owners lib.table shards in
    Mod_checking.skip_body :=
      (fun cb ->
         match cb.Declarations.const_body with
         | Declarations.OpaqueDef o ->
           let _, _, dp, i = Opaqueproof.repr o in
           let mine =
             if Names.DirPath.equal dp lib.sd.md_name then
               let i = Opaqueproof.repr_handle i in
               i >= Array.length owner || owner.(i) = shard
             else shard = 0
           in
           not mine
         | _ -> false)
  end

(* A shard other than 0 checked its share: it reports nothing more. *)
exception Share_checked

(* The re-check of Artifact.vo; its report goes to [w]; the exit code it would have (coqchk's:
   129 when the checker failed, with its anomaly in the report as CHECKER_ANOMALY). Shard 0
   reports; the others only check their share. *)
let check_library ~state ~target ~shard ~shards w =
    try
      fresh_memo := [];
      mark "k2-start";
      let lib = load_vo artifact_vo in
      mark "k2-loaded";
      let ldir = lib.sd.md_name in
      if not (Names.DirPath.equal ldir (Names.DirPath.make [Names.Id.of_string "Artifact"])) then
        CErrors.user_err Pp.(str "The compiled file is not library Artifact.");
      share_proofs lib ~shard ~shards;
      let state, target =
        match target with
        | _ when shard > 0 -> (state, None)
        | None -> (state, None)
        | Some (name, requires, statement) ->
          (* The pristine session from here on: the file's prefix is not loaded in it. *)
          let body = elaborate_target ~lib ~requires statement in
          (state, Some (name, body))
      in
      (* Libraries the file required that are not loaded here: load them as coqchk would
         (trusted Debian libraries, not checked again), after the target was read. *)
      let missing =
        List.filter (fun dep -> not (Library.library_is_loaded dep))
          (List.map fst (Array.to_list lib.sd.md_deps))
      in
      if missing <> [] then begin
        let text =
          "Require " ^ String.concat " " (List.map Names.DirPath.to_string missing) ^ "."
        in
        ignore state;
        ignore (interp_text ~st:(Vernacstate.freeze_interp_state ~marshallable:false) text)
      end;
      Mod_checking.set_indirect_accessor (opaque_accessor lib);
      let clib = lib.md.md_compiled in
      let mb = Safe_typing.module_of_library clib in
      let with_library env =
        let env = Environ.push_context_set ~strict:true (Safe_typing.univs_of_library clib) env in
        let env = Environ.push_context_set ~strict:true lib.extra_univs env in
        Modops.add_retroknowledge mb.Declarations.mod_retroknowledge env
      in
      (* coqchk's environment (checker.ml, make_senv): no VM, no native compiler, SProp
         allowed; each declaration's own flags are set as it is checked. *)
      let checker_flags env =
        Environ.set_typing_flags
          { (Environ.typing_flags env) with
            Declarations.enable_VM = false; enable_native_compiler = false;
            sprop_allowed = true; impredicative_set = false; indices_matter = false }
          env
      in
      let env = with_library (checker_flags (Global.env ())) in
      Flags.quiet := false;
      Feedback.msg_notice Pp.(str "Checking library: " ++ Names.DirPath.print ldir);
      let opac = Mod_checking.check_module env Names.Cmap.empty mb.Declarations.mod_mp mb in
      mark "k2-checked";
      if shard > 0 then raise_notrace Share_checked;
      Feedback.msg_notice Pp.(str "Modules were successfully checked");
      Check_stat.output_context := true;
      let env_full = Modops.add_module mb env in
      Check_stat.stats env_full opac;
      mark "k2-summary";
      Flags.quiet := true;
      flush_everything ();
      let own c = Names.DirPath.equal (Names.ModPath.dp (Names.Constant.modpath c)) ldir in
      let roots, primitives =
        Environ.fold_constants
          (fun c cb (roots, prims) ->
             if own c then (c :: roots, prims)
             else if primitive env_full c cb then (roots, c :: prims)
             else (roots, prims))
          env_full ([], [])
      in
      let found =
        audit ~env:env_full ~ldir ~own_opaque:(fun o -> fst (opaque_accessor lib o)) roots
      in
      mark "k2-audited";
      let lines =
        List.map (fun c -> "ROOT " ^ Names.Constant.to_string c) roots @ SS.elements found
        @ List.map (fun c -> "PRIMITIVE " ^ Names.Constant.to_string c) primitives
        @ List.map (fun (o, s) -> String.concat "\t" (("MEMO " ^ obj_key o) :: SS.elements s))
          !fresh_memo
      in
      write_fd w (String.concat "\n" lines ^ "\n");
      (match target with
       | None -> ()
       | Some (_, Error why) -> write_fd w ("TARGET " ^ why ^ "\n")
       | Some (name, Ok body) ->
         let env = Modops.add_module mb (with_library (Global.env ())) in
         write_fd w ("TARGET " ^ compare_target ~ldir ~env name body ^ "\n"));
      0
    with
    | Share_checked -> 0
    | exn ->
      flush_everything ();
      Topfmt.print_err_exn exn;
      flush_everything ();
      match coqchk_anomaly exn with
      | None -> 1
      | Some anomaly ->
        (try write_fd w ("CHECKER_ANOMALY " ^ String.concat " " (String.split_on_char '\n' anomaly)
                         ^ "\n")
         with Unix.Unix_error _ -> ());
        129

let checker_child ~state ~target ~shard ~shards w =
  child_exit w (check_library ~state ~target ~shard ~shards w)

(* ------------------------------------------------------------------------------------------ *)
(* A check's two children, forked from the parent at the check's start or, ahead of it, once
   the last check was answered (the spares: forks of the same pristine parent, which wait). *)

let compile_body ~state ~ldir _ w = compile_child ~state ~ldir w
let audit_body ~state go w =
  match go with
  | Audit { target; shard; shards } -> checker_child ~state ~target ~shard ~shards w
  | Compile -> child_exit w 120

let spare_compile : forked option ref = ref None
let spare_audit : forked option ref = ref None

let forget_spares () = spare_compile := None; spare_audit := None

(* The spare, if it still waits (it is taken either way), else a [fresh] fork. *)
let spare_or spare ~fresh =
  let waiting_spare =
    match !spare with
    | Some child -> spare := None; if waiting child then Some child else None
    | None -> None
  in
  match waiting_spare with
  | Some child -> child
  | None -> fresh ()

let run_spare spare ~deadline ~fresh go = run_forked ~deadline (spare_or spare ~fresh) go

let compile ~state ~ldir ~deadline =
  run_spare spare_compile ~deadline Compile
    ~fresh:(fun () -> fork_child ~out:"k1.out" ~err:"k1.err" (compile_body ~state ~ldir))

(* The CPUs this process may use at once: its affinity, within a CPU quota (docker's). *)
let usable_cpus () =
  let affinity =
    (* "Cpus_allowed_list:\t0-3,6" *)
    Option.map (fun line ->
        let list = String.trim (String.sub line 18 (String.length line - 18)) in
        let count range =
          match String.split_on_char '-' range with
          | [a; b] -> (try int_of_string b - int_of_string a + 1 with _ -> 1)
          | _ -> 1
        in
        List.fold_left (fun n r -> n + count r) 0 (String.split_on_char ',' list))
      (line_starting "/proc/self/status" "Cpus_allowed_list:")
  in
  (* cgroup v2's cpu.max ("max 100000": none), else v1's cfs quota and period (-1: none). *)
  let cpus q p =
    match float_of_string_opt (String.trim q), float_of_string_opt (String.trim p) with
    | Some q, Some p when q > 0. && p > 0. -> Some (int_of_float (Float.ceil (q /. p)))
    | _ -> None
  in
  let quota =
    match Option.map (String.split_on_char ' ') (first_line "/sys/fs/cgroup/cpu.max") with
    | Some [q; p] -> cpus q p
    | _ ->
      (match first_line "/sys/fs/cgroup/cpu/cpu.cfs_quota_us",
             first_line "/sys/fs/cgroup/cpu/cpu.cfs_period_us" with
       | Some q, Some p -> cpus q p
       | _ -> None)
  in
  max 1 (List.fold_left min max_int (List.filter_map Fun.id [affinity; quota]))

(* The audit: one process, or [shards] at once when the compile was long (the re-check costs
   about what the compile's kernel did). Shard 0 is the spare, forked ahead. The end of the
   first shard that failed (else shard 0's, with its report), the output that goes with it,
   and how many processes checked; the CPU time is all shards'. Split, the processes each hold
   the library: if one ran out of memory, one process checks again. *)
let rec check ~state ~deadline ~target ~shards =
  if shards <= 1 then begin
    let ended =
      run_spare spare_audit ~deadline (Audit { target; shard = 0; shards = 1 })
        ~fresh:(fun () -> fork_child ~out:"k2.out" ~err:"k2.err" (audit_body ~state))
    in
    (ended, read_all "k2.out" ^ read_all "k2.err", 1)
  end else begin
    let first =
      spare_or spare_audit
        ~fresh:(fun () -> fork_child ~out:"k2.out" ~err:"k2.err" (audit_body ~state))
    in
    let out k = if k = 0 then ("k2.out", "k2.err") else
        (Printf.sprintf "k2-%d.out" k, Printf.sprintf "k2-%d.err" k) in
    let children =
      first :: List.init (shards - 1) (fun k ->
          let o, e = out (k + 1) in
          fork_child ~out:o ~err:e (audit_body ~state))
    in
    let running =
      List.mapi (fun shard child -> start_forked child (Audit { target; shard; shards })) children
    in
    let rec await k acc = function
      | [] -> List.rev acc
      | r :: rest ->
        let ended = await_forked ~deadline r in
        if ended.ended = Exited 0 then await (k + 1) ((k, ended) :: acc) rest
        else begin
          List.iter (fun r -> discard r.child) rest;  (* the verdict is known: they go *)
          List.rev ((k, ended) :: acc)
        end
    in
    let ended = await 0 [] running in
    let shown, child =
      match List.find_opt (fun (_, c) -> c.ended <> Exited 0) ended with
      | Some failed -> failed
      | None -> List.hd ended
    in
    let cpu_ms = List.fold_left (fun n (_, c) -> n + c.cpu_ms) 0 ended in
    let wall_ms = List.fold_left (fun n (_, c) -> max n c.wall_ms) 0 ended in
    match child.ended with
    | Memory | Signaled _ -> check ~state ~deadline ~target ~shards:1
    | Exited _ | Timed_out ->
      let o, e = out shown in
      ({ child with cpu_ms; wall_ms }, read_all o ^ read_all e, shards)
  end

(* Between checks (the kit is reading the reply): the next check's children, forked now. *)
let fork_spares ~state ~ldir =
  fresh_minor_heap ~enough:524_288. ();  (* 4 MB written: a fork's ~0.4 ms more *)
  if !spare_compile = None then
    spare_compile := Some (fork_child ~out:"k1.out" ~err:"k1.err" (compile_body ~state ~ldir));
  if !spare_audit = None then
    spare_audit := Some (fork_child ~out:"k2.out" ~err:"k2.err" (audit_body ~state))

(* ------------------------------------------------------------------------------------------ *)
(* Requests *)

type request = {
  nonce : string;
  timeout_ms : int;
  fields : (string * string) list;
}

let field req name = List.assoc_opt name req.fields

let read_request () =
  match input_line stdin with
  | exception End_of_file -> None
  | line ->
    (match String.split_on_char ' ' (String.trim line) with
     | ["CHECK"; nonce; timeout_ms; count] ->
       let rec fields n acc =
         if n = 0 then List.rev acc
         else
           let header = input_line stdin in
           match String.split_on_char ' ' header with
           | [name; len] ->
             let data = really_input_string stdin (int_of_string len) in
             fields (n - 1) ((name, data) :: acc)
           | _ -> failwith ("bad field header " ^ header)
       in
       Some { nonce; timeout_ms = int_of_string timeout_ms;
              fields = fields (int_of_string count) [] }
     | _ -> failwith ("bad request " ^ line))

(* OCaml names the common signals by negative numbers of its own (Sys.sigkill is -7): a record
   says the system's (9). *)
let posix_signal s =
  let known = [
    Sys.sigabrt, 6; Sys.sigalrm, 14; Sys.sigfpe, 8; Sys.sighup, 1; Sys.sigill, 4;
    Sys.sigint, 2; Sys.sigkill, 9; Sys.sigpipe, 13; Sys.sigquit, 3; Sys.sigsegv, 11;
    Sys.sigterm, 15; Sys.sigusr1, 10; Sys.sigusr2, 12; Sys.sigbus, 7; Sys.sigtrap, 5;
    Sys.sigxcpu, 24; Sys.sigxfsz, 25; Sys.sigsys, 31;
  ] in
  match List.assoc_opt s known with Some n -> n | None -> s

let ended_words = function
  | Exited n -> Printf.sprintf "exited %d" n
  | Signaled s -> Printf.sprintf "signaled %d" (posix_signal s)
  | Timed_out -> "timeout 0"
  | Memory -> "memory 0"

(* Adds the audit's MEMO lines to the parent's memo (only from an audit that finished) and
   returns the report without them. *)
let keep_memo ~trusted report =
  let kept = Buffer.create 1024 and memo_lines = Buffer.create 1024 in
  List.iter
    (fun line ->
       match String.split_on_char '\t' line with
       | head :: entries when String.length head > 5 && String.sub head 0 5 = "MEMO " ->
         if trusted then begin
           let key = String.sub head 5 (String.length head - 5) in
           (match Hashtbl.find_opt (objects_by_key ()) key with
            | Some obj -> Obj_table.replace memo obj (SS.of_list entries)
            | None -> Hashtbl.replace pending_memo key (SS.of_list entries));
           Buffer.add_string memo_lines line;
           Buffer.add_char memo_lines '\n'
         end
       | _ -> if line <> "" then (Buffer.add_string kept line; Buffer.add_char kept '\n'))
    (String.split_on_char '\n' report);
  (Buffer.contents kept, Buffer.contents memo_lines)

(* MEMO lines the kit sends (what trusted audits found in other workers and earlier runs on
   this install): adopted as this process's own. The spare audit was forked without them, so
   it goes (it would only redo their work). *)
let learn lines =
  if lines <> "" then begin
    ignore (keep_memo ~trusted:true lines);
    Option.iter discard !spare_audit;
    spare_audit := None
  end

(* The reply fields of one check, from a parent whose state has [prefix_out]/[prefix_err] as
   the prefix's own messages. *)
let serve ~state ~ldir ~prefix_out ~prefix_err req =
  let deadline = now_ms () +. float_of_int req.timeout_ms in
  let audit = field req "mode" <> Some "statement" in
  let target =
    match field req "target_name", field req "target_statement" with
    | Some n, Some s ->
      let requires = match field req "target_requires" with Some r -> r | None -> "" in
      Some (n, List.filter (( <> ) "") (String.split_on_char ' ' requires), s)
    | _ -> None
  in
  if clean_work_dir () then
    (* Something outside the checks changed what the worker holds: check it cold, and retire. *)
    [ "MISMATCH", ""; "RETIRE", "" ]
  else begin
    write_all artifact_v (match field req "body" with Some b -> b | None -> "");
    let k1 = compile ~state ~ldir ~deadline in
    let replies = ref [
        "COMPILE", Printf.sprintf "%s %d %d" (ended_words k1.ended) k1.cpu_ms k1.wall_ms;
        "COMPILE_OUT", capped (prefix_out ^ read_all "k1.out");
        "COMPILE_ERR", capped (prefix_err ^ read_all "k1.err");
        "AUDIT", k1.report;
      ]
    in
    if k1.ended = Exited 0 && not (Sys.file_exists artifact_vo) then
      replies := !replies @ [ "NOLIBRARY", "" ]
    else if k1.ended = Exited 0 && (audit || target <> None) then begin
      let deadline = now_ms () +. float_of_int req.timeout_ms in
      (* A fresh fork of this parent, which never ran a file's code, per audit: no library an
         earlier check loaded, and no state its audit left, reaches this one. *)
      (* A long compile's re-check is split over the CPUs the kit allows (request fields). *)
      let number name = Option.bind (field req name) int_of_string_opt in
      let shards =
        match number "split_after_ms", number "recheck_processes" with
        | Some after, Some most when k1.cpu_ms >= after -> max 1 (min most (usable_cpus ()))
        | _ -> 1
      in
      let k2, output, shards = check ~state ~deadline ~target ~shards in
      let report, memo_lines = keep_memo ~trusted:(k2.ended = Exited 0) k2.report in
      replies := !replies @ [
          "CHECK", Printf.sprintf "%s %d %d" (ended_words k2.ended) k2.cpu_ms k2.wall_ms;
          "CHECK_PROCESSES", string_of_int shards;
          "CHECK_OUT", capped output;
          "CHECK_REPORT", report;
          "MEMO", memo_lines;
        ]
    end;
    (* What this check left goes now, so the next one starts from the worker's own state. *)
    if clean_work_dir () then replies := !replies @ [ "RETIRE", "" ];
    !replies
  end

(* [encode_reply]'s inverse, for a reply a child built. *)
let decode_reply nonce raw =
  let head = "\n@@" ^ nonce ^ " " in
  let rec fields at acc =
    match Str.search_forward (Str.regexp_string head) raw at with
    | exception Not_found -> List.rev acc
    | start ->
      let line_end = String.index_from raw (start + String.length head) '\n' in
      (match String.split_on_char ' ' (String.sub raw (start + String.length head)
                                          (line_end - start - String.length head)) with
       | [tag; len] ->
         let len = int_of_string len in
         fields (line_end + 1 + len) ((tag, String.sub raw (line_end + 1) len) :: acc)
       | _ -> List.rev acc)
  in
  fields 0 []

let encode_reply nonce replies =
  let b = Buffer.create 4096 in
  List.iter
    (fun (tag, data) ->
       Buffer.add_string b (Printf.sprintf "\n@@%s %s %d\n" nonce tag (String.length data));
       Buffer.add_string b data)
    replies;
  Buffer.contents b

(* Load a prefix (written to Artifact.v) on top of [state]: the new state and its messages. *)
let load_prefix ~state ~ldir text =
  write_all artifact_v text;
  let result = ref (Ok state) in
  with_redirect ~out:"prefix.out" ~err:"prefix.err" (fun () ->
      try
        result :=
          Ok (Topfmt.in_phase ~phase:Topfmt.CompilationPhase
                (fun () -> load_file ~state ~ldir artifact_v) ())
      with exn ->
        flush_everything ();
        Topfmt.print_err_exn exn;
        flush_everything ();
        result := Error (if CErrors.is_anomaly exn then 129 else 1));
  !result, read_all "prefix.out", read_all "prefix.err"

let encode_request req =
  let b = Buffer.create 4096 in
  Buffer.add_string b
    (Printf.sprintf "CHECK %s %d %d\n" req.nonce req.timeout_ms (List.length req.fields));
  List.iter
    (fun (name, data) ->
       Buffer.add_string b (Printf.sprintf "%s %d\n" name (String.length data));
       Buffer.add_string b data)
    req.fields;
  Buffer.contents b

(* Sub-parents: forks of the base worker that loaded one prefix each and serve the files with
   exactly that prefix (the prefix text, compared whole, is the key), as a worker started with
   that prefix would. The few most recently used are kept, so a batch mixing several headers
   loads each once, in one worker. *)
type sub = {
  pid : int;
  requests : Unix.file_descr;
  replies : Unix.file_descr;
  mutable used : float;
}

let held : (string, sub) Hashtbl.t = Hashtbl.create 8
let served = ref 0  (* checks this process served itself *)

let held_limit =
  match Option.bind (Sys.getenv_opt "PROOFLOCK_ROCQ_PREFIXES") int_of_string_opt with
  | Some n -> max 1 n
  | None -> 4

let stop_sub prefix sub =
  Hashtbl.remove held prefix;
  (try Unix.kill (- sub.pid) Sys.sigkill with Unix.Unix_error _ -> ());
  (try Unix.kill sub.pid Sys.sigkill with Unix.Unix_error _ -> ());
  List.iter release [sub.requests; sub.replies];
  (try ignore (Unix.waitpid [] sub.pid) with Unix.Unix_error _ -> ())

(* [serve_loop] runs in the child once the prefix is loaded. *)
let start_sub ~serve_loop ~state ~ldir prefix =
  if Hashtbl.length held >= held_limit then begin
    let oldest =
      Hashtbl.fold (fun p s acc ->
          match acc with
          | Some (_, o) when o.used <= s.used -> acc
          | _ -> Some (p, s)) held None
    in
    Option.iter (fun (p, s) -> stop_sub p s) oldest
  end;
  let req_r, req_w = Unix.pipe ~cloexec:true () in
  let rep_r, rep_w = Unix.pipe ~cloexec:true () in
  flush_everything ();
  match Unix.fork () with
  | 0 ->
    (* Its own process group: stopping it stops the checks it forked. *)
    (try ignore (Unix.setsid ()) with Unix.Unix_error _ -> ());
    (try write_all "/proc/self/oom_score_adj" "500" with _ -> ());
    close_parent_fds ();  (* its siblings' pipes and the base worker's spare checks' *)
    Hashtbl.reset held;
    forget_spares ();
    served := 0;
    Random.self_init ();
    Unix.dup2 req_r Unix.stdin;
    Unix.dup2 rep_w Unix.stdout;
    let null = devnull () in
    Unix.dup2 null Unix.stderr;
    List.iter Unix.close [req_r; req_w; rep_r; rep_w; null];
    let loaded, out, err = load_prefix ~state ~ldir prefix in
    (match loaded with
     | Ok state ->
       adopt_pending ();
       fresh_minor_heap ();
       (* Not compacted (as the base worker is at boot): on a prefix such as Arith's that takes
          longer than it saves the checks forked from it. *)
       serve_loop ~state ~prefix ~prefix_out:out ~prefix_err:err
     | Error code ->
       (* Answer the request it was started for as coqc would (the prefix failed), then go. *)
       (match read_request () with
        | Some req ->
          print_string (encode_reply req.nonce
                          [ "COMPILE", Printf.sprintf "exited %d 0 0" code;
                            "COMPILE_OUT", capped out; "COMPILE_ERR", capped err ]);
          print_string (Printf.sprintf "\n@@%s DONE\n" req.nonce)
        | None -> ()));
    flush_everything ();
    Unix._exit 0
  | pid ->
    Unix.close req_r;
    Unix.close rep_w;
    hold req_w;
    hold rep_r;
    let sub = { pid; requests = req_w; replies = rep_r; used = now_ms () } in
    Hashtbl.replace held prefix sub;
    sub

(* The sub-parent's reply, up to its DONE marker; None if it died or stalled. *)
let exchange_sub sub req ~deadline =
  let marker = Printf.sprintf "\n@@%s DONE\n" req.nonce in
  match write_fd sub.requests (encode_request req) with
  | exception Unix.Unix_error _ -> None
  | () ->
    let buf = Buffer.create 65536 and chunk = Bytes.create 65536 in
    let m = String.length marker in
    let rec pump () =
      let n = Buffer.length buf in
      if n >= m && Buffer.sub buf (n - m) m = marker then Some (Buffer.sub buf 0 (n - m))
      else
        let left = (deadline -. now_ms ()) /. 1000. in
        if left <= 0. then None
        else
          match Unix.select [sub.replies] [] [] left with
          | [], _, _ -> None
          | _ ->
            (match Unix.read sub.replies chunk 0 (Bytes.length chunk) with
             | 0 -> None
             | k -> Buffer.add_subbytes buf chunk 0 k; pump ())
          | exception Unix.Unix_error (Unix.EINTR, _, _) -> pump ()
    in
    pump ()

let serve_by_sub ~serve_loop ~state ~ldir req prefix =
  let sub =
    match Hashtbl.find_opt held prefix with
    | Some sub -> sub
    | None -> start_sub ~serve_loop ~state ~ldir prefix
  in
  sub.used <- now_ms ();
  (* The compile and the audit each have the timeout, and a new sub-parent loads its prefix. *)
  let deadline = now_ms () +. 3. *. float_of_int req.timeout_ms +. 30000. in
  match exchange_sub sub req ~deadline with
  | Some raw ->
    let replies = decode_reply req.nonce raw in
    (match List.assoc_opt "MEMO" replies with
     | Some lines -> ignore (keep_memo ~trusted:true lines)
     | None -> ());
    if not (List.mem_assoc "AUDIT" replies) then stop_sub prefix sub;  (* its prefix failed *)
    replies
  | None ->
    stop_sub prefix sub;
    [ "MISMATCH", "" ]  (* the kit checks this file cold *)

(* The checks of one worker, in order, each answered on stdout. A worker whose prefix is empty
   (the base worker) hands a file with another prefix to the sub-parent holding it. *)
let rec serve_loop ~state ~ldir ~prefix ~prefix_out ~prefix_err () =
  let rec loop () =
    match read_request () with
    | None -> ()
    | Some req ->
      Option.iter learn (field req "memo");
      let served_here = field req "prefix" = Some prefix in
      let replies =
        match field req "prefix" with
        | Some p when p = prefix -> serve ~state ~ldir ~prefix_out ~prefix_err req
        | Some p when prefix = "" ->
          let serve_loop ~state ~prefix ~prefix_out ~prefix_err =
            serve_loop ~state ~ldir ~prefix ~prefix_out ~prefix_err ()
          in
          serve_by_sub ~serve_loop ~state ~ldir req p
        | _ -> [ "MISMATCH", "" ]
      in
      (* MEMO goes up too: a sub-parent's to the base worker, the base worker's to the kit. *)
      print_string (encode_reply req.nonce replies);
      print_string (Printf.sprintf "\n@@%s DONE\n" req.nonce);
      flush stdout;
      (* While the kit reads the reply: the children the next check would otherwise wait for
         to be forked (from the second check on: a sub-parent that serves one file, as in a
         set with a header per file, would only have forked them for nothing). *)
      if served_here then begin
        incr served;
        if !served > 1 then fork_spares ~state ~ldir
      end;
      loop ()
  in
  loop ()

(* ------------------------------------------------------------------------------------------ *)
(* Boot: coqc's start, up to the end of the prefix. *)

let run ((_copts, _color), stm_options) ~opts injections =
  Random.self_init ();
  let _feeder = Feedback.add_feeder Coqloop.coqloop_feed in
  let started = now_ms () in
  let prefix = read_all artifact_v in
  let booted = ref None in
  let status = ref "failed" in
  with_redirect ~out:"boot.out" ~err:"boot.err" (fun () ->
      try
        Topfmt.in_phase ~phase:Topfmt.CompilationPhase
          (fun () ->
             let doc, sid =
               Topfmt.in_phase ~phase:Topfmt.LoadingPrelude Stm.new_doc
                 Stm.{ doc_type = VoDoc artifact_vo; injections; stm_options }
             in
             let state = Vernac.State.{ doc; sid; proof = None; time = false } in
             let state = Ccompile.load_init_vernaculars opts ~state in
             let ldir = Stm.get_ldir ~doc:state.Vernac.State.doc in
             pristine := Some (Vernacstate.freeze_interp_state ~marshallable:false);
             Dumpglob.push_output Dumpglob.NoGlob;
             let state = load_file ~state ~ldir artifact_v in
             booted := Some (state, ldir);
             status := "ok")
          ()
      with exn ->
        flush_everything ();
        Topfmt.print_err_exn exn;
        flush_everything ());
  let prefix_out = read_all "boot.out" and prefix_err = read_all "boot.err" in
  Printf.printf "\n@@PROOFLOCK-ROCQ-READY %s %d\n%!" !status (int_of_float (now_ms () -. started));
  match !booted with
  | None ->
    (* Stay up so the kit can read boot.err; answer every request with BOOTFAILED. *)
    let rec drain () =
      match read_request () with
      | None -> ()
      | Some req ->
        print_string (encode_reply req.nonce [ "BOOTFAILED", prefix_err ]);
        print_string (Printf.sprintf "\n@@%s DONE\n" req.nonce);
        flush stdout;
        drain ()
    in
    drain ()
  | Some (state, ldir) ->
    Sys.set_signal Sys.sigpipe Sys.Signal_ignore;
    (* What trusted audits on this install found before (the kit's memo, see [learn]). *)
    let memo = "srv/memo" in
    if Sys.file_exists memo then begin learn (read_all memo); remove memo end;
    remember_work_dir ();
    Gc.compact ();
    fresh_minor_heap ();
    serve_loop ~state ~ldir ~prefix ~prefix_out ~prefix_err ()

(* Coqc.custom_coqc (not exported), with the server loop in place of the compile. *)
let () =
  let init_extra ((_, color_mode), _) injections ~opts =
    Flags.quiet := true;
    System.trust_file_cache := true;
    Coqtop.init_color (if opts.Coqargs.config.Coqargs.print_emacs then `EMACS else color_mode);
    DebugHook.Intf.(set { read_cmd = Coqtop.ltac_debug_parse;
                          submit_answer = Coqtop.ltac_debug_answer; isTerminal = true });
    injections
  in
  Coqtop.start_coq Coqtop.{
      parse_extra = (fun extras ->
          let color_mode, extras = Coqtop.parse_extra_colors extras in
          let stm_opts, extras = Stmargs.parse_args ~init:Stm.AsyncOpts.default_opts extras in
          let coqc_opts = Coqcargs.parse extras in
          (((coqc_opts, color_mode), stm_opts), []));
      usage = Boot.Usage.{ executable_name = "prooflock-rocq-server"; extra_args = "";
                           extra_options = "" };
      init_extra;
      run = (fun o ~opts i -> run o ~opts i; exit 0);
      initial_args = Coqargs.default;
    }
