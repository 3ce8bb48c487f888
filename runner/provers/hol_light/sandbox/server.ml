(* prooflock's HOL Light worker: load HOL Light once, with its kernel swapped for one that
   records proofs (recording_fusion.ml), then run each artifact in a forked child, so every check
   starts from the same pristine state and nothing it does survives it.

   The worker's account is not the verdict. After a file ran to its end, the child exports the
   proofs of the theorems it bound and of every axiom it made (export.ml); the kit replays them in
   another sandbox with HOL Light's unmodified kernel (replay.ml), and only what the replay
   derives counts. The child's frames say where a file stopped and why; a file that forges them
   can at most make its own check fail.

   Run as `ocaml server.ml` in the sandbox's work dir. OCaml parses this whole script before
   running any of it, i.e. before HOL Light installs its camlp5 syntax, so it is plain OCaml.
   HOL Light source (the artifact, the boot self-test, placeholder wrappers) is parsed at run time.

   Protocol, stdin -> stdout, one request at a time:
     request  "CHECK <nonce> <timeout_ms> <placeholders|-> <preload|-> <length> <target|->
              <statement_length>\n" <length bytes of source> <statement_length bytes>
     reply    "\n@@<nonce> REPLY <status> <code> <cpu_ms> <parent> <oom> <report_length>
              <target_length> <export_length> <swept> <dir>\n" <report> <target> "\n@@<nonce> DONE\n"
   The report is the child's account of the check: frames "<TAG> <length>\n<payload>". The target
   is the target statement as parsed here before the child started (an export, or "!" and why
   not), the export is left in proof.export (read by the kit before its next request). Python
   sends lists comma-separated; it validates their items. *)

#directory "+compiler-libs";;
(* OCaml 5 keeps unix in a directory of its own; 4.13 has none, and ignores it. *)
#directory "+unix";;
#load "unix.cma";;


