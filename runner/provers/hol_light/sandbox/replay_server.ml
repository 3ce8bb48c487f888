(* prooflock's replay server (standard OCaml syntax): see replay.ml for the format. *)

open Replay_core

(* ---------------------------------------------------------------------------------------- *)
(* The server: the library once, then each check in a forked child.                         *)
(* ---------------------------------------------------------------------------------------- *)

let read_file path =
  let ic = open_in_bin path in
  let s = really_input_string ic (in_channel_length ic) in
  close_in ic; s

let rec write_all fd s off =
  if off < String.length s then
    write_all fd s (off + Unix.write_substring fd s off (String.length s - off))

(* One line: the JSON has no raw newline. *)
let reply s = write_all Unix.stdout (s ^ "\n") 0

(* A child's result comes back on a pipe; past the deadline the child is killed. *)
type ending = Timed_out | Finished

let run_child ~timeout_ms f =
  let r, w = Unix.pipe () in
  match Unix.fork () with
    0 ->
      Unix.close r;
      let result = try f () with e -> failure_report (Printexc.to_string e) in
      write_all w result 0;
      Unix._exit 0
  | pid ->
      Unix.close w;
      let deadline = Unix.gettimeofday () +. float_of_int timeout_ms /. 1000. in
      let buf = Buffer.create 65536 and chunk = Bytes.create 65536 in
      let rec pump () =
        let left = deadline -. Unix.gettimeofday () in
        if left <= 0. then Timed_out else
        match Unix.select [r] [] [] left with
          [], _, _ -> pump ()
        | _ ->
            let n = Unix.read r chunk 0 65536 in
            if n = 0 then Finished else (Buffer.add_subbytes buf chunk 0 n; pump ())
        | exception Unix.Unix_error (Unix.EINTR, _, _) -> pump () in
      let ending = pump () in
      (try Unix.kill pid Sys.sigkill with Unix.Unix_error _ -> ());
      let _, status = Unix.waitpid [] pid in
      Unix.close r;
      match ending, status with
        Timed_out, _ -> "{\"ok\":false,\"timeout\":true,\"error\":\"the replay timed out\"}"
      | Finished, Unix.WEXITED 0 when Buffer.length buf > 0 -> Buffer.contents buf
      | _, Unix.WEXITED c -> failure_report (Printf.sprintf "the replay exited %d" c)
      | _, (Unix.WSIGNALED s | Unix.WSTOPPED s) ->
          Printf.sprintf "{\"ok\":false,\"signal\":%d,\"error\":\"the replay died of a signal\"}" s

let serve () =
  let library_file = Sys.argv.(1) in
  let started = Unix.gettimeofday () in
  let records =
    try load_library (read_file library_file)
    with Replay_error msg | Sys_error msg ->
      print_string ("FAILED " ^ String.map (fun c -> if c = '\n' then ' ' else c) msg ^ "\n");
      exit 1 in
  note_library_constants ();
  Gc.compact ();
  Printf.printf "READY %d %d %d %d\n%!" records (library_size ()) (library_axiom_count ())
    (int_of_float ((Unix.gettimeofday () -. started) *. 1000.));
  let rec loop () =
    match input_line stdin with
      exception End_of_file -> ()
    | header ->
        (match String.split_on_char ' ' header with
           ["CHECK"; n; m; timeout_ms] ->
             let export = really_input_string stdin (int_of_string n) in
             let target = really_input_string stdin (int_of_string m) in
             reply (run_child ~timeout_ms:(int_of_string timeout_ms)
                      (fun () -> check ~export ~target))
         | _ -> reply (failure_report "bad request"));
        loop () in
  loop ()

let () = serve ()
