(* prooflock's HOL Light forkserver: load HOL Light once, then check each artifact in a forked
   child, so every check starts from the same pristine state and nothing it does survives it.

   Run as `ocaml server.ml` in the sandbox's work dir. OCaml parses this whole script before
   running any of it, i.e. before HOL Light installs its camlp5 syntax, so it is plain OCaml.
   HOL Light source (the artifact, the boot self-test, placeholder wrappers) is parsed at run time.

   Protocol, stdin -> stdout, one request at a time:
     request  "CHECK <nonce> <timeout_ms> <placeholders|-> <preload|-> <length> <target|->
              <statement_length>\n" <length bytes of source> <statement_length bytes>
     reply    "\n@@<nonce> REPLY <status> <code> <cpu_ms> <parent> <oom> <report_length> <dir>\n"
              <report> "\n@@<nonce> DONE\n"
   The report is the kit's own account of the check, written by the child on a pipe only the
   kit holds (the artifact's stdout and stderr go to /dev/null): frames "<TAG> <length>\n<payload>".
   A check's verdict rests on that report and on how the child ended, never on what it printed.
   Python sends lists comma-separated; it validates their items. *)

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

(* What a checked file may say, decided on the parse HOL Light itself makes of it (camlp5 with
   HOL Light's syntax, i.e. `!Toploop.parse_use_file`), never on its text.

   A file is a list of toplevel phrases: `let` bindings and expressions (and a few harmless
   directives). An identifier it uses must be one the file binds itself or one in scope in the
   toplevel after HOL Light loaded (its library, the OCaml standard library it runs on, and the
   nums library it includes), less a deny-list of what reaches outside HOL Light's logic: the
   process, files, the toplevel, unchecked memory. A qualified name must start from a module of
   the standard library, of the nums library or one HOL Light defines, and pass through no denied
   module. A file may not rebind a name HOL Light already binds (`prove`, `e`, `top_thm`, ...), so
   a phrase means what HOL Light means by it. Modules, functors, `open`, `include`, classes,
   `external` and extension nodes are refused outright: they could hide any of the above. *)
module Prooflock_fence : sig
  type names

  val current : unit -> names
  val describe : names -> string

  type refusal = { line : int; column : int; message : string }

  val leading_needs :
    Parsetree.toplevel_phrase list ->
    (string * Location.t * Parsetree.toplevel_phrase) list * Parsetree.toplevel_phrase list
  val needs_refusal : string -> Location.t -> refusal option
  val first_refusal : names -> Parsetree.toplevel_phrase list -> refusal option
  val directive_refusal : string -> line:int -> column:int -> refusal option
  val top_level_names : Parsetree.toplevel_phrase list -> string list
end = struct
  open Stdlib
  open Parsetree

  (* Modules whose values reach the process, the runtime or the toplevel; the prefixes cover the
     compiler's own units and this server's modules. *)
  let denied_modules =
    [ "Obj"; "Marshal"; "Sys"; "Unix"; "UnixLabels"; "Printexc"; "Toploop"; "Topdirs"; "Gc";
      "Callback"; "Arg"; "Oo"; "Nat"; "In_channel"; "Out_channel"; "Domain"; "Effect";
      "Thread"; "Mutex"; "Condition"; "Event"; "Dynlink"; "Std_exit"; "Ephemeron" ]
  let denied_module_prefixes = [ "Camlinternal"; "Stdlib__"; "Prooflock" ]

  (* Compilation units HOL Light's library consists of, besides the modules it defines. *)
  let library_units = [ "Stdlib"; "Num"; "Big_int"; "Ratio"; "Arith_status" ]

  (* Values denied wherever they are found (unqualified or in any module): the process, files,
     HOL Light's loaders and paths, and user printers (which would change what a report reads). *)
  let denied_values =
    [ "exit"; "at_exit"; "do_at_exit"; "do_domain_local_at_exit"; "open_out"; "open_out_bin";
      "open_out_gen"; "open_in"; "open_in_bin"; "open_in_gen"; "input_value"; "output_value";
      "from_file"; "from_file_bin"; "temp_file"; "open_temp_file"; "set_temp_dir_name";
      "map_file"; "command"; "read_arg"; "read_arg0"; "write_arg"; "write_arg0";
      "file_of_string"; "strings_of_file"; "string_of_file"; "use_file"; "loads"; "loadt";
      "load_on_path"; "needs"; "file_on_path"; "hol_expand_directory"; "load_path";
      "loaded_files"; "hol_dir"; "temp_path"; "help"; "help_path"; "install_user_printer";
      "delete_user_printer"; "try_user_printer" ]
  let denied_value_prefixes = [ "unsafe_"; "prooflock" ]
  let denied_in_module = [ ("Digest", "file") ]

  let allowed_directives = [ "print_depth"; "print_length"; "warnings" ]

  let starts_with_any prefixes name =
    List.exists (fun prefix -> String.starts_with ~prefix name) prefixes

  let denied_module name = List.mem name denied_modules || starts_with_any denied_module_prefixes name
  let denied_value name = List.mem name denied_values || starts_with_any denied_value_prefixes name

  type names = {
    values : (string, unit) Hashtbl.t;  (* every unqualified value in scope *)
    modules : (string, unit) Hashtbl.t;  (* modules a qualified name may start from *)
  }

  let current () =
    let env = !Toploop.toplevel_env in
    let values = Hashtbl.create 32768 and modules = Hashtbl.create 256 in
    Env.fold_values (fun name _ _ () -> Hashtbl.replace values name ()) None env ();
    let allow name = if not (denied_module name) then Hashtbl.replace modules name () in
    List.iter allow library_units;
    Env.fold_modules (fun name _ _ () -> allow name) (Some (Longident.Lident "Stdlib")) env ();
    (* Modules defined by toplevel phrases: HOL Light's own (this server's are denied above). *)
    Env.fold_modules
      (fun name path _ () ->
        match path with
        | Path.Pident id when not (Ident.persistent id) -> allow name
        | _ -> ())
      None env ();
    { values; modules }

  let sorted table = List.sort compare (Hashtbl.fold (fun k () acc -> k :: acc) table [])

  let describe names =
    let values = sorted names.values in
    let denied = List.filter denied_value values in
    Printf.sprintf
      "modules allowed (%d): %s\nvalues in scope: %d, of which denied (%d): %s\n\
       denied modules: %s; and any module starting %s\n\
       denied values anywhere: %s; and any value starting %s\n"
      (Hashtbl.length names.modules) (String.concat " " (sorted names.modules))
      (List.length values) (List.length denied) (String.concat " " denied)
      (String.concat " " denied_modules) (String.concat ", " denied_module_prefixes)
      (String.concat " " denied_values) (String.concat ", " denied_value_prefixes)

  type refusal = { line : int; column : int; message : string }

  exception Refused of refusal

  let refuse (loc : Location.t) message =
    let start = loc.Location.loc_start in
    raise
      (Refused
         { line = start.Lexing.pos_lnum; column = start.Lexing.pos_cnum - start.Lexing.pos_bol;
           message })

  let not_allowed loc what why =
    refuse loc (Printf.sprintf "%s is not allowed in a checked file: %s" what why)

  let rec flatten = function
    | Longident.Lident name -> Some [ name ]
    | Longident.Ldot (prefix, name) -> Option.map (fun p -> p @ [ name ]) (flatten prefix)
    | Longident.Lapply _ -> None

  let escape = "reaches outside HOL Light's logic (files, the process or the toplevel)"

  (* An unqualified name is refused only when the toplevel has it and it is denied: any other
     is HOL Light's, the file's own, or unbound (OCaml says so when the phrase runs). A denied
     name is refused even where the file binds it locally, since outside that scope it is not. *)
  let check_value names (lid : Longident.t Location.loc) =
    match flatten lid.txt with
    | None -> not_allowed lid.loc "a functor application" "modules are not part of a proof"
    | Some [ name ] ->
        if Hashtbl.mem names.values name && denied_value name then
          not_allowed lid.loc (Printf.sprintf "`%s`" name) ("it " ^ escape)
    | Some path ->
        let shown = Printf.sprintf "`%s`" (String.concat "." path) in
        let rev = List.rev path in
        let name = List.hd rev and modules = List.rev (List.tl rev) in
        let root = List.hd modules and last = List.hd (List.tl rev) in
        List.iter
          (fun m ->
            if denied_module m then
              not_allowed lid.loc shown (Printf.sprintf "module %s %s" m escape))
          modules;
        if not (Hashtbl.mem names.modules root) then
          not_allowed lid.loc shown
            (Printf.sprintf "module %s is not part of HOL Light's library" root);
        if denied_value name || List.mem (last, name) denied_in_module then
          not_allowed lid.loc shown ("it " ^ escape)

  let pattern_names pattern =
    let found = ref [] in
    let iterator =
      { Ast_iterator.default_iterator with
        pat =
          (fun it p ->
            (match p.ppat_desc with
             | Ppat_var name | Ppat_alias (_, name) -> found := (name.txt, name.loc) :: !found
             | _ -> ());
            Ast_iterator.default_iterator.pat it p) }
    in
    iterator.pat iterator pattern;
    List.rev !found

  (* Two soundness bugs of the OCaml in the image (4.13; both fixed in 5.3) forge a `thm` with
     no kernel rule, so what they need is refused (advisories PL-HOLLIGHT-OCAML7241 and
     PL-HOLLIGHT-OCAML13579): a `when` guard in a match whose patterns read through records,
     arrays or lazy values (the guard can change what the compiled match already tested), and
     GADT constructors (unsound with non-injective types). Proofs need neither. *)
  let reads_through_mutable pattern =
    let found = ref false in
    let iterator =
      { Ast_iterator.default_iterator with
        pat =
          (fun it p ->
            (match p.ppat_desc with
             | Ppat_record _ | Ppat_array _ | Ppat_lazy _ -> found := true
             | _ -> ());
            Ast_iterator.default_iterator.pat it p) }
    in
    iterator.pat iterator pattern;
    !found

  let check_cases (cases : Parsetree.case list) =
    if List.exists (fun c -> reads_through_mutable c.pc_lhs) cases then
      List.iter
        (fun c ->
          match c.pc_guard with
          | Some guard ->
              refuse guard.pexp_loc
                "a `when` guard in a match whose patterns read records, arrays or lazy values is \
                 not allowed in a checked file: OCaml 4.13 can be made to trust a value the guard \
                 changed (ocaml/ocaml#7241, advisory PL-HOLLIGHT-OCAML7241); test with `if` \
                 inside the case instead"
          | None -> ())
        cases

  let gadt loc =
    refuse loc
      "a GADT constructor is not allowed in a checked file: OCaml 4.13 is unsound with GADTs \
       and non-injective types (ocaml/ocaml#13579, advisory PL-HOLLIGHT-OCAML13579)"

  let check_type_declaration (declaration : Parsetree.type_declaration) =
    match declaration.ptype_kind with
    | Ptype_variant constructors ->
        List.iter
          (fun (c : Parsetree.constructor_declaration) ->
            if c.pcd_res <> None then gadt c.pcd_loc)
          constructors
    | _ -> ()

  let check_extension (extension : Parsetree.type_extension) =
    List.iter
      (fun (c : Parsetree.extension_constructor) ->
        match c.pext_kind with Pext_decl (_, Some _) -> gadt c.pext_loc | _ -> ())
      extension.ptyext_constructors

  let fence names =
    let open Ast_iterator in
    let no what loc = not_allowed loc what "it could hide what the file runs" in
    { default_iterator with
      expr =
        (fun it e ->
          (match e.pexp_desc with
           | Pexp_ident lid -> check_value names lid
           | Pexp_open _ -> no "`open`" e.pexp_loc
           | Pexp_letmodule _ -> no "a local module" e.pexp_loc
           | Pexp_pack _ -> no "a first-class module" e.pexp_loc
           | Pexp_object _ | Pexp_new _ | Pexp_send _ | Pexp_setinstvar _ | Pexp_override _ ->
               no "an object" e.pexp_loc
           | Pexp_match (_, cases) | Pexp_function cases | Pexp_try (_, cases) ->
               check_cases cases
           | _ -> ());
          default_iterator.expr it e);
      binding_op =
        (fun it op ->
          check_value names { txt = Longident.Lident op.pbop_op.txt; loc = op.pbop_op.loc };
          default_iterator.binding_op it op);
      pat =
        (fun it p ->
          (match p.ppat_desc with
           | Ppat_unpack _ -> no "a first-class module" p.ppat_loc
           | Ppat_open _ -> no "`open`" p.ppat_loc
           | _ -> ());
          default_iterator.pat it p);
      typ =
        (fun it t ->
          (match t.ptyp_desc with
           | Ptyp_package _ -> no "a first-class module type" t.ptyp_loc
           | _ -> ());
          default_iterator.typ it t);
      structure_item =
        (fun it item ->
          (match item.pstr_desc with
           | Pstr_primitive _ -> no "an `external` declaration" item.pstr_loc
           | Pstr_module _ | Pstr_recmodule _ | Pstr_modtype _ ->
               no "a module definition" item.pstr_loc
           | Pstr_open _ -> no "`open`" item.pstr_loc
           | Pstr_include _ -> no "`include`" item.pstr_loc
           | Pstr_class _ | Pstr_class_type _ -> no "a class" item.pstr_loc
           | Pstr_type (_, declarations) -> List.iter check_type_declaration declarations
           | Pstr_typext extension -> check_extension extension
           | _ -> ());
          default_iterator.structure_item it item);
      module_expr = (fun _ m -> no "a module expression" m.pmod_loc);
      module_type = (fun _ m -> no "a module type" m.pmty_loc);
      class_expr = (fun _ c -> no "a class" c.pcl_loc);
      class_type = (fun _ c -> no "a class type" c.pcty_loc);
      extension = (fun _ (name, _) -> no "an extension node" name.loc) }

  let directive_message name =
    Printf.sprintf
      "the directive #%s is not allowed in a checked file: files are loaded with `needs` at the \
       top only"
      name

  let directive_refusal name ~line ~column =
    if List.mem name allowed_directives then None
    else Some { line; column; message = directive_message name }

  let check_phrase names iterator = function
    | Ptop_dir d ->
        if not (List.mem d.pdir_name.txt allowed_directives) then
          refuse d.pdir_loc (directive_message d.pdir_name.txt)
    | Ptop_def items ->
        List.iter
          (fun item ->
            (match item.pstr_desc with
             | Pstr_value (_, bindings) ->
                 List.iter
                   (fun binding ->
                     List.iter
                       (fun (name, loc) ->
                         if Hashtbl.mem names.values name then
                           not_allowed loc
                             (Printf.sprintf "rebinding `%s`" name)
                             "HOL Light's library already binds it")
                       (pattern_names binding.pvb_pat))
                   bindings
             | _ -> ());
            iterator.Ast_iterator.structure_item iterator item)
          items

  let first_refusal names phrases =
    let iterator = fence names in
    match List.iter (check_phrase names iterator) phrases with
    | () -> None
    | exception Refused refusal -> Some refusal

  let top_level_names phrases =
    let seen = Hashtbl.create 64 in
    List.concat_map
      (function
        | Ptop_def items ->
            List.concat_map
              (fun item ->
                match item.pstr_desc with
                | Pstr_value (_, bindings) ->
                    List.concat_map (fun b -> List.map fst (pattern_names b.pvb_pat)) bindings
                | _ -> [])
              items
        | Ptop_dir _ -> [])
      phrases
    |> List.filter (fun name ->
           if Hashtbl.mem seen name then false else (Hashtbl.add seen name (); true))

  (* `needs "Library/x.ml";;` phrases before any other: how a file says what it builds on. *)
  let leading_needs phrases =
    let rec go found = function
      | (Ptop_def
           [ { pstr_desc =
                 Pstr_eval
                   ( { pexp_desc =
                         Pexp_apply
                           ( { pexp_desc = Pexp_ident { txt = Longident.Lident "needs"; _ }; _ },
                             [ (Asttypes.Nolabel,
                                { pexp_desc = Pexp_constant (Pconst_string (path, _, _));
                                  pexp_loc; _ }) ] );
                       _ },
                     _ );
               _ } ] as phrase)
        :: rest ->
          go ((path, pexp_loc, phrase) :: found) rest
      | rest -> (List.rev found, rest)
    in
    go [] phrases

  (* Only HOL Light's own library files, by a plain relative path that exists: `needs` looks in
     the check's directory first, which holds nothing but the artifact. *)
  let needs_refusal path loc =
    let hol_dir = Unix.realpath Prooflock_boot.hol_dir in
    let parts = String.split_on_char '/' path in
    let plain part = part <> "" && part <> "." && part <> ".." in
    let full = Filename.concat hol_dir path in
    let inside =
      match Unix.realpath full with
      | real -> String.starts_with ~prefix:(hol_dir ^ "/") real && not (Sys.is_directory real)
      | exception Unix.Unix_error _ -> false
    in
    if Filename.is_relative path && List.for_all plain parts
       && (Filename.check_suffix path ".ml" || Filename.check_suffix path ".hl")
       && inside
    then None
    else
      Some
        { line = loc.Location.loc_start.Lexing.pos_lnum;
          column = loc.Location.loc_start.Lexing.pos_cnum - loc.Location.loc_start.Lexing.pos_bol;
          message =
            Printf.sprintf
              "`needs \"%s\"`: a checked file may load only HOL Light's own library files \
               (relative paths under HOL Light's directory that exist)"
              path }
end;;

module Prooflock_server : sig
  val main : unit -> unit
end = struct
  open Stdlib

  (* The theory as HOL Light left it: "new" always means new relative to this, also on a
     preloaded parent, so a check reports the same facts whichever parent ran it. These are the
     kernel's own lists (module Hol, fusion.ml), whatever the toplevel names mean later. *)
  let base_axioms = Hol.axioms ()
  let base_definitions = Hol.definitions ()
  let base_constants = Hol.constants ()
  let base_types = Hol.types ()

  (* How HOL Light parses and prints terms, which a check may change (interface, infixes,
     abbreviations, hidden constants, user parsers, flags): reports print, and targets parse,
     with HOL Light's own settings, so an artifact can neither make `F` read as an allowed axiom
     nor make a target mean something easier. *)
  let base_interface = !the_interface
  let base_overloads = !the_overload_skeletons
  let base_binders = binders ()
  let base_prefixes = prefixes ()
  let base_infixes = infixes ()
  let base_reserved = reserved_words ()
  let base_abbrevs = type_abbrevs ()
  let base_implicit = !the_implicit_types
  let base_hidden = List.filter is_hidden (List.map fst (Hol.constants ()))
  let base_parsers = installed_parsers ()
  let base_comment = !comment_token
  let base_unspaced = !unspaced_binops
  let base_prebroken = !prebroken_binops
  let base_flags =
    (!reverse_interface_mapping, !print_unambiguous_comprehensions, !typify_universal_set,
     !print_all_thm)
  let base_parse_flags =
    (!ignore_constant_varstruct, !type_invention_warning, !type_invention_error)
  let base_margin = Format.get_margin ()

  (* Undone and redone only where a check changed them: redoing all costs ~20 ms a check. *)
  let restore_notation () =
    let restore now base ~undo ~redo =
      if now <> base then (List.iter undo now; List.iter redo base)
    in
    the_interface := base_interface;
    the_overload_skeletons := base_overloads;
    restore (binders ()) base_binders ~undo:unparse_as_binder ~redo:parse_as_binder;
    restore (prefixes ()) base_prefixes ~undo:unparse_as_prefix ~redo:parse_as_prefix;
    restore (infixes ()) base_infixes
      ~undo:(fun (name, _) -> unparse_as_infix name) ~redo:parse_as_infix;
    if reserved_words () <> base_reserved then begin
      unreserve_words (reserved_words ());
      reserve_words base_reserved
    end;
    restore (type_abbrevs ()) base_abbrevs
      ~undo:(fun (name, _) -> remove_type_abbrev name) ~redo:new_type_abbrev;
    the_implicit_types := base_implicit;
    List.iter
      (fun (name, _) ->
        match is_hidden name, List.mem name base_hidden with
        | true, false -> unhide_constant name
        | false, true -> hide_constant name
        | _ -> ())
      (Hol.constants ());
    if installed_parsers () != base_parsers then begin  (* parsers are functions *)
      List.iter (fun (name, _) -> delete_parser name) (installed_parsers ());
      List.iter install_parser (List.rev base_parsers)
    end;
    comment_token := base_comment;
    unspaced_binops := base_unspaced;
    prebroken_binops := base_prebroken;
    let mapping, comprehensions, universal, all_thm = base_flags in
    reverse_interface_mapping := mapping;
    print_unambiguous_comprehensions := comprehensions;
    typify_universal_set := universal;
    print_all_thm := all_thm;
    let varstruct, warning, error = base_parse_flags in
    ignore_constant_varstruct := varstruct;
    type_invention_warning := warning;
    type_invention_error := error;
    Format.set_margin base_margin

  (* The path a type is, once abbreviations (`thm` for `Hol.thm`) are expanded. *)
  let head_path env ty =
    match (Ctype.expand_head env ty).Types.desc with
    | Types.Tconstr (path, [], _) -> Some path
    | _ -> None

  (* The kernel's type of theorems, as HOL Light bound it: a file's own `type thm` is another. *)
  let thm_path =
    let env = !Toploop.toplevel_env in
    let path, _ = Env.find_type_by_name (Longident.Lident "thm") env in
    Option.get (head_path env (Ctype.newconstr path []))

  let work_dir = Sys.getcwd ()
  let boot_entries = Sys.readdir work_dir

  (* The report stays below what the kit reads of a reply (runner.backends.base, 4 MB). *)
  let report_cap = 3 lsl 20
  let phrase_capture_cap = 1 lsl 16
  let listed_cap = 1000  (* axioms, definitions, constants, types listed; then a count *)
  let theorems_cap = 2000
  let statement_cap = 4000  (* an axiom or definition as printed *)
  let theorem_cap = 1000  (* a bound theorem's statement in the details *)

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

  (* Anything a check left in the work dir goes, so no later check can read it. *)
  let restore_work_dir () =
    Array.iter
      (fun e -> if not (Array.mem e boot_entries) then remove_quietly (Filename.concat work_dir e))
      (try Sys.readdir work_dir with Sys_error _ -> [||])

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
  let near_memory_limit () =
    let limit =
      List.find_map
        (fun line ->
          if String.starts_with ~prefix:"Max address space" line then
            match List.filter (( <> ) "") (String.split_on_char ' ' line) with
            | _ :: _ :: _ :: soft :: _ -> int_of_string_opt soft
            | _ -> None
          else None)
        (String.split_on_char '\n' (read_file "/proc/self/limits"))
    in
    match limit, field_after "VmPeak:" (read_file "/proc/self/status") with
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

  let execute phrase =
    Buffer.clear capture;
    raised := None;
    let ok =
      try Toploop.execute_phrase true Format.std_formatter phrase
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

  (* camlp5 runs `#load` and `#directory` while it parses a file (they may change the syntax of
     what follows), before any phrase of it could be checked. While an artifact is parsed, a
     directive off the allow-list stops the parse instead of running. *)
  let guard_directives = ref false
  let refused_directive = ref None

  let () =
    let parse = !Pcaml.parse_use_file in
    Pcaml.parse_use_file :=
      fun stream ->
        let items, stopped = parse stream in
        (if !guard_directives && stopped then
           match List.rev items with
           | MLast.StDir (loc, (Ploc.VaVal name | Ploc.VaAnt name), _) :: _ -> (
               let line = Ploc.line_nb loc and column = Ploc.first_pos loc - Ploc.bol_pos loc in
               match Prooflock_fence.directive_refusal name ~line ~column with
               | Some refusal -> refused_directive := Some refusal; raise Exit
               | None -> ())
           | _ -> ());
        (items, stopped)

  type parsed =
    | Parsed of Parsetree.toplevel_phrase list
    | Syntax of string
    | Refused_directive of Prooflock_fence.refusal

  let parse_source ?(guarded = false) ~name source =
    let lexbuf = Lexing.from_string source in
    Location.init lexbuf name;
    Location.input_name := name;
    Buffer.clear capture;
    refused_directive := None;
    guard_directives := guarded;
    let parsed = try Ok (!Toploop.parse_use_file lexbuf) with exn -> Error exn in
    guard_directives := false;
    match parsed, !refused_directive with
    | _, Some refusal -> Refused_directive refusal
    | Ok phrases, None -> Parsed phrases
    | Error exn, None ->
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
    | Syntax _ | Refused_directive _ -> false

  (* -- one check, in a forked child ------------------------------------------------------- *)

  let wrap_placeholders names =
    List.iter
      (fun p ->
        ignore (run_trusted ~name:"placeholder"
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

  let string_of_canonical_term tm = one_line (string_of_term (canonical_term tm))

  let string_of_canonical_thm ?(limit = statement_cap) th =
    let hyps = List.map string_of_canonical_term (hyp th) in
    cut limit
      (String.concat ", " hyps ^ (if hyps = [] then "|- " else " |- ")
       ^ string_of_canonical_term (concl th))

  let string_of_canonical_type ty =
    one_line (string_of_type (type_subst (canonical_tyvars (tyvars ty)) ty))

  (* At most `cap` items of a kind, then how many more there were. *)
  let mark_listed ?(cap = listed_cap) mark tag items =
    List.iteri (fun i item -> if i < cap then mark tag (item ())) items;
    let more = List.length items - cap in
    if more > 0 then mark "UNLISTED" (tag ^ " " ^ string_of_int more)

  let report_theory mark =
    let made = Prooflock_placeholder.made () in
    let new_axioms = List.rev (newer (Hol.axioms ()) base_axioms) in
    let placeholders, others = List.partition (fun ax -> List.memq ax made) new_axioms in
    mark_listed mark "AXIOM" (List.map (fun ax () -> string_of_canonical_thm ax) others);
    mark_listed mark "PLACEHOLDER"
      (List.map (fun ax () -> string_of_canonical_thm ax) placeholders);
    mark_listed mark "DEFINITION"
      (List.map (fun d () -> string_of_canonical_thm d)
         (List.rev (newer (Hol.definitions ()) base_definitions)));
    mark_listed mark "CONSTANT"
      (List.map (fun (name, ty) () -> name ^ " " ^ string_of_canonical_type ty)
         (List.rev (newer (Hol.constants ()) base_constants)));
    mark_listed mark "TYPE"
      (List.map (fun (name, arity) () -> name ^ " " ^ string_of_int arity)
         (List.rev (newer (Hol.types ()) base_types)))

  type bound = Theorem of thm | Not_a_theorem of string | Unbound

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
        | _ -> Not_a_theorem (one_line (Format.asprintf "%a" Printtyp.type_expr ty)))

  let report_theorems mark names =
    let theorems =
      List.filter_map
        (fun name ->
          match bound_value name with
          | Theorem th ->
              Some (fun () -> name ^ "\n" ^ string_of_canonical_thm ~limit:theorem_cap th)
          | Not_a_theorem _ | Unbound -> None)
        names
    in
    mark_listed ~cap:theorems_cap mark "THEOREM" theorems

  (* Equal up to renaming bound variables (aconv) and type variables, consistently. *)
  let same_statement a b =
    let canonical tm =
      let vars = type_vars_in_term tm in
      inst (List.mapi (fun i v -> (mk_vartype ("?" ^ string_of_int i), v)) vars) tm
    in
    aconv (canonical a) (canonical b)

  (* The target, parsed now (after the file, with HOL Light's notation), against what the file
     bound under its name. Payload: status, then the theorem's and the target's statements. *)
  let report_target mark names (name, statement) =
    let result status theorem target = mark "TARGET" (status ^ "\n" ^ theorem ^ "\n" ^ target) in
    match parse_term statement with
    | exception exn -> result "unparsable" "" (one_line (Printexc.to_string exn))
    | tm when type_of tm <> bool_ty ->
        result "not_boolean" "" (string_of_canonical_term tm ^ " : " ^ string_of_canonical_type (type_of tm))
    | tm -> (
        let target = cut statement_cap (string_of_canonical_term tm) in
        if not (List.mem name names) then result "missing" "" target
        else
          match bound_value name with
          | Unbound -> result "missing" "" target
          | Not_a_theorem ty -> result "not_a_theorem" ty target
          | Theorem th ->
              let stated = string_of_canonical_thm th in
              if hyp th <> [] then result "hypotheses" stated target
              else if same_statement (concl th) tm then result "same" stated target
              else result "differs" stated target)

  (* The names a parent serves checks with: HOL Light's, and a preloaded library's. *)
  let parent_names = ref (Prooflock_fence.current ())

  let loaded_count () = List.length !loaded_files

  (* The child. Its stdout and stderr are /dev/null; `report` is the kit's pipe. *)
  let child_check ~report ~placeholders ~target source =
    let mark tag payload =
      send report (Printf.sprintf "%s %d\n%s" tag (String.length payload) payload)
    in
    let refused (r : Prooflock_fence.refusal) =
      mark "REFUSED" (Printf.sprintf "%d %d %s" r.line r.column r.message)
    in
    wrap_placeholders placeholders;
    mark "START" "";
    match parse_source ~guarded:true ~name:"artifact.ml" source with
    | Syntax text -> mark "SYNTAX" text
    | Refused_directive r -> refused r
    | Parsed phrases -> (
        let needs, rest = Prooflock_fence.leading_needs phrases in
        let bad_needs =
          List.find_map (fun (path, loc, _) -> Prooflock_fence.needs_refusal path loc) needs
        in
        match bad_needs, Prooflock_fence.first_refusal !parent_names rest with
        | Some r, _ | None, Some r -> refused r
        | None, None -> (
            let loaded = loaded_count () in
            let needs_phrases = List.map (fun (_, _, phrase) -> phrase) needs in
            if run_phrases ~mark ~first:0 needs_phrases then
              (* A library the parent had not loaded binds names of its own: check again. *)
              let again =
                if loaded_count () = loaded then None
                else Prooflock_fence.first_refusal (Prooflock_fence.current ()) rest
              in
              match again with
              | Some r -> refused r
              | None ->
                  if run_phrases ~mark ~first:(List.length needs) rest then begin
                    mark "END" "";
                    let bound = Prooflock_fence.top_level_names rest in
                    (try
                       restore_formatters ();
                       restore_notation ();
                       report_theory mark;
                       report_theorems mark bound;
                       Option.iter (report_target mark bound) target
                     with exn -> mark "UNREPORTABLE" (Printexc.to_string exn));
                    mark "RESULT" ""
                  end))

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
  }

  let new_reader () =
    { pending = Buffer.create 4096; kept = Buffer.create 4096; last_phrase = ""; overflow = false }

  let rec take_frames reader =
    let data = Buffer.contents reader.pending in
    match String.index_opt data '\n' with
    | None -> ()
    | Some eol -> (
        match String.split_on_char ' ' (String.sub data 0 eol) with
        | [ tag; length ] ->
            let length = int_of_string length in
            if String.length data >= eol + 1 + length then begin
              let frame = String.sub data 0 (eol + 1 + length) in
              Buffer.clear reader.pending;
              Buffer.add_string reader.pending
                (String.sub data (eol + 1 + length) (String.length data - eol - 1 - length));
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

  (* Fork a child that checks `source`, read its report, kill it at the deadline. *)
  let run_check ~nonce ~timeout_ms ~placeholders ~target source =
    incr check_counter;
    let dir = Filename.concat work_dir (Printf.sprintf "check%d" !check_counter) in
    Unix.mkdir dir 0o700;
    let report_r, report_w = Unix.pipe () in
    let deadline = Unix.gettimeofday () +. (float_of_int timeout_ms /. 1000.) in
    let oom_before = oom_kills () in
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
        watch_over_child ~deadline;
        Unix.chdir dir;
        write_file "artifact.ml" source;
        (try child_check ~report:report_w ~placeholders ~target source with _ -> ());
        flush_all ();
        Unix._exit 0
    | pid ->
        Unix.close report_w;
        let reader = new_reader () in
        let chunk = Bytes.create 65536 in
        let rec pump () =
          let left = deadline -. Unix.gettimeofday () in
          if left <= 0. then Deadline
          else
            match Unix.select [ report_r ] [] [] (Float.min left 0.5) with
            | [], _, _ -> (
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
        Unix.close report_r;
        let cpu_after = let t = Unix.times () in t.Unix.tms_cutime +. t.Unix.tms_cstime in
        let finish =
          match ending, status with
          | Deadline, _ -> Timed_out
          | _, Unix.WEXITED code -> Exited code
          | _, (Unix.WSIGNALED s | Unix.WSTOPPED s) -> Signaled s
        in
        let oom =
          match oom_before, oom_kills () with
          | Some before, Some after -> if after > before then "oom" else "none"
          | _ -> "unknown"
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
        Printf.sprintf "\n@@%s REPLY %s %d %s %s %d %s\n%s\n@@%s DONE\n" nonce status_text
          (int_of_float ((cpu_after -. cpu_before) *. 1000.)) !parent_kind oom
          (String.length report) dir report nonce

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
            let reply =
              let forwarded =
                if preload = "-" || not may_preload then None
                else forward ~nonce ~timeout_ms ~placeholders ~preload ~source ~target_name
                       ~statement
              in
              match forwarded with
              | Some reply -> reply
              | None ->
                  run_check ~nonce ~timeout_ms:(int_of_string timeout_ms)
                    ~placeholders:(split_list placeholders) ~target source
            in
            send output reply;
            serve ~input ~output ~may_preload
        | _ -> send output ("\n@@ BAD-REQUEST " ^ one_line header ^ "\n"))

  and forward ~nonce ~timeout_ms ~placeholders ~preload ~source ~target_name ~statement =
    match subserver preload with
    | None -> None
    | Some sub -> (
        let request =
          Printf.sprintf "CHECK %s %s %s - %d %s %d\n%s%s" nonce timeout_ms placeholders
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
          parent_names := Prooflock_fence.current ();
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

  let main () =
    let ok = self_test () in
    Format.printf "@.prooflock allow-list@.%s@." (Prooflock_fence.describe !parent_names);
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
