(* prooflock's proof replayer for HOL Light.

   Compiled after HOL Light's own lib.ml and fusion.ml (unchanged, read from HOL Light's
   directory), and nothing else: no parser, no tactics, no code of a checked file. It reads proof
   exports (replay_format below) and re-derives every theorem in them with the kernel's primitive
   rules, from HOL Light's axioms and definitions, then reports in JSON what it derived: each
   named theorem's statement, the axioms and definitions it rests on, and whether it states a
   target. An export is data: the worst a forged one can do is fail to replay.

   Usage: replay LIBRARY.export  (replay_server.ml) checks the library export, says
   "READY <records> <theorems> <axioms> <ms>", then serves on stdin:
       request  "CHECK <length> <target_length> <timeout_ms>\n" <export> <target export>
       reply    one line of JSON
   The library export is replayed once; each check runs in a forked child, so nothing one check
   defines is seen by another.

   Format: magic "PLHP1\n", then records. Integers are unsigned LEB128. Each record starts with a
   tag byte and defines the next string, type, term or theorem, in the order they are needed:
     's' len bytes            string
     'v' s                    type variable            't' s n ty*n       type application
     'V' s ty                 variable                 'K' s ty           constant
     'C' tm tm                application              'A' tm tm          abstraction
     'T' s n                  new_type                 'N' s ty           new_constant
     'r' tm  REFL     'x' th th TRANS    'm' th th MK_COMB   'b' tm th ABS    'e' tm BETA
     'a' tm  ASSUME   'q' th th EQ_MP    'd' th th DEDUCT_ANTISYM_RULE
     'i' n (tm tm)*n th INST            'j' n (ty ty)*n th INST_TYPE
     'X' tm  new_axiom   'D' tm new_basic_definition   'Y' s s s th new_basic_type_definition
             (two theorems: abs then rep)
     'L' k        the k-th theorem the library keeps
     'S' th       (library export only) keep this theorem as the library's next
     'Z'          (library export only) the end of a chunk: what it did not keep is forgotten
     'R' s th     a named theorem of the checked file      'P' th   an axiom made by a placeholder
     'F' th       (check export) no later record cites this theorem: the replayer lets it go
     'G' tm       (target export only) the target statement
*)

exception Replay_error of string

let replay_fail fmt = Printf.ksprintf (fun s -> raise (Replay_error s)) fmt

(* ---------------------------------------------------------------------------------------- *)
(* Reading.                                                                                  *)
(* ---------------------------------------------------------------------------------------- *)

type input = { data : string; mutable pos : int }

let magic = "PLHP1\n"

let input_of data =
  if String.length data < String.length magic || String.sub data 0 (String.length magic) <> magic
  then replay_fail "not a proof export";
  { data = data; pos = String.length magic }

let at_end inp = inp.pos >= String.length inp.data

let byte inp =
  if at_end inp then replay_fail "truncated export";
  let c = inp.data.[inp.pos] in
  inp.pos <- inp.pos + 1;
  c

let rec varint_from inp shift acc =
  if shift > 56 then replay_fail "integer too large";
  let b = Char.code (byte inp) in
  let acc = acc lor ((b land 127) lsl shift) in
  if b land 128 = 0 then acc else varint_from inp (shift + 7) acc

let varint inp = varint_from inp 0 0

let bytes_of inp n =
  if n < 0 || inp.pos + n > String.length inp.data then replay_fail "truncated string";
  let s = String.sub inp.data inp.pos n in
  inp.pos <- inp.pos + n;
  s

(* Growable arrays of what has been replayed so far. *)
type 'a table = { mutable items : 'a array; mutable count : int; dummy : 'a; kind : string }

let table kind dummy = { items = Array.make 1024 dummy; count = 0; dummy = dummy; kind = kind }

let push t x =
  if t.count = Array.length t.items then begin
    let bigger = Array.make (2 * t.count) t.dummy in
    Array.blit t.items 0 bigger 0 t.count;
    t.items <- bigger
  end;
  t.items.(t.count) <- x;
  t.count <- t.count + 1

let get t i =
  if i < 0 || i >= t.count then replay_fail "%s %d is not defined yet" t.kind i;
  t.items.(i)

