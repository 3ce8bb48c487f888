(* The kit's reading of a theory's axioms (runner/provers/isabelle/judging.py, and the report
   theory's ML in runner/provers/isabelle/sandbox/isabelle_worker.py): definitions and the
   type_definition_T axioms that the typedef package registers (for typedef, datatype, record)
   are not assumptions, so a theory with only those has none. This ML is the report's, run once
   on the real Isabelle: if a name or a signature is wrong, the image does not build. *)
theory Axioms imports Main begin
datatype selftest_tree = Leaf | Node selftest_tree selftest_tree
record selftest_point = px :: nat
typedef selftest_pos = "{n::nat. n > 0}" by auto
definition selftest_double :: "nat \<Rightarrow> nat" where "selftest_double n = n + n"
ML \<open>
  let
    val thy = \<^theory>;
    fun typedef_axioms name =
      map (fn ((info, _): Typedef.info) => #axiom_name info) (Typedef.get_info_global thy name);
    val typedefs = distinct (op =) (maps typedef_axioms (Sign.logical_types thy));
    fun definitional name =
      exists (fn suffix => String.isSuffix suffix name) ["_def", "_def_raw", "_raw"]
        orelse member (op =) typedefs name;
    val left = filter_out definitional (map #1 (Theory.axioms_of thy));
  in
    if null left then ()
    else error ("axioms the kit would count as assumptions: " ^ commas left)
  end
\<close>
end
