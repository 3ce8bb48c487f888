(* prooflock's HOL Light forkserver: load HOL Light once, then check each artifact in a forked
   child, so every check starts from the same pristine state and nothing it does survives it.

   Run as `ocaml server.ml` in the sandbox's work dir. OCaml parses this whole script before
   running any of it, i.e. before HOL Light installs its camlp5 syntax, so it is plain OCaml.
   HOL Light source (the artifact, the boot self-test, placeholder wrappers) is parsed at run time.

   Protocol, stdin -> stdout, one request at a time:
     request  "CHECK <nonce> <timeout_ms> <placeholders|-> <preload|-> <length>\n" <length bytes>
     reply    "\n@@<nonce> REPLY <status> <code> <cpu_ms> <plain|preloaded> <dir>\n"
              <child output> "\n@@<nonce> DONE\n"
   The child interleaves "\n@@<nonce> <TAG> ..." control lines with its output. Only the server
   and the child hold the nonce (a local, never a toplevel name), so nothing the artifact prints
   can pose as a control line. Python sends lists comma-separated; it validates their items. *)

#directory "+compiler-libs";;
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
end;;

let prooflock_hol_loaded =
  Toploop.use_file Format.std_formatter (Filename.concat Prooflock_boot.hol_dir "hol.ml");;

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
    let before = axioms () in
    let record () =
      List.iter
        (fun ax -> if not (List.memq ax before) then made_axioms := ax :: !made_axioms)
        (axioms ())
    in
    match f x with
    | result -> record (); result
    | exception e -> record (); raise e
end;;

module Prooflock_server : sig
  val main : unit -> unit
