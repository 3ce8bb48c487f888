(* prooflock: writes the proofs recorded by recording_fusion.ml in the format replay.ml reads.

   Loaded by the worker right after the recording kernel, before the rest of HOL Light.

   The library export is written in chunks while HOL Light loads, one after each of its files
   (checkpoint): what was declared and defined since the last chunk, then the proofs of the
   theorems HOL Light now holds by name, its axioms and definitions. Each of those is then kept by
   the replayer under a library number ('S') and, here, its proof is cut down to that number
   (Plibrary): the derivation behind it is freed, so a worker holds about what HOL Light holds.

   A check's export holds what the checked file declared and defined, in the order it did, every
   axiom it made, then the proofs of its named theorems; a library theorem is a reference ('L'),
   any other theorem is written out in full. Nothing here is trusted: the replayer checks every
   step. *)

(* Terms by structure: a proof builds the same term afresh over and over. *)
module Terms = Hashtbl.Make (struct
  type t = term
  let equal a b = a == b || compare a b = 0
  let hash = Hashtbl.hash_param 64 1000
end);;

module Prooflock_export = struct

  type writer = {
    out : Buffer.t;
    strings : (string, int) Hashtbl.t;
    types : (hol_type, int) Hashtbl.t;
    terms : int Terms.t;                           (* term -> id, as HOL Light compares terms *)
    consed : (int * int * int, int) Hashtbl.t;     (* (tag, a, b) -> term id *)
    thms : (int, int) Hashtbl.t;                   (* proof serial -> theorem id *)
    tydefs : (int, int) Hashtbl.t;                 (* type definition serial -> abs theorem id *)
    uses : (int, int) Hashtbl.t;   (* check export: proof serial -> inferences yet to cite it *)
    kept : (int, unit) Hashtbl.t;  (* check export: proofs a later record names (never let go) *)
    mutable n_strings : int;
    mutable n_types : int;
    mutable n_terms : int;
    mutable n_thms : int;
  }

  let new_writer () = {
    out = Buffer.create 65536; strings = Hashtbl.create 1024; types = Hashtbl.create 1024;
    terms = Terms.create 65536; consed = Hashtbl.create 65536; thms = Hashtbl.create 65536;
    tydefs = Hashtbl.create 64; uses = Hashtbl.create 16; kept = Hashtbl.create 16; n_strings = 0; n_types = 0; n_terms = 0; n_thms = 0 }

  let magic = "PLHP1\n"

  let rec varint b n =
    if n < 128 then Buffer.add_char b (Char.chr n)
    else (Buffer.add_char b (Char.chr (128 lor (n land 127))); varint b (n lsr 7))

  let tag w c = Buffer.add_char w.out c

  let int w n = varint w.out n

  let str w s =
    match Hashtbl.find_opt w.strings s with
      Some i -> i
    | None ->
        tag w 's'; int w (String.length s); Buffer.add_string w.out s;
        let i = w.n_strings in
        w.n_strings <- i + 1; Hashtbl.add w.strings s i; i

  let rec ty w t =
    match Hashtbl.find_opt w.types t with
      Some i -> i
    | None ->
        if is_vartype t then (let s = str w (dest_vartype t) in tag w 'v'; int w s)
        else begin
          let name, args = dest_type t in
          let s = str w name in
          let ids = List.map (ty w) args in
          tag w 't'; int w s; int w (List.length ids); List.iter (int w) ids
        end;
        let i = w.n_types in
        w.n_types <- i + 1; Hashtbl.add w.types t i; i

  let cons w key write =
    match Hashtbl.find_opt w.consed key with
      Some i -> i
    | None ->
        write ();
        let i = w.n_terms in
        w.n_terms <- i + 1; Hashtbl.add w.consed key i; i

  (* A term met again, as the same object or built afresh, is not walked again. *)
  let rec tm w t =
    match Terms.find_opt w.terms t with
      Some i -> i
    | None ->
        let i =
          if is_var t then
            let name, vty = dest_var t in
            let s = str w name and y = ty w vty in
            cons w (0, s, y) (fun () -> tag w 'V'; int w s; int w y)
          else if is_const t then
            let name, cty = dest_const t in
            let s = str w name and y = ty w cty in
            cons w (1, s, y) (fun () -> tag w 'K'; int w s; int w y)
          else if is_comb t then
            let f, x = dest_comb t in
            let a = tm w f in
            let b = tm w x in
            cons w (2, a, b) (fun () -> tag w 'C'; int w a; int w b)
          else
            let v, body = dest_abs t in
            let a = tm w v in
            let b = tm w body in
            cons w (3, a, b) (fun () -> tag w 'A'; int w a; int w b) in
        Terms.replace w.terms t i;
        i

  let new_thm w serial =
    let i = w.n_thms in
    w.n_thms <- i + 1; Hashtbl.replace w.thms serial i; i

  (* Library numbers of the type definitions' two theorems: tyserial -> number of abs. *)
  let library_tydefs : (int, int) Hashtbl.t = Hashtbl.create 256

  (* The premises an inference record cites, once per citation, as proofs (an inference names
     no theorem: recording_fusion.ml). *)
  let cited p =
    match rule_of p with
      Ptrans (a, b) | Pmkcomb (a, b) | Peqmp (a, b) | Pdeduct (a, b) -> [a; b]
    | Pabs (_, a) | Pinst (_, a) | Pinstt (_, a) -> [a]
    | _ -> []

  (* What must be written before p: what it cites, or a type definition's premise. *)
  let premises p =
    match rule_of p with
      Ptyabs d | Ptyrep d ->
        if Hashtbl.mem library_tydefs d.tyserial then [] else [proof_of d.premise]
    | _ -> cited p

  let written w p = Hashtbl.mem w.thms (serial_of p)

  let id w p = Hashtbl.find w.thms (serial_of p)

  let reference w serial k = tag w 'L'; int w k; ignore (new_thm w serial)

  (* One type definition makes two theorems (abs, then rep): its record is written once, after
     its premise; a library one is two references. *)
  let write_tydef w d =
    match Hashtbl.find_opt w.tydefs d.tyserial with
      Some i -> i
    | None ->
        let i = w.n_thms in
        (match Hashtbl.find_opt library_tydefs d.tyserial with
           Some k ->
             tag w 'L'; int w k; tag w 'L'; int w (k + 1)
         | None ->
             let p = id w (proof_of d.premise) in
             let a = str w d.tyname and b = str w d.absname and c = str w d.repname in
             tag w 'Y'; int w a; int w b; int w c; int w p);
        w.n_thms <- i + 2; Hashtbl.add w.tydefs d.tyserial i; i

  let write_one w p =
    let serial = serial_of p in
    let done_ () = ignore (new_thm w serial) in
    match rule_of p with
      Plibrary k -> reference w serial k
    | Prefl t -> let a = tm w t in tag w 'r'; int w a; done_ ()
    | Pbeta t -> let a = tm w t in tag w 'e'; int w a; done_ ()
    | Passume t -> let a = tm w t in tag w 'a'; int w a; done_ ()
    | Paxiom t -> let a = tm w t in tag w 'X'; int w a; done_ ()
    | Pdef t -> let a = tm w t in tag w 'D'; int w a; done_ ()
    | Ptrans (a, b) -> tag w 'x'; int w (id w a); int w (id w b); done_ ()
    | Pmkcomb (a, b) -> tag w 'm'; int w (id w a); int w (id w b); done_ ()
    | Peqmp (a, b) -> tag w 'q'; int w (id w a); int w (id w b); done_ ()
    | Pdeduct (a, b) -> tag w 'd'; int w (id w a); int w (id w b); done_ ()
    | Pabs (v, a) -> let x = tm w v in tag w 'b'; int w x; int w (id w a); done_ ()
    | Pinst (theta, a) ->
        let pairs = List.map (fun (x, y) -> let p = tm w x in let q = tm w y in (p, q)) theta in
        tag w 'i'; int w (List.length pairs);
        List.iter (fun (p, q) -> int w p; int w q) pairs;
        int w (id w a); done_ ()
    | Pinstt (theta, a) ->
        let pairs = List.map (fun (x, y) -> let p = ty w x in let q = ty w y in (p, q)) theta in
        tag w 'j'; int w (List.length pairs);
        List.iter (fun (p, q) -> int w p; int w q) pairs;
        int w (id w a); done_ ()
    | Ptyabs d -> Hashtbl.replace w.thms serial (write_tydef w d)
    | Ptyrep d -> Hashtbl.replace w.thms serial (write_tydef w d + 1)

  (* A check export lets the replayer drop each theorem after the last record that cites it
     ('F'), so that a replay holds about what the kernel needs, not every step of every proof
     (miller_rabin.ml's replay held 2.7 GB). Before anything is written, every proof under
     `roots` (all that the export will write) is counted once, with how often it is cited. *)
  let count_uses w roots =
    let stack = Stack.create () in
    let visit p =
      let s = serial_of p in
      if not (Hashtbl.mem w.uses s) then (Hashtbl.replace w.uses s 0; Stack.push p stack) in
    List.iter (fun th -> let p = proof_of th in visit p; Hashtbl.replace w.kept (serial_of p) ())
      roots;
    while not (Stack.is_empty stack) do
      let p = Stack.pop stack in
      List.iter visit (premises p);
      List.iter
        (fun q -> let s = serial_of q in Hashtbl.replace w.uses s (Hashtbl.find w.uses s + 1))
        (cited p);
      (* a type definition's record cites its premise, outside any inference: kept *)
      match rule_of p with
        Ptyabs d | Ptyrep d -> Hashtbl.replace w.kept (serial_of (proof_of d.premise)) ()
      | _ -> ()
    done

  (* After p's record: each premise it cited for the last time is let go, unless kept. *)
  let release w p =
    List.iter
      (fun q ->
        let s = serial_of q in
        match Hashtbl.find_opt w.uses s with
          Some 1 ->
            Hashtbl.remove w.uses s;
            if not (Hashtbl.mem w.kept s) then (tag w 'F'; int w (id w q))
        | Some n -> Hashtbl.replace w.uses s (n - 1)
        | None -> ())
      (cited p)

  (* Post-order over the proof DAG, without recursion (derivations are deep). *)
  let write_thm w th =
    let root = proof_of th in
    let stack = Stack.create () in
    if not (written w root) then Stack.push (root, false) stack;
    while not (Stack.is_empty stack) do
      let p, expanded = Stack.pop stack in
      if not (written w p) then
        if expanded then (write_one w p; if Hashtbl.length w.uses > 0 then release w p)
        else begin
          Stack.push (p, true) stack;
          List.iter (fun q -> if not (written w q) then Stack.push (q, false) stack)
            (List.rev (premises p))
        end
    done;
    id w root

  type event = Type_event of string * origin | Const_event of string * origin

  let origin_serial = function
      Declared s -> s
    | Defined th -> serial_of (proof_of th)
    | Type_defined d -> d.tyserial

  (* Declarations and definitions made at serial >= from, oldest first. *)
  let signature_since from =
    let types =
      List.map (fun (n, origin) -> (origin_serial origin, Type_event (n, origin))) (type_origins ()) in
    let consts =
      List.map (fun (n, origin) -> (origin_serial origin, Const_event (n, origin))) (const_origins ()) in
    List.sort (fun (a, _) (b, _) -> compare a b)
      (List.filter (fun (s, _) -> s >= from) (types @ consts))

  (* The theorems write_signature writes. *)
  let signature_roots from =
    List.filter_map
      (fun (_, event) ->
        match event with
          Const_event (_, Defined th) | Type_event (_, Defined th) -> Some th
        | Type_event (_, Type_defined d) | Const_event (_, Type_defined d)
          when not (Hashtbl.mem library_tydefs d.tyserial) -> Some d.premise
        | _ -> None)
      (signature_since from)

  let write_signature w from =
    List.iter
      (fun (_, event) ->
        match event with
          Type_event (name, Declared _) ->
            let s = str w name in tag w 'T'; int w s; int w (get_type_arity name)
        | Const_event (name, Declared _) ->
            let s = str w name and y = ty w (get_const_type name) in
            tag w 'N'; int w s; int w y
        | Const_event (_, Defined th) | Type_event (_, Defined th) ->
            ignore (write_thm w th)
        | Type_event (_, Type_defined d) | Const_event (_, Type_defined d) ->
            if not (Hashtbl.mem library_tydefs d.tyserial) then ignore (write_thm w d.premise);
            ignore (write_tydef w d))
      (signature_since from)

  (* -- the library, in chunks ------------------------------------------------------------ *)

  let library_file = ref ""
  let library_next = ref 0     (* the next library number *)
  let library_mark = ref 0     (* serials below this are in an earlier chunk *)
  let chunks = ref 0

  (* Every toplevel value whose type is the kernel's theorem type, as a thunk list. *)
  let head_path = Prooflock_types.head_path  (* server.ml: per OCaml version *)

  (* The kernel's type of theorems with abbreviations expanded (thm is Hol.thm). *)
  let thm_path =
    let env = !Toploop.toplevel_env in
    let path, _ = Env.find_type_by_name (Longident.Lident "thm") env in
    match head_path env (Ctype.newconstr path []) with Some p -> p | None -> path

  let toplevel_theorems () =
    let env = !Toploop.toplevel_env in
    let found = ref [] in
    Env.fold_values
      (fun _ path description () ->
        match head_path env description.Types.val_type with
          Some p when Path.same p thm_path ->
            found := (Obj.obj (Toploop.eval_value_path env path) : thm) :: !found
        | _ -> ())
      None env ();
    !found

  (* Library numbers, given in the same order by the worker and by the chunk's writer (below):
     a type definition's two theorems, then each kept theorem, its proof cut down to its number
     (Plibrary); a theorem already cut keeps the number it has. *)
  let number_tydef d =
    Hashtbl.add library_tydefs d.tyserial !library_next;
    library_next := !library_next + 2

  let number th =
    match rule_of (proof_of th) with
      Plibrary _ -> false
    | _ -> set_rule (proof_of th) (Plibrary !library_next); incr library_next; true

  (* What a chunk keeps: its new type definitions; then its roots, and the theorems that defined
     its constants and types. *)
  let chunk_tydefs () =
    List.filter_map
      (fun (_, event) ->
        match event with
          Type_event (_, Type_defined d) when not (Hashtbl.mem library_tydefs d.tyserial) -> Some d
        | _ -> None)
      (signature_since !library_mark)

  let chunk_kept roots =
    roots
    @ List.filter_map
        (fun (_, event) ->
          match event with
            Const_event (_, Defined th) -> Some th
          | Type_event (_, Type_defined d) -> Some d.premise
          | _ -> None)
        (signature_since !library_mark)

  (* The chunk's bytes, numbering as it goes: in a child forked for the chunk (which still sees
     the proofs the worker cuts right after the fork), or by the worker itself. *)
  let write_chunk roots tydefs kept =
    let w = new_writer () in
    if !chunks = 0 then Buffer.add_string w.out magic;
    write_signature w !library_mark;
    List.iter
      (fun d ->
        let i = Hashtbl.find w.tydefs d.tyserial in
        tag w 'S'; int w i; tag w 'S'; int w (i + 1);
        number_tydef d)
      tydefs;
    List.iter (fun th -> ignore (write_thm w th)) roots;
    List.iter
      (fun th ->
        match rule_of (proof_of th) with
          Plibrary _ -> ()
        | _ -> let i = id w (proof_of th) in tag w 'S'; int w i; ignore (number th))
      kept;
    tag w 'Z';
    w.out

  let chunk_file n = Printf.sprintf "%s.%d" !library_file n

  let write_chunk_file file roots tydefs kept =
    let bytes = write_chunk roots tydefs kept in
    let oc = open_out_bin file in
    Buffer.output_buffer oc bytes;
    close_out oc

  (* Writing the chunks took about a third of the boot (52 of 170 s, measured), in this
     bytecode: each is written by a child forked at its checkpoint, while the worker numbers the
     same theorems and loads on; `library_finish` joins their files in order. A child's garbage
     collector copies much of the worker's heap (the boot's peak went from 1.5 to 2.1 GB): one
     child at a time, and none in a sandbox with less than 3 GB, where the worker writes each
     chunk itself. *)
  let max_writers =
    match Option.bind (Sys.getenv_opt "PROOFLOCK_MEMORY_MB") int_of_string_opt with
      Some mb when mb < 3072 -> 0
    | _ -> 1
  let () =
    Printf.printf "prooflock: the library export's chunks are written by %s\n%!"
      (if max_writers = 0 then "the worker" else "forked children")
  let writers = Queue.create ()            (* (pid, chunk file), oldest first *)
  let failed_writers = ref 0

  let reap_oldest () =
    let pid, _ = Queue.pop writers in
    if not (Prooflock_boot.exited_ok pid) then incr failed_writers

  let checkpoint roots =
    if !library_file <> "" then begin
      let mark = serial_now () + 1 in
      let tydefs = chunk_tydefs () in
      let kept = chunk_kept roots in
      let file = chunk_file !chunks in
      if max_writers = 0 then
        (* numbered as written *)
        (try write_chunk_file file roots tydefs kept with _ -> incr failed_writers)
      else begin
        if Queue.length writers >= max_writers then reap_oldest ();
        flush_all ();  (* nothing buffered is written twice *)
        let pid = Prooflock_boot.fork_child (fun () -> write_chunk_file file roots tydefs kept) in
        if pid < 0 then incr failed_writers else Queue.push (pid, file) writers;
        List.iter number_tydef tydefs;
        List.iter (fun th -> ignore (number th)) kept
      end;
      incr chunks;
      library_mark := mark
    end

  (* The library export, whole: every chunk's writer done, their files joined in order. False
     if any failed. *)
  let library_finish () =
    while not (Queue.is_empty writers) do reap_oldest () done;
    !failed_writers = 0
    && (try
          let oc = open_out_bin !library_file in
          for n = 0 to !chunks - 1 do
            let ic = open_in_bin (chunk_file n) in
            let bytes = really_input_string ic (in_channel_length ic) in
            close_in ic;
            output_string oc bytes;
            Sys.remove (chunk_file n)
          done;
          close_out oc;
          true
        with Sys_error _ | End_of_file -> false)

  (* What HOL Light holds now: its named theorems, axioms and definitions. *)
  let library_checkpoint () =
    checkpoint (toplevel_theorems () @ Hol.axioms () @ Hol.definitions ())

  (* -- a check ------------------------------------------------------------------------------ *)

  (* What was declared and defined from serial from on, every axiom made since, then the named
     theorems (R records) and which axioms a placeholder made (P); each other theorem is let go
     after the last record that cites it (F). *)
  let check_export ~from ~named ~axioms ~placeholders =
    let w = new_writer () in
    Buffer.add_string w.out magic;
    let placeholders =
      List.filter
        (fun th ->
          match rule_of (proof_of th) with
            Paxiom _ -> serial_of (proof_of th) >= from
          | _ -> false)
        placeholders in
    count_uses w (signature_roots from @ axioms @ List.map snd named @ placeholders);
    write_signature w from;
    List.iter (fun th -> ignore (write_thm w th)) axioms;
    List.iter
      (fun (name, th) ->
        let i = write_thm w th in
        let s = str w name in
        tag w 'R'; int w s; int w i)
      named;
    List.iter (fun th -> let i = write_thm w th in tag w 'P'; int w i) placeholders;
    Buffer.contents w.out

  (* A target statement, as parsed in a session no checked file ran in. *)
  let target_export t =
    let w = new_writer () in
    Buffer.add_string w.out magic;
    let i = tm w t in
    tag w 'G'; int w i;
    Buffer.contents w.out
end;;
