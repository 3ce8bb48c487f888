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

(* The lines of a /proc file (whose length reads as 0). *)
let proc_lines path =
  match open_in path with
    exception Sys_error _ -> []
  | ic ->
      let rec take acc = match input_line ic with
          line -> take (line :: acc)
        | exception End_of_file -> close_in ic; List.rev acc in
      take []

(* The first number after `prefix` on its line of a /proc file ("VmPeak:  123 kB", "Max address
   space  805306368  805306368  bytes"); None if absent or unlimited. *)
let field prefix path =
  List.find_map
    (fun line ->
      if String.starts_with ~prefix line then
        match List.filter (( <> ) "") (String.split_on_char ' ' line) with
          _ :: words -> List.find_map int_of_string_opt words
        | [] -> None
      else None)
    (proc_lines path)

(* Under an address-space limit (the local backend) a replay out of memory aborts ("Fatal error:
   out of memory") more often than it raises Out_of_memory: the child's peak, read here while it
   runs, says whether it came near the limit. On docker the kit reads the cgroup's OOM count. *)
let address_space_limit () = field "Max address space" "/proc/self/limits"

let run_child ~timeout_ms f =
  let r, w = Unix.pipe () in
  match Unix.fork () with
    0 ->
      Unix.close r;
      (* What the runtime says as it dies must not reach the kit's channel (stderr is stdout). *)
      (try Unix.dup2 (Unix.openfile "/dev/null" [ Unix.O_WRONLY ] 0) Unix.stderr
       with Unix.Unix_error _ -> ());
      let result = try f () with e -> failure_report (Printexc.to_string e) in
      write_all w result 0;
      Unix._exit 0
  | pid ->
      Unix.close w;
      let deadline = Unix.gettimeofday () +. float_of_int timeout_ms /. 1000. in
      let buf = Buffer.create 65536 and chunk = Bytes.create 65536 in
      let peak_kb = ref 0 in
      let observe () =
        match field "VmPeak:" (Printf.sprintf "/proc/%d/status" pid) with
          Some kb -> peak_kb := max !peak_kb kb
        | None -> () in
      let rec pump () =
        observe ();
        let left = deadline -. Unix.gettimeofday () in
        if left <= 0. then Timed_out else
        match Unix.select [r] [] [] (Float.min left 0.25) with
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
          let near_limit =
            match address_space_limit () with
              Some limit -> !peak_kb * 1024 >= limit / 4 * 3
            | None -> false in
          if near_limit then
            Printf.sprintf
              "{\"ok\":false,\"memory\":true,\"signal\":%d,\"error\":\"the replay ran out of memory\"}" s
          else
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