end = struct
  open Stdlib

  (* The theory as HOL Light left it: "new" always means new relative to this, also on a
     preloaded parent, so a check reports the same facts whichever parent ran it. *)
  let base_axioms = axioms ()
  let base_definitions = definitions ()
  let base_constants = constants ()
  let base_types = types ()

  (* How HOL Light prints terms, which a check may change (interface, infixes, flags): reports
     print with HOL Light's own settings, so an artifact cannot make `F` read as an allowed axiom. *)
  let base_interface = !the_interface
  let base_overloads = !the_overload_skeletons
  let base_binders = binders ()
  let base_prefixes = prefixes ()
  let base_infixes = infixes ()
  let base_unspaced = !unspaced_binops
  let base_prebroken = !prebroken_binops
  let base_flags =
    (!reverse_interface_mapping, !print_unambiguous_comprehensions, !typify_universal_set,
     !print_all_thm)
  let base_margin = Format.get_margin ()

  let restore_printing () =
    the_interface := base_interface;
    the_overload_skeletons := base_overloads;
    List.iter unparse_as_binder (binders ());
    List.iter parse_as_binder base_binders;
    List.iter unparse_as_prefix (prefixes ());
    List.iter parse_as_prefix base_prefixes;
    List.iter (fun (name, _) -> unparse_as_infix name) (infixes ());
    List.iter parse_as_infix base_infixes;
    unspaced_binops := base_unspaced;
    prebroken_binops := base_prebroken;
    let mapping, comprehensions, universal, all_thm = base_flags in
    reverse_interface_mapping := mapping;
    print_unambiguous_comprehensions := comprehensions;
    typify_universal_set := universal;
    print_all_thm := all_thm;
    Format.set_margin base_margin
  let work_dir = Sys.getcwd ()
  let boot_entries = Sys.readdir work_dir

  let output_cap = 1 lsl 20
  let phrase_capture_cap = 1 lsl 16

  (* -- small helpers --------------------------------------------------------------------- *)

  let rec write_all fd s off =
    if off < String.length s then
      write_all fd s (off + Unix.write_substring fd s off (String.length s - off))

  let send fd s = write_all fd s 0

  let flush_all () =
    Format.pp_print_flush Format.std_formatter ();
    Format.pp_print_flush Format.err_formatter ();
    flush stdout;
    flush stderr

  let one_line s = String.map (fun c -> if c = '\n' || c = '\r' then ' ' else c) s

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

  (* Anything a check left in the work dir goes, so no later check can read it. *)
  let restore_work_dir () =
    Array.iter
      (fun e -> if not (Array.mem e boot_entries) then remove_quietly (Filename.concat work_dir e))
      (try Sys.readdir work_dir with Sys_error _ -> [||])

  let write_file path s =
    let oc = open_out_bin path in
    output_string oc s;
    close_out oc

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

  let () =
    capture_output Format.std_formatter;
    capture_output Format.err_formatter;
    (* `File "artifact.ml", line 3, characters 4-9:` then the message, without a source excerpt. *)
    Clflags.error_style := Some Misc.Error_style.Short

  (* Compiler errors print as such; anything else (camlp5 prints its parse errors itself and
     raises Exit) prints as an exception. *)
  let report exn =
    try Location.report_exception Format.std_formatter exn
    with _ ->
      if exn <> Exit then
        Format.fprintf Format.std_formatter "Exception: %s@." (Printexc.to_string exn)

  type phrase_result = Phrase_ok | Phrase_failed of string

  let included_file_error text =
    let needle = "Error in included file" in
    let n = String.length needle and m = String.length text in
    let rec scan i = i + n <= m && (String.sub text i n = needle || scan (i + 1)) in
    scan 0

  let execute phrase =
    Buffer.clear capture;
    let ok =
      try Toploop.execute_phrase true Format.std_formatter phrase
      with exn -> report exn; false
    in
    flush_all ();
    let text = Buffer.contents capture in
    (* HOL Light's `needs`/`loadt` print this and carry on; a file they load must load whole. *)
    if ok && not (included_file_error text) then Phrase_ok else Phrase_failed text

  let parse lexbuf =
    Buffer.clear capture;
    match !Toploop.parse_use_file lexbuf with
    | phrases -> Ok phrases
    | exception exn ->
        report exn;
        flush_all ();
        Error (Buffer.contents capture)

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

  let silent_mark _ _ = ()

  (* Directives that load or find code bypass the checks on what an artifact loads (and a failed
     `#use` does not even fail the phrase): artifacts load code with `needs`/`loadt` only. *)
  let allowed_directives =
    [ "print_depth"; "print_length"; "warnings"; "install_printer"; "remove_printer" ]

  let directive_refused = function
    | Parsetree.Ptop_dir d ->
        let name = d.Parsetree.pdir_name.Location.txt in
        if List.mem name allowed_directives then None
        else
          Some
            (Printf.sprintf
               "Error: the directive #%s is not allowed in a checked file (load files with \
                needs or loadt)\n"
               name)
    | Parsetree.Ptop_def _ -> None

  (* Run HOL Light source; `mark tag payload` receives control lines. *)
  let run_source ~name ~mark source =
    let lexbuf = Lexing.from_string source in
    Location.init lexbuf name;
    Location.input_name := name;
    match parse lexbuf with
    | Error text -> mark "SYNTAX" text; false
    | Ok phrases ->
        let rec go i = function
          | [] -> true
          | phrase :: rest -> (
              mark "PHRASE" (string_of_int i ^ " " ^ span phrase);
              let result =
                match directive_refused phrase with
                | Some message -> Phrase_failed message
                | None -> execute phrase
              in
              match result with
              | Phrase_ok -> go (i + 1) rest
              | Phrase_failed text -> mark "FAILED" text; false)
        in
        go 0 phrases

  (* -- one check, in a forked child ------------------------------------------------------- *)

  let wrap_placeholders names =
    List.iter
      (fun p ->
        ignore (run_source ~name:"placeholder" ~mark:silent_mark
                  (Printf.sprintf "let %s = fun x -> Prooflock_placeholder.wrap %s x;;" p p)))
      names

  (* Fresh names (`_123` variables, `?123` type variables) come from a global counter whose value
     depends on everything loaded before: rename them in order of appearance, so a report reads
     the same on every parent. *)
  let is_fresh prefix name =
    String.length name > 1 && name.[0] = prefix
    && String.for_all (fun c -> c >= '0' && c <= '9') (String.sub name 1 (String.length name - 1))

  let canonical_tyvars vars =
    let fresh = List.filter (fun v -> is_fresh '?' (dest_vartype v)) vars in
    let fresh =
      List.fold_left (fun acc v -> if List.mem v acc then acc else acc @ [ v ]) [] fresh
    in
    List.mapi (fun i v -> (mk_vartype ("?" ^ string_of_int (i + 1)), v)) fresh

  let canonical_term tm =
    let tm = inst (canonical_tyvars (type_vars_in_term tm)) tm in
    let counter = ref 0 in
    let rec rename tm =
      match tm with
      | Comb (f, x) -> mk_comb (rename f, rename x)
      | Abs (v, body) ->
          let name, ty = dest_var v in
          if is_fresh '_' name then begin
            incr counter;
            let v' = variant (frees body) (mk_var ("_" ^ string_of_int !counter, ty)) in
            mk_abs (v', rename (vsubst [ (v', v) ] body))
          end
          else mk_abs (v, rename body)
      | _ -> tm
    in
    rename tm

  let string_of_canonical_thm th =
    let hyps = List.map (fun h -> one_line (string_of_term (canonical_term h))) (hyp th) in
    String.concat ", " hyps ^ (if hyps = [] then "|- " else " |- ")
    ^ one_line (string_of_term (canonical_term (concl th)))

  let string_of_canonical_type ty =
    one_line (string_of_type (type_subst (canonical_tyvars (tyvars ty)) ty))

  let report_theory mark =
    restore_printing ();
    let made = Prooflock_placeholder.made () in
    List.iter
      (fun ax ->
        mark (if List.memq ax made then "PLACEHOLDER" else "AXIOM") (string_of_canonical_thm ax))
      (List.rev (newer (axioms ()) base_axioms));
    List.iter
      (fun d -> mark "DEFINITION" (string_of_canonical_thm d))
      (List.rev (newer (definitions ()) base_definitions));
    List.iter
      (fun (name, ty) -> mark "CONSTANT" (name ^ " " ^ string_of_canonical_type ty))
      (List.rev (newer (constants ()) base_constants));
    List.iter
      (fun (name, arity) -> mark "TYPE" (name ^ " " ^ string_of_int arity))
      (List.rev (newer (types ()) base_types))

  (* The child: fd 1 and 2 are the capture pipe. A control line's payload is length-prefixed. *)
  let child_check ~nonce ~placeholders source =
    let mark tag payload =
      flush_all ();
      send Unix.stdout
        (Printf.sprintf "\n@@%s %s %d\n%s" nonce tag (String.length payload) payload)
    in
    (* Our own set-up phrases print nothing the artifact's output could be confused with. *)
    wrap_placeholders placeholders;
    mark "START" "";
    if run_source ~name:"artifact.ml" ~mark source then begin
      mark "END" "";
      (try report_theory mark
       with exn -> mark "UNREPORTABLE" (Printexc.to_string exn));
      mark "RESULT" ""
    end;
    flush_all ()

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

  (* "plain" (HOL Light only) or "preloaded" (a sub-server): provenance for the reply. *)
  let parent_kind = ref "plain"

  let check_counter = ref 0

  (* Fork a child that runs `source`, capture its output, kill it at the deadline. *)
  let run_check ~nonce ~timeout_ms ~placeholders source =
    incr check_counter;
    let dir = Filename.concat work_dir (Printf.sprintf "check%d" !check_counter) in
    Unix.mkdir dir 0o700;
    let out_r, out_w = Unix.pipe () in
    let deadline = Unix.gettimeofday () +. (float_of_int timeout_ms /. 1000.) in
    flush_all ();
    let cpu_before = let t = Unix.times () in t.Unix.tms_cutime +. t.Unix.tms_cstime in
    match Unix.fork () with
    | 0 ->
        enter_child_process ();
        Unix.close out_r;
        ignore (Unix.setsid ());
        let null = null_fd () in
        Unix.dup2 null Unix.stdin;
        Unix.dup2 out_w Unix.stdout;
        Unix.dup2 out_w Unix.stderr;
        Unix.close null;
        Unix.close out_w;
        watch_over_child ~deadline;
        Unix.chdir dir;
        write_file "artifact.ml" source;
        (try child_check ~nonce ~placeholders source with _ -> ());
        flush_all ();
        Unix._exit 0
    | pid ->
        Unix.close out_w;
        let head = Buffer.create 4096 and tail = Buffer.create 4096 in
        let keep chunk =
          if Buffer.length head < output_cap / 4 then Buffer.add_string head chunk
          else begin
            Buffer.add_string tail chunk;
            if Buffer.length tail > output_cap then begin
              let keep = Buffer.sub tail (Buffer.length tail - (output_cap / 2)) (output_cap / 2) in
              Buffer.clear tail;
              Buffer.add_string tail "\n[... output cut ...]\n";
              Buffer.add_string tail keep
            end
          end
        in
        let chunk = Bytes.create 65536 in
        let rec pump () =
          let left = deadline -. Unix.gettimeofday () in
          if left <= 0. then `Deadline
          else
            match Unix.select [ out_r ] [] [] (Float.min left 0.5) with
            | [], _, _ -> (
                (* Quiet: done if the child exited (a grandchild may still hold the pipe). *)
                match Unix.waitpid [ Unix.WNOHANG ] pid with
                | 0, _ -> pump ()
                | _, status -> `Reaped status)
            | _ ->
                let n = Unix.read out_r chunk 0 (Bytes.length chunk) in
                if n = 0 then `Eof else (keep (Bytes.sub_string chunk 0 n); pump ())
            | exception Unix.Unix_error (Unix.EINTR, _, _) -> pump ()
        in
        let ending = pump () in
        (try Unix.kill (-pid) Sys.sigkill with Unix.Unix_error _ -> ());
        let status =
          match ending with
          | `Reaped status -> status
          | `Eof | `Deadline -> snd (Unix.waitpid [] pid)
        in
        Unix.close out_r;
        let cpu_after = let t = Unix.times () in t.Unix.tms_cutime +. t.Unix.tms_cstime in
        let finish =
          match ending, status with
          | `Deadline, _ -> Timed_out
          | _, Unix.WEXITED code -> Exited code
          | _, (Unix.WSIGNALED s | Unix.WSTOPPED s) -> Signaled s
        in
        remove_quietly dir;
        restore_work_dir ();
        let status_text =
          match finish with
          | Exited code -> "exited " ^ string_of_int code
          | Signaled s -> "signaled " ^ string_of_int s
          | Timed_out -> "timeout 0"
        in
        Printf.sprintf "\n@@%s REPLY %s %d %s %s\n%s%s\n@@%s DONE\n" nonce status_text
          (int_of_float ((cpu_after -. cpu_before) *. 1000.)) !parent_kind dir
          (Buffer.contents head) (Buffer.contents tail) nonce

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
        | [ "CHECK"; nonce; timeout_ms; placeholders; preload; length ] ->
            let source = really_input_string input (int_of_string length) in
            let reply =
              let forwarded =
                if preload = "-" || not may_preload then None
                else forward ~nonce ~timeout_ms ~placeholders ~preload ~source
              in
              match forwarded with
              | Some reply -> reply
              | None ->
                  run_check ~nonce ~timeout_ms:(int_of_string timeout_ms)
                    ~placeholders:(split_list placeholders) source
            in
            send output reply;
            serve ~input ~output ~may_preload
        | _ -> send output ("\n@@ BAD-REQUEST " ^ one_line header ^ "\n"))

  and forward ~nonce ~timeout_ms ~placeholders ~preload ~source =
    match subserver preload with
    | None -> None
    | Some sub -> (
        let request =
          Printf.sprintf "CHECK %s %s %s - %d\n%s" nonce timeout_ms placeholders
            (String.length source) source
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
            run_source ~name:"preload.ml" ~mark:silent_mark source
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
    && run_source ~name:"self-test.ml" ~mark:silent_mark
         "let _ = ARITH_RULE `2 + 2 = 4` in ();;\n"

  let main () =
    let ok = self_test () in
    Gc.compact ();  (* a smaller heap forks faster; done before the boot is declared over *)
    flush_all ();
    let boot_ms = int_of_float ((Unix.gettimeofday () -. Prooflock_boot.started) *. 1000.) in
    send Prooflock_boot.reply_fd
      (Printf.sprintf "\n@@BOOT %s %d %s %s\n" (if ok then "ok" else "failed") boot_ms
         hol_version work_dir);
    if ok then begin
      serve ~input:stdin ~output:Prooflock_boot.reply_fd ~may_preload:true
    end;
    List.iter (fun (_, sub) -> stop_subserver sub) !subservers
end;;

Prooflock_server.main ();;