(* Replies go to the original stdout; HOL Light's own chatter goes to boot.log. *)
module Prooflock_boot = struct
  let reply_fd = Unix.dup Unix.stdout
  let () =
    let log = Unix.openfile "boot.log" [Unix.O_WRONLY; Unix.O_CREAT; Unix.O_TRUNC] 0o644 in
    Unix.dup2 log Unix.stdout;
    Unix.dup2 log Unix.stderr;
    Unix.close log
  let hol_dir =
    match Sys.getenv_opt "HOLLIGHT_DIR" with Some dir -> dir | None -> "/usr/share/hol-light"
  let started = Unix.gettimeofday ()

  (* Children for export.ml, whose HOL Light syntax reads an all-capitals name (WEXITED) as a
     value and cannot name Unix._exit. `fork_child f`: f run in a child that exits 0 if it
     returns, 1 if it raises; the child's pid, or -1 if there is none. *)
  let fork_child f =
    match Unix.fork () with
    | 0 -> (
        match f () with
        | () -> Unix._exit 0
        | exception e ->
            prerr_endline ("Error: " ^ Printexc.to_string e);
            Unix._exit 1)
    | pid -> pid
    | exception Unix.Unix_error _ -> -1

  (* Whether child `pid` exited 0. *)
  let rec exited_ok pid =
    match Unix.waitpid [] pid with
    | _, Unix.WEXITED 0 -> true
    | _ -> false
    | exception Unix.Unix_error (Unix.EINTR, _, _) -> exited_ok pid
    | exception Unix.Unix_error _ -> false
end;;

(* The compiler-libs API this script uses, where OCaml lines differ: 4.14 made type
   descriptions abstract (Types.get_desc). Written for the OCaml this toplevel is, then used. *)
let () =
  let desc =
    if Sys.ocaml_version < "4.14" then "(Ctype.expand_head env ty).Types.desc"
    else "Types.get_desc (Ctype.expand_head env ty)" in
  let oc = open_out_bin "prooflock_types.ml" in
  Printf.fprintf oc
    "module Prooflock_types = struct\n\
    \  (* The path a type is, once abbreviations (`thm` for `Hol.thm`) are expanded. *)\n\
    \  let head_path env ty =\n\
    \    match %s with Types.Tconstr (path, [], _) -> Some path | _ -> None\n\
     end;;\n" desc;
  close_out oc;
  if not (Toploop.use_file Format.std_formatter (Filename.concat (Sys.getcwd ()) "prooflock_types.ml"))
  then Format.printf "Error: prooflock_types.ml does not compile on OCaml %s@." Sys.ocaml_version;;

(* Containment first, built and loaded before anything else runs: what the worker needs of the
   kernel that OCaml's libraries do not offer.
   - Non-dumpable: no process of this user may ptrace the worker, read or write its memory or
     open its file descriptors through /proc, so a checked file's shells cannot reach the worker
     or its checks (a check's child inherits it; what it execs does not).
   - A child subreaper: processes orphaned below the worker (a check's setsid escapees) become
     its children, so the sweep after each check finds them.
   - SysV IPC removal: shared memory, semaphores and message queues belong to the sandbox's IPC
     namespace, not to a process, so they outlive a check (and its memory stays charged to the
     sandbox) unless the worker removes them. *)
let prooflock_stub_sources =
  [ ("prooflock_stubs.c",
     "#include <sys/prctl.h>\n#include <caml/mlvalues.h>\n\
      value prooflock_nondumpable(value unit) { return Val_int(prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)); }\n\
      value prooflock_subreaper(value unit) { return Val_int(prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)); }\n\
      #include <sys/ipc.h>\n#include <sys/shm.h>\n#include <sys/sem.h>\n#include <sys/msg.h>\n\
      value prooflock_ipc_rmid(value kind, value id) {\n\
        int k = Int_val(kind), i = Int_val(id);\n\
        return Val_int(k == 0 ? shmctl(i, IPC_RMID, 0) : k == 1 ? semctl(i, 0, IPC_RMID)\n\
                       : msgctl(i, IPC_RMID, 0)); }\n");
    ("prooflock_prctl.ml",
     "external nondumpable : unit -> int = \"prooflock_nondumpable\"\n\
      external subreaper : unit -> int = \"prooflock_subreaper\"\n\
      external ipc_rmid : int -> int -> int = \"prooflock_ipc_rmid\"\n") ];;
let () =
  List.iter
    (fun (name, text) -> let oc = open_out_bin name in output_string oc text; close_out oc)
    prooflock_stub_sources;;
let prooflock_stubs_built =
  Sys.command
    "{ ocamlc -c prooflock_stubs.c && ocamlmklib -o prooflock_stubs prooflock_stubs.o \
     && ocamlc -c prooflock_prctl.ml \
     && ocamlc -a -o prooflock_prctl.cma prooflock_prctl.cmo -dllib -lprooflock_stubs; } \
     > stubs.log 2>&1" = 0;;
#directory ".";;
#load "prooflock_prctl.cma";;
let () =
  if not prooflock_stubs_built || Prooflock_prctl.nondumpable () <> 0
     || Prooflock_prctl.subreaper () <> 0
  then Format.printf "Error: the worker cannot make itself non-dumpable and a subreaper@.";;

(* hol.ml as shipped, except that the line loading HOL Light's kernel loads the recording one.
   20230128 has that line in hol.ml; 3.0.0 in hol_lib.ml, which hol.ml loads: then a copy of
   hol_lib.ml with the line swapped is loaded in its place. *)
let prooflock_hol_loaded =
  let read path =
    let ic = open_in_bin path in
    let text = really_input_string ic (in_channel_length ic) in
    close_in ic; text in
  let shipped name = String.split_on_char '\n' (read (Filename.concat Prooflock_boot.hol_dir name)) in
  let here name = Filename.concat (Sys.getcwd ()) name in
  let kernel_line = "loads \"fusion.ml\";;" in
  let is_kernel l = String.trim l = kernel_line in
  let lib_load = "loads \"hol_lib.ml\"" in
  (* Where `sub` first starts in `s`. *)
  let find s sub =
    let n = String.length sub in
    let rec at i =
      if i + n > String.length s then None else if String.sub s i n = sub then Some i
      else at (i + 1) in
    at 0 in
  let contains s sub = find s sub <> None in
  (* 3.0.0's kernel names a constant it refuses to redefine: the recording one does as the
     image's kernel does. *)
  let names_redefinition =
    try contains (read (Filename.concat Prooflock_boot.hol_dir "fusion.ml")) "' is already defined"
    with Sys_error _ -> false (* no kernel to load: hol.ml's own loading says so *) in
  (* Loaded in fusion.ml's place, and registered as fusion.ml: the library's own
     `needs "fusion.ml"` must find the kernel loaded. Then the exporter, and a chunk of the
     library export after each file HOL Light loads after its kernel (export.ml). *)
  let recording =
    Printf.sprintf
      "let prooflock_names_redefinition = %b;;\n\
       use_file %S;; loaded_files := (\"fusion.ml\", Digest.file (Filename.concat \
       !hol_dir \"fusion.ml\")) :: !loaded_files;;\nuse_file %S;;\n\
       Prooflock_export.library_file := %S;;"
      names_redefinition (here "recording_fusion.ml") (here "export.ml") (here "library.export") in
  let checkpoint = "Prooflock_export.library_checkpoint ();;" in
  (* `lines` with the kernel line (or, in hol.ml, 3.0.0's hol_lib.ml) replaced by `swap`, and a
     checkpoint after each file loaded after it. *)
  let rewrite ~swap lines =
    let after_kernel = ref false in
    List.concat_map
      (fun l ->
        match swap l with
        | Some swapped -> after_kernel := true; [ swapped ]
        | None ->
            if !after_kernel && String.starts_with ~prefix:"loads \"" l then [ l; checkpoint ]
            else [ l ])
      lines in
  let write name lines =
    let oc = open_out_bin name in
    output_string oc (String.concat "\n" lines);
    close_out oc in
  (try Sys.remove (here "library.export") with Sys_error _ -> ());
  let hol = shipped "hol.ml" in
  let kernel_swap l = if is_kernel l then Some recording else None in
  let written =
    match List.filter is_kernel hol with
    | [ _ ] -> write "hol_recording.ml" (rewrite ~swap:kernel_swap hol); true
    | [] when List.length (List.filter (fun l -> contains l lib_load) hol) = 1 -> (
        match List.filter is_kernel (shipped "hol_lib.ml") with
        | [ _ ] ->
            write "hol_lib_recording.ml" (rewrite ~swap:kernel_swap (shipped "hol_lib.ml"));
            let lib_swap l =
              match find l lib_load with
              | None -> None
              | Some at ->
                  let after = at + String.length lib_load in
                  let loaded =
                    Printf.sprintf
                      "(use_file %S; loaded_files := (\"hol_lib.ml\", Digest.file \
                       (Filename.concat !hol_dir \"hol_lib.ml\")) :: !loaded_files)"
                      (here "hol_lib_recording.ml") in
                  Some (String.sub l 0 at ^ loaded ^ String.sub l after (String.length l - after)) in
            write "hol_recording.ml" (rewrite ~swap:lib_swap hol);
            true
        | _ -> false)
    | _ -> false in
  if written then Toploop.use_file Format.std_formatter (here "hol_recording.ml")
  else begin
    Format.printf "Error: hol.ml does not load its kernel with %s on a line of its own@." kernel_line;
    false
  end;;

(* Axioms made while a declared placeholder (e.g. CHEAT_TAC) runs. The child rebinds each
   placeholder name to `wrap name`. Calling `wrap` directly is no loophole: whatever it admits
   counts as a placeholder, never as a pass in proof mode. *)
module Prooflock_placeholder : sig
  val wrap : ('a -> 'b) -> 'a -> 'b
  val made : unit -> thm list
end = struct
  let made_axioms = ref []
  let made () = !made_axioms
  let wrap f x =
    let before = Hol.axioms () in
    let record () =
      List.iter
        (fun ax -> if not (List.memq ax before) then made_axioms := ax :: !made_axioms)
        (Hol.axioms ())
    in
    match f x with
    | result -> record (); result
    | exception e -> record (); raise e
end;;

(* The names a file binds at top level, from HOL Light's own parse of it: which theorems the
   kit exports and the replay names. *)
module Prooflock_phrases : sig
  val top_level_names : Parsetree.toplevel_phrase list -> string list
end = struct
  open Parsetree

  let pattern_names pattern =
    let found = ref [] in
    let iterator =
      { Ast_iterator.default_iterator with
        pat =
          (fun it p ->
            (match p.ppat_desc with
             | Ppat_var name | Ppat_alias (_, name) -> found := name.txt :: !found
             | _ -> ());
            Ast_iterator.default_iterator.pat it p) }
    in
    iterator.pat iterator pattern;
    List.rev !found

  let top_level_names phrases =
    let seen = Hashtbl.create 64 in
    List.concat_map
      (function
        | Ptop_def items ->
            List.concat_map
              (fun item ->
                match item.pstr_desc with
                | Pstr_value (_, bindings) ->
                    List.concat_map (fun b -> pattern_names b.pvb_pat) bindings
                | _ -> [])
              items
        | Ptop_dir _ -> [])
      phrases
    |> List.rev
    |> List.filter (fun name ->
           if Hashtbl.mem seen name then false else (Hashtbl.add seen name (); true))
    |> List.rev
end;;

module Prooflock_server : sig
  val main : unit -> unit
end = struct
  open Stdlib

  (* The kernel's serial number when the library was exported at boot: what a check made is
     above it. *)
  let boot_mark = ref max_int

  let head_path = Prooflock_types.head_path

  (* The kernel's type of theorems, as HOL Light bound it: a file's own `type thm` is another. *)
  let thm_path =
    let env = !Toploop.toplevel_env in
    let path, _ = Env.find_type_by_name (Longident.Lident "thm") env in
    Option.get (head_path env (Ctype.newconstr path []))

  let work_dir = Sys.getcwd ()

  (* The report stays below what the kit reads of a reply (runner.backends.base, 4 MB). *)
  let report_cap = 3 lsl 20
  let phrase_capture_cap = 1 lsl 16

  (* -- small helpers --------------------------------------------------------------------- *)

  let rec write_all fd s off =
    if off < String.length s then
      write_all fd s (off + Unix.write_substring fd s off (String.length s - off))

  let send fd s = write_all fd s 0

  (* An artifact can make printing raise (its own formatter functions): never let that escape. *)
  let quietly f = try f () with _ -> ()

  let flush_all () =
    quietly (fun () -> Format.pp_print_flush Format.std_formatter ());
    quietly (fun () -> Format.pp_print_flush Format.err_formatter ());
    quietly (fun () -> flush stdout);
    quietly (fun () -> flush stderr)

  let one_line s = String.map (fun c -> if c = '\n' || c = '\r' then ' ' else c) s

  let cut limit s = if String.length s <= limit then s else String.sub s 0 (limit - 3) ^ "..."

  let split_list s = if s = "-" then [] else String.split_on_char ',' s

  let rec take n = function x :: rest when n > 0 -> x :: take (n - 1) rest | _ -> []

  let newer now base = take (List.length now - List.length base) now

  let rec remove_tree path =
    match (Unix.lstat path).Unix.st_kind with
    | Unix.S_DIR ->
        (try Unix.chmod path 0o700 with Unix.Unix_error _ -> ());
        Array.iter (fun e -> remove_tree (Filename.concat path e)) (Sys.readdir path);
        Unix.rmdir path
    | _ -> Unix.unlink path
    | exception Unix.Unix_error _ -> ()

  let remove_quietly path = try remove_tree path with Unix.Unix_error _ | Sys_error _ -> ()


  let write_file path s =
    let oc = open_out_bin path in
    output_string oc s;
    close_out oc

  let read_file path =
    match open_in_bin path with
    | ic ->
        let text = try really_input_string ic (in_channel_length ic) with _ -> "" in
        close_in_noerr ic;
        (* /proc files have no length: read them line by line *)
        if text <> "" then text
        else begin
          let ic = open_in_bin path and lines = Buffer.create 4096 in
          (try
             while true do
               Buffer.add_string lines (input_line ic);
               Buffer.add_char lines '\n'
             done
           with End_of_file -> ());
          close_in_noerr ic;
          Buffer.contents lines
        end
    | exception Sys_error _ -> ""

  let empty_dir ?(keep = []) dir =
    Array.iter
      (fun e -> if not (List.mem e keep) then remove_quietly (Filename.concat dir e))
      (try Sys.readdir dir with Sys_error _ -> [||])

  (* SysV IPC objects (/proc/sysvipc lists them: kind, then id in its second column). *)
  let remove_ipc_objects () =
    List.iteri
      (fun kind table ->
        match String.split_on_char '\n' (read_file ("/proc/sysvipc/" ^ table)) with
        | [] -> ()
        | _header :: rows ->
            List.iter
              (fun row ->
                match List.filter (( <> ) "") (String.split_on_char ' ' (String.trim row)) with
                | _key :: id :: _ -> (
                    match int_of_string_opt id with
                    | Some id -> ignore (Prooflock_prctl.ipc_rmid kind id)
                    | None -> ())
                | _ -> ())
              rows)
      [ "shm"; "sem"; "msg" ]

  (* The writable places a check can leave state in besides the work dir: the sandbox's /tmp,
     its shared-memory and message-queue file systems (POSIX shm and mqueues, where mounted).
     They and the IPC namespace are the sandbox's own only where the kit says so
     (PROOFLOCK_PRIVATE_SCRATCH=1: a container, bubblewrap). Unsandboxed they are the host's,
     with other programs' files and shared memory in them: those are never touched. *)
  let private_scratch = Sys.getenv_opt "PROOFLOCK_PRIVATE_SCRATCH" = Some "1"
  let scratch_dirs = if private_scratch then [ "/tmp"; "/dev/shm"; "/dev/mqueue" ] else []

  (* Every check starts from the state the first one had: once its processes are gone, what it
     left goes, in the work dir (whose boot files the kit read before the first check: nothing
     there is needed afterwards), the scratch dirs and the IPC namespace. Only the check's
     export stays, for the kit to read. *)
  let restore_work_dir () =
    empty_dir ~keep:[ "proof.export" ] work_dir;
    List.iter empty_dir scratch_dirs;
    if private_scratch then remove_ipc_objects ()

  (* The number after `key` on a line of `text` (e.g. "oom_kill 3", "VmPeak:  123 kB"). *)
  let field_after key text =
    List.find_map
      (fun line ->
        match List.filter (( <> ) "") (String.split_on_char ' ' (String.trim line)) with
        | k :: value :: _ when k = key -> int_of_string_opt value
        | _ -> None)
      (String.split_on_char '\n' (String.map (fun c -> if c = '\t' then ' ' else c) text))

  (* -- memory, from the kernel's accounts ------------------------------------------------- *)

  (* OOM kills in this process's memory cgroup (v1 or v2), if the sandbox lets us read them. *)
  let oom_kills () =
    let v1_path =
      List.find_map
        (fun line ->
          match String.split_on_char ':' line with
          | [ _; "memory"; path ] -> Some path
          | _ -> None)
        (String.split_on_char '\n' (read_file "/proc/self/cgroup"))
    in
    let candidates =
      (match v1_path with
       | Some path -> [ "/sys/fs/cgroup/memory" ^ path ^ "/memory.oom_control" ]
       | None -> [])
      @ [ "/sys/fs/cgroup/memory/memory.oom_control"; "/sys/fs/cgroup/memory.events" ]
    in
    List.find_map (fun path -> field_after "oom_kill" (read_file path)) candidates

  (* Under an address-space limit (the local backend), OCaml raises Out_of_memory when the heap
     cannot grow: it counts as `memory` only if the process really came close to the limit. *)
  let address_space_limit () =
    List.find_map
      (fun line ->
        if String.starts_with ~prefix:"Max address space" line then
          match List.filter (( <> ) "") (String.split_on_char ' ' line) with
          | _ :: _ :: _ :: soft :: _ -> int_of_string_opt soft
          | _ -> None
        else None)
      (String.split_on_char '\n' (read_file "/proc/self/limits"))

  (* A process's peak address space in kB, from the kernel's account (/proc/PID/status): the
     worker reads its check's, which the check cannot write. *)
  let vm_peak_kb pid = field_after "VmPeak:" (read_file (Printf.sprintf "/proc/%s/status" pid))

  let near_memory_limit () =
    match address_space_limit (), vm_peak_kb "self" with
    | Some limit, Some peak_kb -> peak_kb * 1024 >= limit / 4 * 3
    | _ -> false

  (* -- running HOL Light phrases ----------------------------------------------------------- *)

  (* What the toplevel printed (through Format) during the current phrase: its error message. *)
  let capture = Buffer.create 4096

  let capture_output formatter =
    let out = Format.pp_get_formatter_out_functions formatter () in
    let out_string s pos len =
      if Buffer.length capture > phrase_capture_cap then begin
        let tail = Buffer.sub capture (Buffer.length capture - 4096) 4096 in
        Buffer.clear capture;
        Buffer.add_string capture tail
      end;
      Buffer.add_substring capture s pos len;
      out.Format.out_string s pos len
    in
    Format.pp_set_formatter_out_functions formatter { out with Format.out_string }

  (* The exception a phrase's evaluation raised, as the toplevel saw it (not as it printed it). *)
  let raised = ref None

  let () =
    capture_output Format.std_formatter;
    capture_output Format.err_formatter

  (* The formatters as set up here, put back before the kit reports anything. *)
  let base_std_out = Format.pp_get_formatter_out_functions Format.std_formatter ()
  let base_err_out = Format.pp_get_formatter_out_functions Format.err_formatter ()

  let restore_formatters () =
    Format.pp_set_formatter_out_functions Format.std_formatter base_std_out;
    Format.pp_set_formatter_out_functions Format.err_formatter base_err_out

  let () =
    (* `File "artifact.ml", line 3, characters 4-9:` then the message, without a source excerpt. *)
    Clflags.error_style := Some Misc.Error_style.Short;
    let print = !Toploop.print_out_phrase in
    Toploop.print_out_phrase :=
      fun ppf phrase ->
        (match phrase with Outcometree.Ophr_exception (exn, _) -> raised := Some exn | _ -> ());
        print ppf phrase

  (* Compiler errors print as such; anything else (camlp5 prints its parse errors itself and
     raises Exit) prints as an exception. *)
  let report exn =
    try Location.report_exception Format.std_formatter exn
    with _ -> (
      match exn with
      | Exit -> ()
      | _ -> Format.fprintf Format.std_formatter "Exception: %s@." (Printexc.to_string exn))

  type phrase_result = Phrase_ok | Phrase_failed of string * bool (* message, out of memory *)

  let included_file_error text =
    let needle = "Error in included file" in
    let n = String.length needle and m = String.length text in
    let rec scan i = i + n <= m && (String.sub text i n = needle || scan (i + 1)) in
    scan 0

  (* The toplevel's #use prints why a file could not be read and carries on: here it fails. *)
  let run_phrase phrase =
    match phrase with
    | Parsetree.Ptop_dir
        { pdir_name = { txt = "use"; _ };
          pdir_arg = Some { pdira_desc = Parsetree.Pdir_string path; _ }; _ } ->
        Toploop.use_file Format.std_formatter path
    | _ -> Toploop.execute_phrase true Format.std_formatter phrase

  let execute phrase =
    Buffer.clear capture;
    raised := None;
    let ok =
      try run_phrase phrase
      with exn -> raised := Some exn; quietly (fun () -> report exn); false
    in
    flush_all ();
    let text = Buffer.contents capture in
    (* HOL Light's `needs` prints this and carries on; a file it loads must load whole. *)
    if ok && not (included_file_error text) then Phrase_ok
    else
      let out_of_memory =
        match !raised with Some Out_of_memory -> near_memory_limit () | _ -> false
      in
      Phrase_failed (text, out_of_memory)

  type parsed = Parsed of Parsetree.toplevel_phrase list | Syntax of string

  let parse_source ~name source =
    let lexbuf = Lexing.from_string source in
    Location.init lexbuf name;
    Location.input_name := name;
    Buffer.clear capture;
    match !Toploop.parse_use_file lexbuf with
    | phrases -> Parsed phrases
    | exception exn ->
        quietly (fun () -> report exn);
        flush_all ();
        Syntax (Buffer.contents capture)

  let position p = Printf.sprintf "%d %d" p.Lexing.pos_lnum (p.Lexing.pos_cnum - p.Lexing.pos_bol)

  let span = function
    | Parsetree.Ptop_def [] -> "0 0 0 0"
    | Parsetree.Ptop_def (first :: _ as items) ->
        let last = List.nth items (List.length items - 1) in
        position first.Parsetree.pstr_loc.Location.loc_start
        ^ " " ^ position last.Parsetree.pstr_loc.Location.loc_end
    | Parsetree.Ptop_dir d ->
        position d.Parsetree.pdir_loc.Location.loc_start
        ^ " " ^ position d.Parsetree.pdir_loc.Location.loc_end

  (* Run phrases from index `first`; `mark tag payload` receives report frames. *)
  let run_phrases ~mark ~first phrases =
    let rec go i = function
      | [] -> true
      | phrase :: rest -> (
          mark "PHRASE" (string_of_int i ^ " " ^ span phrase);
          match execute phrase with
          | Phrase_ok -> go (i + 1) rest
          | Phrase_failed (text, out_of_memory) ->
              if out_of_memory then mark "MEMORY" "";
              mark "FAILED" text;
              false)
    in
    go first phrases

  let silent_mark _ _ = ()

  (* The kit's own HOL Light source (self-test, placeholder wrappers, preloads): no fence. *)
  let run_trusted ~name source =
    match parse_source ~name source with
    | Parsed phrases -> run_phrases ~mark:silent_mark ~first:0 phrases
    | Syntax _ -> false

  (* -- one check, in a forked child ------------------------------------------------------- *)

  let wrap_placeholders names =
    List.iter
      (fun p ->
        ignore (run_trusted ~name:"placeholder"
                  (Printf.sprintf "let %s = fun x -> Prooflock_placeholder.wrap %s x;;" p p)))
      names

  type bound = Theorem of thm | Foreign_theorem | Not_a_theorem | Unbound

  let type_name path = match path with Path.Pident id -> Ident.name id | Path.Pdot (_, n) -> n | _ -> ""

  (* What a toplevel name holds now, read from the toplevel's environment by its type. *)
  let bound_value name =
    let env = !Toploop.toplevel_env in
    match Env.find_value_by_name (Longident.Lident name) env with
    | exception Not_found -> Unbound
    | path, description -> (
        let ty = description.Types.val_type in
        match head_path env ty with
        | Some p when Path.same p thm_path ->
            Theorem (Obj.obj (Toploop.eval_value_path env path) : thm)
        | Some p when type_name p = "thm" -> Foreign_theorem
        | _ -> Not_a_theorem)

  (* The child. Its stdout and stderr are /dev/null; `report` is its pipe to the server. Once
     the file ran to its end, the proofs of the theorems it bound and of the axioms it made go to
     proof.export in its directory. *)
  let child_check ~report ~placeholders source =
    let mark tag payload =
      send report (Printf.sprintf "%s %d\n%s" tag (String.length payload) payload);
      (* Stopped until the worker has read this process's peak (it says whether it is memory). *)
      if tag = "MEMORY" then Unix.kill (Unix.getpid ()) Sys.sigstop
    in
    wrap_placeholders placeholders;
    mark "START" "";
    match parse_source ~name:"artifact.ml" source with
    | Syntax text -> mark "SYNTAX" text
    | Parsed phrases ->
        if run_phrases ~mark ~first:0 phrases then begin
          mark "END" "";
          let bound = Prooflock_phrases.top_level_names phrases in
          let named =
            List.filter_map
              (fun name ->
                match bound_value name with
                | Theorem th -> Some (name, th)
                | Foreign_theorem -> mark "FOREIGN" name; None
                | Not_a_theorem | Unbound -> None)
              bound
          in
          let made = List.filter (fun th -> serial_of (proof_of th) >= !boot_mark) (Hol.axioms ()) in
          (match
             Prooflock_export.check_export ~from:!boot_mark ~named ~axioms:made
               ~placeholders:(Prooflock_placeholder.made ())
           with
           | export ->
               write_file "proof.export" export;
               List.iter (fun (name, _) -> mark "THEOREM" name) named;
               mark "RESULT" ""
           | exception exn -> mark "UNREPORTABLE" (Printexc.to_string exn))
        end

  (* fds private to servers: a child closes all of them, so it cannot talk to Python or to a
     sub-server directly. *)
  let private_fds = ref [ Prooflock_boot.reply_fd ]

  let null_fd () = Unix.openfile "/dev/null" [ Unix.O_RDWR ] 0

  let enter_child_process () =
    List.iter (fun fd -> try Unix.close fd with Unix.Unix_error _ -> ()) !private_fds;
    (* The kernel should pick a runaway child, not the server, when memory runs out. *)
    (try write_file "/proc/self/oom_score_adj" "1000" with Sys_error _ -> ())

  (* A child runs in its own session, so that a timeout kills whatever it started; then nothing
     kills it along with the server. It ends itself once its server is gone or long overdue. *)
  let watch_over_child ~deadline =
    let server = Unix.getppid () in
    let give_up _ =
      if Unix.getppid () <> server || Unix.gettimeofday () > deadline +. 10. then Unix._exit 3
    in
    Sys.set_signal Sys.sigalrm (Sys.Signal_handle give_up);
    ignore (Unix.setitimer Unix.ITIMER_REAL { Unix.it_interval = 1.0; Unix.it_value = 1.0 })

  type finish = Exited of int | Signaled of int | Timed_out

  (* OCaml numbers signals its own way (Sys.sigkill is -7): the reply carries the kernel's. *)
  let posix_signal s =
    let known =
      [ (Sys.sighup, 1); (Sys.sigint, 2); (Sys.sigquit, 3); (Sys.sigill, 4); (Sys.sigtrap, 5);
        (Sys.sigabrt, 6); (Sys.sigbus, 7); (Sys.sigfpe, 8); (Sys.sigkill, 9); (Sys.sigusr1, 10);
        (Sys.sigsegv, 11); (Sys.sigusr2, 12); (Sys.sigpipe, 13); (Sys.sigalrm, 14);
        (Sys.sigterm, 15); (Sys.sigxcpu, 24); (Sys.sigxfsz, 25); (Sys.sigsys, 31) ]
    in
    match List.assoc_opt s known with Some n -> n | None -> s

  type ending = Deadline | Eof | Reaped of Unix.process_status

  (* "plain" (HOL Light only) or "preloaded" (a sub-server): provenance for the reply. *)
  let parent_kind = ref "plain"

  let check_counter = ref 0

  (* The child's report as it arrives: frames kept in order up to the cap, except PHRASE frames,
     of which only the last matters (where a timeout struck); it goes at the end. *)
  type report_reader = {
    pending : Buffer.t;
    kept : Buffer.t;
    mutable last_phrase : string;
    mutable overflow : bool;
    mutable memory_said : bool;  (* a MEMORY frame came: the child waits, stopped *)
  }

  let new_reader () =
    { pending = Buffer.create 4096; kept = Buffer.create 4096; last_phrase = ""; overflow = false;
      memory_said = false }

  let rec take_frames reader =
    let data = Buffer.contents reader.pending in
    match String.index_opt data '\n' with
    | None -> ()
    | Some eol -> (
        match String.split_on_char ' ' (String.sub data 0 eol) with
        | [ tag; length ] when int_of_string_opt length <> None ->
            let length = int_of_string length in
            if String.length data >= eol + 1 + length then begin
              let frame = String.sub data 0 (eol + 1 + length) in
              Buffer.clear reader.pending;
              Buffer.add_string reader.pending
                (String.sub data (eol + 1 + length) (String.length data - eol - 1 - length));
              if tag = "MEMORY" then reader.memory_said <- true;
              if tag = "PHRASE" then reader.last_phrase <- frame
              else if Buffer.length reader.kept + String.length frame <= report_cap then
                Buffer.add_string reader.kept frame
              else reader.overflow <- true;
              take_frames reader
            end
        | _ -> reader.overflow <- true; Buffer.clear reader.pending)

  let report_of reader =
    Buffer.contents reader.kept ^ reader.last_phrase
    ^ if reader.overflow then "OVERFLOW 0\n" else ""

  (* -- after a check: nothing it started survives -------------------------------------- *)

  (* /proc/<pid>/stat: (ppid, process group); the command name may hold spaces and parens. *)
  let proc_stat pid =
    let text = read_file (Printf.sprintf "/proc/%d/stat" pid) in
    match String.rindex_opt text ')' with
    | None -> None
    | Some i -> (
        match String.split_on_char ' ' (String.sub text (i + 2) (String.length text - i - 2)) with
        | _state :: ppid :: pgrp :: _ -> (
            match int_of_string_opt ppid, int_of_string_opt pgrp with
            | Some ppid, Some pgrp -> Some (ppid, pgrp)
            | _ -> None)
        | _ -> None)

  let all_pids () =
    Array.to_list (try Sys.readdir "/proc" with Sys_error _ -> [||])
    |> List.filter_map int_of_string_opt

  (* What a check started is a descendant of this server: the server is a child subreaper
     (prooflock_stubs.c), so processes orphaned below it, setsid or not, are reparented to it
     rather than escaping to init. Every descendant outside the server's own process group (its
     sub-servers) goes; a check runs in a session of its own, so nothing it starts can join that
     group. Repeated until none is left, for those forked meanwhile. *)
  let sweep () =
    let me = Unix.getpid () in
    let group = me |> proc_stat |> Option.map snd in
    let stats () =
      List.filter_map (fun pid -> Option.map (fun st -> (pid, st)) (proc_stat pid)) (all_pids ())
    in
    let rec reap () =
      match Unix.waitpid [ Unix.WNOHANG ] (-1) with
      | 0, _ -> ()
      | _ -> reap ()
      | exception Unix.Unix_error _ -> ()
    in
    let rec round n killed =
      let table = stats () in
      let rec below pid depth =
        depth < 64
        && match List.assoc_opt pid table with
           | Some (ppid, _) -> ppid = me || below ppid (depth + 1)
           | None -> false
      in
      let victims =
        List.filter_map
          (fun (pid, (_, pgrp)) ->
            if pid <> me && Some pgrp <> group && below pid 0 then Some pid else None)
          table
      in
      List.iter (fun pid -> try Unix.kill pid Sys.sigkill with Unix.Unix_error _ -> ()) victims;
      reap ();
      if victims = [] || n >= 200 then killed
      else (Unix.sleepf 0.005; round (n + 1) (killed + List.length victims))
    in
    round 0 0

  (* The target as HOL Light's parser reads it in this (pristine) state, in a throwaway fork so
     that parsing leaves no trace (fresh-name counters, type invention): its export, or "!" and
     why it is none. *)
  let target_export statement =
    let r, w = Unix.pipe () in
    flush_all ();
    match Unix.fork () with
    | 0 ->
        Unix.close r;
        let text =
          match parse_term statement with
          | exception exn -> "!unparsable " ^ one_line (Printexc.to_string exn)
          | tm when type_of tm <> bool_ty ->
              "!not_boolean " ^ one_line (string_of_type (type_of tm))
          | tm -> (
              match Prooflock_export.target_export tm with
              | export -> export
              | exception exn -> "!unparsable " ^ one_line (Printexc.to_string exn))
        in
        (try send w text with _ -> ());
        Unix._exit 0
    | pid ->
        Unix.close w;
        let buf = Buffer.create 4096 and chunk = Bytes.create 65536 in
        let rec pump () =
          match Unix.read r chunk 0 65536 with
          | 0 -> ()
          | n -> Buffer.add_subbytes buf chunk 0 n; pump ()
          | exception Unix.Unix_error (Unix.EINTR, _, _) -> pump () in
        pump ();
        Unix.close r;
        ignore (Unix.waitpid [] pid);
        if Buffer.length buf = 0 then "!unparsable the parser died" else Buffer.contents buf

  let export_file = Filename.concat work_dir "proof.export"
  let export_cap = 256 lsl 20

  (* Whether no check ran yet: the first one finds what the boot left, and clears it first. *)
  let pristine = ref true

  (* Fork a child that checks `source`, read its report, kill it at the deadline. *)
  let run_check ~nonce ~timeout_ms ~placeholders ~parsed ~target source =
    if !pristine then (pristine := false; restore_work_dir ());
    incr check_counter;
    remove_quietly export_file;
    let target_text =
      match target with
      | None -> ""
      | Some (_, text) -> if parsed then text else target_export text in
    let dir = Filename.concat work_dir (Printf.sprintf "check%d" !check_counter) in
    Unix.mkdir dir 0o700;
    let report_r, report_w = Unix.pipe () in
    let deadline = Unix.gettimeofday () +. (float_of_int timeout_ms /. 1000.) in
    let oom_before = oom_kills () in
    let peak_at_fork = Option.value (vm_peak_kb "self") ~default:max_int in
    flush_all ();
    let cpu_before = let t = Unix.times () in t.Unix.tms_cutime +. t.Unix.tms_cstime in
    match Unix.fork () with
    | 0 ->
        enter_child_process ();
        Unix.close report_r;
        ignore (Unix.setsid ());
        let null = null_fd () in
        Unix.dup2 null Unix.stdin;
        Unix.dup2 null Unix.stdout;
        Unix.dup2 null Unix.stderr;
        Unix.close null;
        Unix.set_close_on_exec report_w;
        watch_over_child ~deadline;
        Unix.chdir dir;
        write_file "artifact.ml" source;
        (try child_check ~report:report_w ~placeholders source with _ -> ());
        flush_all ();
        Unix._exit 0
    | pid ->
        Unix.close report_w;
        let reader = new_reader () in
        let chunk = Bytes.create 65536 in
        (* The child's peak address space as this process saw it: read at each wake, and while
           a child that said MEMORY waits, stopped, for it. *)
        let peak = ref 0 in
        let observe () =
          (match vm_peak_kb (string_of_int pid) with Some kb -> peak := max !peak kb | None -> ());
          if reader.memory_said then begin
            reader.memory_said <- false;
            try Unix.kill pid Sys.sigcont with Unix.Unix_error _ -> ()
          end
        in
        let rec pump () =
          let left = deadline -. Unix.gettimeofday () in
          if left <= 0. then Deadline
          else
            match Unix.select [ report_r ] [] [] (Float.min left 0.5) with
            | [], _, _ -> (
                observe ();
                (* Quiet: done if the child exited (a grandchild may still hold the pipe). *)
                match Unix.waitpid [ Unix.WNOHANG ] pid with
                | 0, _ -> pump ()
                | _, status -> Reaped status)
            | _ ->
                let n = Unix.read report_r chunk 0 (Bytes.length chunk) in
                if n = 0 then Eof
                else begin
                  Buffer.add_subbytes reader.pending chunk 0 n;
                  take_frames reader;
                  observe ();
                  pump ()
                end
            | exception Unix.Unix_error (Unix.EINTR, _, _) -> pump ()
        in
        let ending = pump () in
        (try Unix.kill (-pid) Sys.sigkill with Unix.Unix_error _ -> ());
        let status =
          match ending with
          | Reaped status -> status
          | Eof | Deadline -> snd (Unix.waitpid [] pid)
        in
        let swept = sweep () in
        Unix.close report_r;
        let cpu_after = let t = Unix.times () in t.Unix.tms_cutime +. t.Unix.tms_cstime in
        let finish =
          match ending, status with
          | Deadline, _ -> Timed_out
          | _, Unix.WEXITED code -> Exited code
          | _, (Unix.WSIGNALED s | Unix.WSTOPPED s) -> Signaled s
        in
        (* Memory as this process observed it, never as the child said: the cgroup killed
           something (oom), or the child grew to 3/4 of its address-space limit (peak). *)
        let near_limit =
          match address_space_limit () with
          | Some limit -> !peak > peak_at_fork && !peak * 1024 >= limit / 4 * 3
          | None -> false
        in
        let oom =
          match oom_before, oom_kills () with
          | Some before, Some after when after > before -> "oom"
          | _ when near_limit -> "peak"
          | Some _, Some _ -> "none"
          | _ -> "unknown"
        in
        (* The export the child left, moved where the kit reads it (the previous one is gone). *)
        remove_quietly export_file;
        let export_length =
          match Unix.lstat (Filename.concat dir "proof.export") with
          | { Unix.st_kind = Unix.S_REG; st_size; _ } when st_size <= export_cap -> (
              try Unix.rename (Filename.concat dir "proof.export") export_file; st_size
              with Unix.Unix_error _ -> 0)
          | { Unix.st_kind = Unix.S_REG; _ } -> -1
          | _ -> 0
          | exception Unix.Unix_error _ -> 0
        in
        remove_quietly dir;
        restore_work_dir ();
        let status_text =
          match finish with
          | Exited code -> "exited " ^ string_of_int code
          | Signaled s -> "signaled " ^ string_of_int (posix_signal s)
          | Timed_out -> "timeout 0"
        in
        let report = report_of reader in
        Printf.sprintf "\n@@%s REPLY %s %d %s %s %d %d %d %d %s\n%s%s\n@@%s DONE\n" nonce
          status_text (int_of_float ((cpu_after -. cpu_before) *. 1000.)) !parent_kind oom
          (String.length report) (String.length target_text) export_length swept dir report
          target_text nonce

  (* -- preloaded parents ------------------------------------------------------------------ *)

  (* A sub-server: a child of the plain server that has loaded a library set and then serves
     checks forwarded to it. The plain server stays pristine for every other request. *)
  type subserver = { pid : int; requests : Unix.file_descr; replies : Unix.file_descr }

  let subservers : (string * subserver) list ref = ref []
  let failed_preloads : string list ref = ref []
  let max_subservers = 3
  let preload_timeout_s = 900.

  let stop_subserver sub =
    List.iter
      (fun fd -> try Unix.close fd with Unix.Unix_error _ -> ())
      [ sub.requests; sub.replies ];
    private_fds := List.filter (fun fd -> fd <> sub.requests && fd <> sub.replies) !private_fds;
    (try Unix.kill sub.pid Sys.sigkill with Unix.Unix_error _ -> ());
    (try ignore (Unix.waitpid [] sub.pid) with Unix.Unix_error _ -> ())

  (* Read from `fd` until `marker` ends what was read; None on EOF or deadline. *)
  let read_through fd marker deadline =
    let buf = Buffer.create 4096 and chunk = Bytes.create 65536 in
    let ends_with_marker () =
      let n = Buffer.length buf and m = String.length marker in
      n >= m && Buffer.sub buf (n - m) m = marker
    in
    let rec loop () =
      if ends_with_marker () then Some (Buffer.contents buf)
      else
        let left = deadline -. Unix.gettimeofday () in
        if left <= 0. then None
        else
          match Unix.select [ fd ] [] [] left with
          | [], _, _ -> loop ()
          | _ ->
              let n = Unix.read fd chunk 0 (Bytes.length chunk) in
              if n = 0 then None else (Buffer.add_subbytes buf chunk 0 n; loop ())
          | exception Unix.Unix_error (Unix.EINTR, _, _) -> loop ()
    in
    loop ()

  let rec serve ~input ~output ~may_preload =
    match input_line input with
    | exception End_of_file -> ()
    | header -> (
        match String.split_on_char ' ' header with
        | [ "CHECK"; nonce; timeout_ms; placeholders; preload; length; target_name;
            statement_length ] ->
            let source = really_input_string input (int_of_string length) in
            let statement = really_input_string input (int_of_string statement_length) in
            let target = if target_name = "-" then None else Some (target_name, statement) in
            (* "=": a preloaded parent's request from the plain one, whose target comes parsed
               (the kit never sends it: Python validates every preload path) *)
            let parsed = preload = "=" in
            let reply =
              let forwarded =
                if preload = "-" || parsed || not may_preload then None
                else forward ~nonce ~timeout_ms ~placeholders ~preload ~source ~target_name
                       ~statement
              in
              match forwarded with
              | Some reply -> reply
              | None ->
                  run_check ~nonce ~timeout_ms:(int_of_string timeout_ms)
                    ~placeholders:(split_list placeholders) ~parsed ~target source
            in
            send output reply;
            serve ~input ~output ~may_preload
        | _ -> send output ("\n@@ BAD-REQUEST " ^ one_line header ^ "\n"))

  and forward ~nonce ~timeout_ms ~placeholders ~preload ~source ~target_name ~statement =
    match subserver preload with
    | None -> None
    | Some sub -> (
        (* The target is parsed here, in the plain parent: a preloaded library must not change
           what it means (its overloads or priorities could), as it changes no file's result. *)
        let kind, statement =
          if target_name = "-" then ("-", statement) else ("=", target_export statement) in
        let request =
          Printf.sprintf "CHECK %s %s %s %s %d %s %d\n%s%s" nonce timeout_ms placeholders kind
            (String.length source) target_name (String.length statement) source statement
        in
        let marker = Printf.sprintf "\n@@%s DONE\n" nonce in
        let deadline = Unix.gettimeofday () +. (float_of_string timeout_ms /. 1000.) +. 60. in
        match send sub.requests request with
        | exception Unix.Unix_error _ -> drop_subserver preload sub; None
        | () -> (
            match read_through sub.replies marker deadline with
            | Some reply -> Some reply
            | None -> drop_subserver preload sub; None))

  (* A sub-server that died or hung is dropped; the plain server checks the request instead. *)
  and drop_subserver preload sub =
    stop_subserver sub;
    subservers := List.remove_assoc preload !subservers

  and subserver preload =
    match List.assoc_opt preload !subservers with
    | Some sub -> Some sub
    | None when List.mem preload !failed_preloads -> None
    | None -> (
        if List.length !subservers >= max_subservers then begin
          let oldest_key, oldest = List.nth !subservers (List.length !subservers - 1) in
          drop_subserver oldest_key oldest
        end;
        match start_subserver preload with
        | Some sub -> subservers := (preload, sub) :: !subservers; Some sub
        | None -> failed_preloads := preload :: !failed_preloads; None)

  and start_subserver preload =
    let req_r, req_w = Unix.pipe () and rep_r, rep_w = Unix.pipe () in
    flush_all ();
    match Unix.fork () with
    | 0 ->
        enter_child_process ();
        Unix.close req_w;
        Unix.close rep_r;
        (* It stays in the server's process group: stopping the worker stops it too. *)
        private_fds := [ req_r; rep_w ];
        parent_kind := "preloaded";
        ignore (Prooflock_prctl.subreaper ());
        subservers := [];
        let null = null_fd () in
        Unix.dup2 null Unix.stdin;
        Unix.dup2 null Unix.stdout;
        Unix.dup2 null Unix.stderr;
        Unix.close null;
        let source =
          String.concat ""
            (List.map (fun path -> Printf.sprintf "needs %S;;\n" path) (split_list preload))
        in
        (* Load from an empty dir, as a check's `needs` would find nothing of ours in "." either. *)
        incr check_counter;
        let dir = Filename.concat work_dir (Printf.sprintf "preload%d" !check_counter) in
        let loaded =
          try
            Unix.mkdir dir 0o700;
            Unix.chdir dir;
            run_trusted ~name:"preload.ml" source
          with _ -> false
        in
        (try Unix.chdir work_dir with Unix.Unix_error _ -> ());
        remove_quietly dir;
        send rep_w (if loaded then "READY\n" else "FAILED\n");
        if loaded then begin
          Gc.compact ();
          serve ~input:(Unix.in_channel_of_descr req_r) ~output:rep_w ~may_preload:false
        end;
        Unix._exit 0
    | pid ->
        Unix.close req_r;
        Unix.close rep_w;
        let sub = { pid; requests = req_w; replies = rep_r } in
        private_fds := req_w :: rep_r :: !private_fds;
        match read_through rep_r "\n" (Unix.gettimeofday () +. preload_timeout_s) with
        | Some "READY\n" -> Some sub
        | _ -> stop_subserver sub; None

  (* -- boot ------------------------------------------------------------------------------ *)

  (* Proof that HOL Light really loaded: it prints errors and carries on when it did not. *)
  let self_test () =
    prooflock_hol_loaded
    && run_trusted ~name:"self-test.ml" "let _ = ARITH_RULE `2 + 2 = 4` in ();;\n"

  (* The last chunk of the library export: every theorem HOL Light holds by name (its toplevel,
     its theorem database), its axioms and definitions. A check's export refers to these, and to
     the earlier chunks' (export.ml), by number. *)
  let export_library () =
    Prooflock_export.checkpoint
      (Prooflock_export.toplevel_theorems () @ List.map snd !theorems @ Hol.axioms ()
       @ Hol.definitions ());
    boot_mark := serial_now () + 1;
    let file = Prooflock_export.(!library_file) in
    if Prooflock_export.library_finish () then
      Some ((Unix.stat file).Unix.st_size, Digest.to_hex (Digest.file file))
    else begin
      Format.printf "Error: the library export was not written (a chunk's writer failed)@.";
      None
    end

  let main () =
    let exported = if self_test () then export_library () else None in
    let ok = exported <> None in
    let library_length, library_digest = Option.value exported ~default:(0, "-") in
    Gc.compact ();  (* a smaller heap forks faster; done before the boot is declared over *)
    flush_all ();
    let boot_ms = int_of_float ((Unix.gettimeofday () -. Prooflock_boot.started) *. 1000.) in
    send Prooflock_boot.reply_fd
      (Printf.sprintf "\n@@BOOT %s %d %s %d %s %s\n" (if ok then "ok" else "failed") boot_ms
         hol_version library_length library_digest work_dir);
    if ok then begin
      serve ~input:stdin ~output:Prooflock_boot.reply_fd ~may_preload:true
    end;
    List.iter (fun (_, sub) -> stop_subserver sub) !subservers
end;;

Prooflock_server.main ();;