(* ---------------------------------------------------------------------------------------- *)
(* What a replayed theorem rests on: axioms and definitions of the checked file (indices into  *)
(* its own records), and the library's axioms as a bit set.                                   *)
(* ---------------------------------------------------------------------------------------- *)

type origin =
    From_library of int          (* bit set of library axioms *)
  | Axiom of int                 (* index in the axioms made by this export *)
  | Definition of int            (* index in the definitions made by this export *)
  | Inference of int list        (* premises: theorem ids in this export *)

type state = {
  strings : string table;
  types : hol_type table;
  terms : term table;
  thms : thm table;
  origins : origin table;
  mutable axioms_made : (term * bool) list;   (* statement, made by a placeholder; newest first *)
  mutable definitions_made : term list;       (* newest first *)
  mutable constants_made : (string * hol_type) list;
  mutable types_made : (string * int) list;
  mutable roots : (string * int) list;        (* newest first *)
  mutable target : term option;
}

let new_state () = {
  strings = table "string" "";
  types = table "type" bool_ty;
  terms = table "term" (mk_var ("", bool_ty));
  thms = table "theorem" (ASSUME (mk_var ("", bool_ty)));
  origins = table "theorem" (Inference []);
  axioms_made = []; definitions_made = []; constants_made = []; types_made = [];
  roots = []; target = None;
}

(* The theorems the library keeps (by number), with the bit set of library axioms under each. *)
let library : (thm * int) table = table "library theorem" (ASSUME (mk_var ("", bool_ty)), 0)
let library_axioms : term list ref = ref []

(* ---------------------------------------------------------------------------------------- *)
(* Building types and terms through the kernel's constructors only.                          *)
(* ---------------------------------------------------------------------------------------- *)

(* The instantiation that turns a constant's generic type into `ty`, or a failure. *)
let rec type_match generic ty theta =
  if is_vartype generic then
    (match List.filter (fun (_, v) -> v = generic) theta with
       [] -> (ty, generic) :: theta
     | (t, _) :: _ -> if t = ty then theta else replay_fail "constant type does not match")
  else
    let name, args = dest_type generic in
    let name', args' =
      try dest_type ty with Failure _ -> replay_fail "constant type does not match" in
    if name <> name' || List.length args <> List.length args' then
      replay_fail "constant type does not match";
    List.fold_left2 (fun acc a b -> type_match a b acc) theta args args'

let make_const name ty =
  let generic =
    try get_const_type name with Failure _ -> replay_fail "unknown constant %s" name in
  let tm = mk_const (name, type_match generic ty []) in
  if type_of tm <> ty then replay_fail "constant %s at a wrong type" name;
  tm

let kernel what f = try f () with Failure msg -> replay_fail "%s: %s" what msg

(* ---------------------------------------------------------------------------------------- *)
(* Replaying one export.                                                                     *)
(* ---------------------------------------------------------------------------------------- *)

let add_thm st th origin = push st.thms th; push st.origins origin

(* A theorem the export let go is gone: citing it again fails the replay. *)
let get_thm st i =
  let th = get st.thms i in
  if th == st.thms.dummy then replay_fail "theorem %d was let go" i;
  th

(* Only the theorem goes: what it rests on (its origin) stays for the report. *)
let let_go st i = ignore (get_thm st i); st.thms.items.(i) <- st.thms.dummy

let library_bits st id =
  match get st.origins id with From_library bits -> bits | _ -> -1

let combine_bits st ids =
  List.fold_left
    (fun acc id -> if acc < 0 then acc else
       let b = library_bits st id in if b < 0 then -1 else acc lor b) 0 ids

(* In library mode every theorem is the library's: its origin is the set of axioms under it. *)
let inference st ~library_mode ids =
  if library_mode then From_library (combine_bits st ids) else Inference ids

let replay_record st ~library_mode inp =
  let str () = get st.strings (varint inp) in
  let ty () = get st.types (varint inp) in
  let tm () = get st.terms (varint inp) in
  let thid () = let i = varint inp in ignore (get_thm st i); i in
  let th i = get_thm st i in
  let step what ids f = add_thm st (kernel what f) (inference st ~library_mode ids) in
  match byte inp with
    's' -> let n = varint inp in push st.strings (bytes_of inp n)
  | 'v' -> let s = str () in push st.types (mk_vartype s)
  | 't' ->
      let s = str () in
      let n = varint inp in
      let args = List.init n (fun _ -> ty ()) in
      push st.types (kernel "mk_type" (fun () -> mk_type (s, args)))
  | 'V' -> let s = str () in let t = ty () in push st.terms (mk_var (s, t))
  | 'K' -> let s = str () in let t = ty () in push st.terms (make_const s t)
  | 'C' -> let f = tm () in let x = tm () in push st.terms (kernel "mk_comb" (fun () -> mk_comb (f, x)))
  | 'A' -> let v = tm () in let b = tm () in push st.terms (kernel "mk_abs" (fun () -> mk_abs (v, b)))
  | 'T' ->
      let s = str () in
      let n = varint inp in
      kernel "new_type" (fun () -> new_type (s, n));
      st.types_made <- (s, n) :: st.types_made
  | 'N' ->
      let s = str () in
      let t = ty () in
      kernel "new_constant" (fun () -> new_constant (s, t));
      st.constants_made <- (s, t) :: st.constants_made
  | 'r' -> let t = tm () in step "REFL" [] (fun () -> REFL t)
  | 'x' -> let a = thid () in let b = thid () in step "TRANS" [a; b] (fun () -> TRANS (th a) (th b))
  | 'm' ->
      let a = thid () in let b = thid () in step "MK_COMB" [a; b] (fun () -> MK_COMB (th a, th b))
  | 'b' -> let v = tm () in let a = thid () in step "ABS" [a] (fun () -> ABS v (th a))
  | 'e' -> let t = tm () in step "BETA" [] (fun () -> BETA t)
  | 'a' -> let t = tm () in step "ASSUME" [] (fun () -> ASSUME t)
  | 'q' -> let a = thid () in let b = thid () in step "EQ_MP" [a; b] (fun () -> EQ_MP (th a) (th b))
  | 'd' ->
      let a = thid () in let b = thid () in
      step "DEDUCT_ANTISYM_RULE" [a; b] (fun () -> DEDUCT_ANTISYM_RULE (th a) (th b))
  | 'i' ->
      let n = varint inp in
      let theta = List.init n (fun _ -> let a = tm () in let b = tm () in (a, b)) in
      let a = thid () in
      step "INST" [a] (fun () -> INST theta (th a))
  | 'j' ->
      let n = varint inp in
      let theta = List.init n (fun _ -> let a = ty () in let b = ty () in (a, b)) in
      let a = thid () in
      step "INST_TYPE" [a] (fun () -> INST_TYPE theta (th a))
  | 'X' ->
      let t = tm () in
      let ax = kernel "new_axiom" (fun () -> new_axiom t) in
      if library_mode then begin
        let index = List.length !library_axioms in
        if index > 60 then replay_fail "too many library axioms";
        library_axioms := !library_axioms @ [t];
        add_thm st ax (From_library (1 lsl index))
      end else begin
        add_thm st ax (Axiom (List.length st.axioms_made));
        st.axioms_made <- (t, false) :: st.axioms_made
      end
  | 'D' ->
      let t = tm () in
      let d = kernel "new_basic_definition" (fun () -> new_basic_definition t) in
      if library_mode then add_thm st d (From_library 0)
      else begin
        add_thm st d (Definition (List.length st.definitions_made));
        st.definitions_made <- concl d :: st.definitions_made;
        let c = rand (rator (concl d)) in
        st.constants_made <- dest_const c :: st.constants_made
      end
  | 'Y' ->
      let tyname = str () in let absname = str () in let repname = str () in
      let a = thid () in
      let abs_th, rep_th =
        kernel "new_basic_type_definition"
          (fun () -> new_basic_type_definition tyname (absname, repname) (th a)) in
      if library_mode then begin
        let bits = combine_bits st [a] in
        add_thm st abs_th (From_library bits);
        add_thm st rep_th (From_library bits)
      end else begin
        let index = List.length st.definitions_made in
        add_thm st abs_th (Definition index);
        add_thm st rep_th (Definition index);
        st.definitions_made <- concl rep_th :: concl abs_th :: st.definitions_made;
        st.types_made <- (tyname, get_type_arity tyname) :: st.types_made;
        st.constants_made <- (repname, get_const_type repname) :: (absname, get_const_type absname)
                             :: st.constants_made
      end
  | 'L' ->
      let k = varint inp in
      if k >= library.count then replay_fail "no library theorem %d" k;
      let th, bits = library.items.(k) in
      add_thm st th (From_library bits)
  | 'S' ->
      let a = thid () in
      if not library_mode then replay_fail "a library theorem outside the library";
      push library (th a, library_bits st a)
  | 'R' -> let s = str () in let a = thid () in st.roots <- (s, a) :: st.roots
  | 'F' ->
      if library_mode then replay_fail "a theorem let go in the library";
      let_go st (varint inp)
  | 'P' ->
      let a = thid () in
      (match get st.origins a with
         Axiom k ->
           st.axioms_made <-
             List.mapi (fun i (t, p) ->
                 if i = List.length st.axioms_made - 1 - k then (t, true) else (t, p))
               st.axioms_made
       | _ -> replay_fail "a placeholder mark on a theorem that is not an axiom")
  | 'G' -> let t = tm () in st.target <- Some t
  | c -> replay_fail "unknown record %C" c

(* Records until the end (or, in the library, until the end of a chunk: true). *)
let replay_records st ~library_mode inp records =
  let chunk_end = ref false in
  (try
     while not (at_end inp || !chunk_end) do
       if library_mode && inp.data.[inp.pos] = 'Z' then (inp.pos <- inp.pos + 1; chunk_end := true)
       else (replay_record st ~library_mode inp; incr records)
     done
   with Replay_error msg -> replay_fail "record %d: %s" (!records + 1) msg
      | Stack_overflow -> replay_fail "record %d: nested too deeply" (!records + 1)
      | Invalid_argument msg -> replay_fail "record %d: %s" (!records + 1) msg)

let replay_export st ~library_mode data =
  let inp = input_of data in
  let records = ref 0 in
  replay_records st ~library_mode inp records;
  !records

(* The library, chunk by chunk, each in a state of its own: only what a chunk keeps survives it. *)
let load_library data =
  let inp = input_of data in
  let records = ref 0 in
  while not (at_end inp) do
    replay_records (new_state ()) ~library_mode:true inp records
  done;
  !records

(* ---------------------------------------------------------------------------------------- *)
(* Printing, for the report only (no verdict depends on it): HOL-like notation.              *)
(* ---------------------------------------------------------------------------------------- *)

(* Printing walks a term as a tree, and a term's tree can be exponential in the DAG a valid
   proof builds (REFL of t_{n+1} = t_n + t_n): every print spends from a budget of nodes, and a
   term over it is printed as too large, so no valid proof can stall the report. *)
exception Print_budget

let print_nodes = 20000
let print_budget = ref print_nodes

let spend () = if !print_budget <= 0 then raise Print_budget else decr print_budget

let too_large = Printf.sprintf "<a term too large to print: over %d nodes>" print_nodes

(* A printing longer than this is cut: the kit shows a statement's first 1000 characters. *)
let print_cut = 2000

let bounded f x =
  print_budget := print_nodes;
  match f x with
    text when String.length text > print_cut -> String.sub text 0 (print_cut - 3) ^ "..."
  | text -> text
  | exception Print_budget -> too_large

(* The constants HOL Light's library has: a constant a checked file made is printed braced when
   its name could read as anything else (a numeral, an operator, a term: `5`, `2 + 2`). *)
let library_constants : (string, unit) Hashtbl.t = Hashtbl.create 4096

let note_library_constants () =
  List.iter (fun (name, _) -> Hashtbl.replace library_constants name ()) (constants ())

let identifier name =
  String.length name > 0
  && (match name.[0] with 'a'..'z' | 'A'..'Z' | '_' -> true | _ -> false)
  && String.for_all
       (fun c -> match c with 'a'..'z' | 'A'..'Z' | '0'..'9' | '_' | '\'' -> true | _ -> false)
       name

let braced name = "{" ^ String.concat "\\}" (String.split_on_char '}' name) ^ "}"

let infixes = [ "<=>", 2; "==>", 4; "\\/", 6; "/\\", 8; "=", 12; "<", 12; "<=", 12; ">", 12;
                ">=", 12; "IN", 11; "SUBSET", 12; "UNION", 16; "INTER", 20; "DIFF", 18;
                "+", 16; "-", 18; "*", 20; "/", 22; "EXP", 24; "DIV", 22; "MOD", 22;
                "real_add", 16; "real_sub", 18; "real_mul", 20; "real_div", 22; "real_pow", 24;
                "real_le", 12; "real_lt", 12; "real_ge", 12; "real_gt", 12;
                "int_add", 16; "int_sub", 18; "int_mul", 20; "int_le", 12; "int_lt", 12;
                "int_ge", 12; "int_gt", 12; "int_pow", 24; ",", 14; "o", 26; "HAS_SIZE", 12;
                "divides", 12; "treal_eq", 12; "hreal_le", 12 ]

let binders = [ "!"; "?"; "?!"; "@"; "lambda" ]

let rec numeral tm =
  match (try Some (dest_comb tm) with Failure _ -> None) with
    Some (f, x) when is_const f && fst (dest_const f) = "BIT0" ->
      Option.map (fun n -> Num.mult_num (Num.num_of_int 2) n) (numeral x)
  | Some (f, x) when is_const f && fst (dest_const f) = "BIT1" ->
      Option.map (fun n -> Num.succ_num (Num.mult_num (Num.num_of_int 2) n)) (numeral x)
  | None when is_const tm && fst (dest_const tm) = "_0" -> Some (Num.num_of_int 0)
  | _ -> None

(* Fresh names (_123 variables, ?123 type variables) come from counters whose values depend on
   everything run before: printed renumbered in order of appearance, a statement reads the same
   whichever worker made it. *)
let fresh_names : (string * string) list ref = ref []

let is_fresh prefix name =
  String.length name > 1 && name.[0] = prefix
  && String.for_all (fun c -> c >= '0' && c <= '9') (String.sub name 1 (String.length name - 1))

let shown prefix name =
  if not (is_fresh prefix name) then name else
  match List.assoc_opt name !fresh_names with
    Some n -> n
  | None ->
      let count = List.length (List.filter (fun (_, n) -> n.[0] = prefix) !fresh_names) in
      let n = String.make 1 prefix ^ string_of_int (count + 1) in
      fresh_names := (name, n) :: !fresh_names; n

let rec print_type_at outer ty =
  spend ();
  if is_vartype ty then shown '?' (dest_vartype ty) else
  match dest_type ty with
    "fun", [a; b] ->
      let s = print_type_at true a ^ "->" ^ print_type_at false b in
      if outer then "(" ^ s ^ ")" else s
  | name, [] -> name
  | name, [arg] -> print_type_at true arg ^ " " ^ name
  | name, args -> "(" ^ String.concat "," (List.map (print_type_at false) args) ^ ")" ^ name

let print_type ty = fresh_names := []; bounded (print_type_at false) ty

let name_of tm =
  if is_var tm then shown '_' (fst (dest_var tm)) else if is_const tm then fst (dest_const tm) else ""

(* A name as printed: a variable's or a file's constant's that is no plain identifier braced. *)
let printed_name tm =
  let name = name_of tm in
  if identifier name || (is_var tm && is_fresh '_' (fst (dest_var tm))) then name
  else if is_const tm && Hashtbl.mem library_constants name then name
  else braced name

let library_const tm = is_const tm && Hashtbl.mem library_constants (fst (dest_const tm))

let rec print_term prec tm =
  spend ();
  let paren p s = if p < prec then "(" ^ s ^ ")" else s in
  if is_var tm then printed_name tm
  else if is_const tm then
    let name = printed_name tm in
    if library_const tm && (List.mem_assoc name infixes || List.mem name binders) then
      "(" ^ name ^ ")"
    else name
  else if is_abs tm then
    let v, body = dest_abs tm in
    let name = printed_name v in
    paren 0 ("\\" ^ name ^ ". " ^ print_term 0 body)
  else
    let f, x = dest_comb tm in
    let fname = if library_const f then name_of f else "" in
    if fname = "NUMERAL" then
      (match numeral x with Some n -> Num.string_of_num n | None -> "NUMERAL " ^ print_term 100 x)
    else if List.mem fname binders && is_abs x then
      (* !m n. body for !m. !n. body *)
      let rec gather acc tm =
        match (try Some (dest_comb tm) with Failure _ -> None) with
          Some (g, y) when name_of g = fname && library_const g && is_abs y ->
            spend ();
            let v, body = dest_abs y in gather (printed_name v :: acc) body
        | _ -> (List.rev acc, tm) in
      let names, body = gather [] tm in
      paren 0 (fname ^ String.concat " " names ^ ". " ^ print_term 0 body)
    else if fname = "~" then paren 30 ("~" ^ print_term 30 x)
    else
      match (try Some (dest_comb f) with Failure _ -> None) with
        Some (op, l) when library_const op && List.mem_assoc (name_of op) infixes ->
          let p = List.assoc (name_of op) infixes in
          let op_name = name_of op in
          let shown = match op_name with
              "real_add" -> "+" | "real_sub" -> "-" | "real_mul" -> "*" | "real_div" -> "/"
            | "real_pow" -> "pow" | "real_le" -> "<=" | "real_lt" -> "<" | "real_ge" -> ">="
            | "real_gt" -> ">" | "int_add" -> "+" | "int_sub" -> "-" | "int_mul" -> "*"
            | "int_le" -> "<=" | "int_lt" -> "<" | "int_ge" -> ">=" | "int_gt" -> ">"
            | "int_pow" -> "pow" | s -> s in
          let shown = if type_of l = bool_ty && op_name = "=" then "<=>" else shown in
          paren p (print_term (p + 1) l ^ " " ^ shown ^ " " ^ print_term p x)
      | _ -> paren 50 (print_term 50 f ^ " " ^ print_term 51 x)

(* Printing is for the report only: a term it cannot print is shown as such, never a failure. *)
let print_term prec tm =
  bounded (fun tm -> try print_term prec tm with Failure _ | Not_found -> "<term>") tm

(* An axiom or a definition, printed as HOL Light prints the theorem it is. *)
let print_fact tm = fresh_names := []; "|- " ^ print_term 0 tm

(* A fact as a key no printing can make ambiguous (the printing above hides types, shows
   real_add as +, and prints a constant named 2 as the numeral): every variable and constant
   with its type, constants braced, type variables quoted, applications and abstractions
   bracketed. A name that could run into that syntax is written as a quoted string. An allowed
   axiom is named by this key, never by its printing; theorems and definitions carry theirs. *)
let key_name ~special ~leading name =
  let odd c = String.contains special c || c = '"' || c < ' ' in
  if name <> "" && (String.exists odd name || String.contains leading name.[0]) then begin
    let b = Buffer.create (String.length name + 2) in
    Buffer.add_char b '"';
    String.iter
      (fun c ->
        if c = '"' || c = '\\' then (Buffer.add_char b '\\'; Buffer.add_char b c)
        else if c < ' ' then Buffer.add_string b (Printf.sprintf "\\x%02x" (Char.code c))
        else Buffer.add_char b c)
      name;
    Buffer.add_char b '"';
    Buffer.contents b
  end else name

let term_name = key_name ~special:"{}():" ~leading:""
let type_name = key_name ~special:"{}():," ~leading:"'"

let rec typed_type ty =
  spend ();
  if is_vartype ty then "'" ^ type_name (shown '?' (dest_vartype ty)) else
  match dest_type ty with
    name, [] -> type_name name
  | name, args -> "(" ^ String.concat "," (List.map typed_type args) ^ ")" ^ type_name name

let rec typed_term tm =
  spend ();
  if is_var tm then
    let name, ty = dest_var tm in
    let name = shown '_' name in
    let name = if name <> "" && name.[0] = '\\' then key_name ~special:"" ~leading:"\\" name
      else term_name name in
    "(" ^ name ^ ":" ^ typed_type ty ^ ")"
  else if is_const tm then
    let name, ty = dest_const tm in "{" ^ term_name name ^ ":" ^ typed_type ty ^ "}"
  else if is_abs tm then
    let v, body = dest_abs tm in "(\\" ^ typed_term v ^ ". " ^ typed_term body ^ ")"
  else
    let f, x = dest_comb tm in "(" ^ typed_term f ^ " " ^ typed_term x ^ ")"

(* Never cut: a key is whole or, past the budget, no key (which no allowed axiom names). *)
let too_large_key = Printf.sprintf "<too large to key: over %d nodes>" print_nodes

let typed_fact tm =
  fresh_names := [];
  print_budget := print_nodes;
  try "|- " ^ typed_term tm with
    Print_budget -> too_large_key
  | Failure _ | Not_found | Stack_overflow -> "<term>"

(* A theorem's key: its hypotheses' keys, then its conclusion's. *)
let typed_sequent th =
  fresh_names := [];
  print_budget := print_nodes;
  try String.concat ", " (List.map typed_term (hyp th)) ^ "|- " ^ typed_term (concl th) with
    Print_budget -> too_large_key
  | Failure _ | Not_found | Stack_overflow -> "<term>"

let print_sequent th =
  fresh_names := [];
  let hyps = List.map (print_term 0) (hyp th) in
  String.concat ", " hyps ^ (if hyps = [] then "|- " else " |- ") ^ print_term 0 (concl th)

(* ---------------------------------------------------------------------------------------- *)
(* Targets: equal up to renaming bound variables and, consistently, type variables.          *)
(* ---------------------------------------------------------------------------------------- *)

let canonical_types tm =
  let vars = type_vars_in_term tm in
  inst (List.mapi (fun i v -> (mk_vartype ("?" ^ string_of_int i), v)) vars) tm

(* Whether a term's tree, its types' included, has at most `n` nodes: the comparison below
   walks trees, and a statement larger than the target's (which is a parsed text, so a tree)
   cannot state it, however large its tree is. *)
let tree_within n tm =
  let left = ref n in
  let count () = decr left; if !left < 0 then raise Exit in
  let rec ty t = count (); if not (is_vartype t) then List.iter ty (snd (dest_type t)) in
  let rec term t =
    count ();
    if is_var t || is_const t then ty (type_of t)
    else if is_abs t then (let v, b = dest_abs t in term v; term b)
    else (let f, x = dest_comb t in term f; term x) in
  try term tm; true with Exit -> false

let tree_size tm =
  let rec grow n = if tree_within n tm then n else grow (2 * n) in
  grow 1024

let states target th =
  hyp th = [] && tree_within (tree_size target) (concl th)
  && aconv (canonical_types (concl th)) (canonical_types target)

(* ---------------------------------------------------------------------------------------- *)
(* JSON.                                                                                      *)
(* ---------------------------------------------------------------------------------------- *)

let json_string s =
  let b = Buffer.create (String.length s + 2) in
  Buffer.add_char b '"';
  String.iter
    (fun c -> match c with
        '"' -> Buffer.add_string b "\\\""
      | '\\' -> Buffer.add_string b "\\\\"
      | '\n' -> Buffer.add_string b "\\n"
      | c when Char.code c < 32 -> Buffer.add_string b (Printf.sprintf "\\u%04x" (Char.code c))
      | c -> Buffer.add_char b c)
    s;
  Buffer.add_char b '"';
  Buffer.contents b

let json_list items = "[" ^ String.concat "," items ^ "]"

(* The axioms and definitions (indices) under a theorem of this export, and its library bits. *)
let dependencies st root =
  let seen = Hashtbl.create 1024 in
  let axioms = ref [] and definitions = ref [] and bits = ref 0 in
  let stack = ref [root] in
  while !stack <> [] do
    let id = List.hd !stack in
    stack := List.tl !stack;
    if not (Hashtbl.mem seen id) then begin
      Hashtbl.add seen id ();
      match get st.origins id with
        From_library b -> bits := !bits lor b
      | Axiom k -> axioms := k :: !axioms
      | Definition k -> definitions := k :: !definitions
      | Inference ids -> stack := ids @ !stack
    end
  done;
  (List.sort_uniq compare !axioms, List.sort_uniq compare !definitions, !bits)

let report st records =
  let axioms = Array.of_list (List.rev st.axioms_made) in
  let definitions = Array.of_list (List.rev st.definitions_made) in
  let library_axioms = Array.of_list !library_axioms in
  let theorem (name, id) =
    let th = get_thm st id in
    let ax, defs, bits = dependencies st id in
    let library =
      List.filter_map (fun i -> if bits land (1 lsl i) <> 0 then Some i else None)
        (List.init (Array.length library_axioms) (fun i -> i)) in
    let target =
      match st.target with
        None -> "null"
      | Some t -> if states t th then "\"same\"" else "\"differs\"" in
    Printf.sprintf
      "{\"name\":%s,\"statement\":%s,\"typed\":%s,\"hypotheses\":%d,\"axioms\":%s,\
       \"placeholders\":%s,\"definitions\":%s,\"library_axioms\":%s,\"target\":%s}"
      (json_string name) (json_string (print_sequent th)) (json_string (typed_sequent th))
      (List.length (hyp th))
      (json_list (List.filter_map (fun k ->
           if snd axioms.(k) then None else Some (json_string (print_fact (fst axioms.(k))))) ax))
      (json_list (List.filter_map (fun k ->
           if snd axioms.(k) then Some (json_string (print_fact (fst axioms.(k)))) else None) ax))
      (json_list (List.map (fun k -> json_string (print_fact definitions.(k))) defs))
      (json_list (List.map (fun i -> json_string (print_fact library_axioms.(i))) library))
      target
  in
  Printf.sprintf
    "{\"ok\":true,\"records\":%d,\"theorems\":%s,\"axioms\":%s,\"definitions\":%s,\
     \"definition_keys\":%s,\"constants\":%s,\"types\":%s,\"target\":%s}"
    records
    (json_list (List.map theorem (List.rev st.roots)))
    (json_list (List.map (fun (t, p) ->
         Printf.sprintf "{\"statement\":%s,\"placeholder\":%b,\"typed\":%s}"
           (json_string (print_fact t)) p (json_string (typed_fact t)))
         (Array.to_list axioms)))
    (json_list (List.map (fun t -> json_string (print_fact t)) (Array.to_list definitions)))
    (json_list (List.map (fun t -> json_string (typed_fact t)) (Array.to_list definitions)))
    (json_list (List.rev_map (fun (n, t) ->
         Printf.sprintf "{\"name\":%s,\"type\":%s}" (json_string n) (json_string (print_type t)))
         st.constants_made))
    (json_list (List.rev_map (fun (n, a) ->
         Printf.sprintf "{\"name\":%s,\"arity\":%d}" (json_string n) a) st.types_made))
    (match st.target with None -> "null" | Some t -> fresh_names := []; json_string (print_term 0 t))

let report_cap = 3 lsl 20

let failure_report msg = Printf.sprintf "{\"ok\":false,\"error\":%s}" (json_string msg)

(* One check: the target first (read while only the library is defined, so that no constant the
   checked file defines can stand for a name in it), then the file's export. *)
let check ~export ~target =
  try
    let target_term =
      if target = "" then None else begin
        let tst = new_state () in
        ignore (replay_export tst ~library_mode:false target);
        if tst.thms.count > 0 || tst.roots <> [] || tst.constants_made <> [] || tst.types_made <> []
        then replay_fail "the target export holds more than a statement";
        match tst.target with
          Some t when type_of t = bool_ty -> Some t
        | _ -> replay_fail "the target export holds no statement"
      end in
    let st = new_state () in
    let records = replay_export st ~library_mode:false export in
    if st.target <> None then replay_fail "the export names a target";
    st.target <- target_term;
    let text = report st records in
    (* The kit reads a reply of at most 4 MB: a larger one would read as a replayer that never
       answered (an infra error) when it is the file's doing. *)
    if String.length text > report_cap then
      let why =
        Printf.sprintf "the file's theorems, axioms and definitions print to %d MB, more than \
                        the kit reads (%d MB)" (String.length text lsr 20) (report_cap lsr 20) in
      Printf.sprintf "{\"ok\":false,\"too_large\":true,\"error\":%s}" (json_string why)
    else text
  with Replay_error msg -> failure_report msg
     | Out_of_memory -> "{\"ok\":false,\"memory\":true,\"error\":\"the replay ran out of memory\"}"

let library_size () = library.count

let library_axiom_count () = List.length !library_axioms
