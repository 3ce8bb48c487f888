(* Gauss's sum, by induction. *)
let SUM_FORMULA = prove
 (`!n. 2 * nsum(0..n) (\i. i) = n * (n + 1)`,
  INDUCT_TAC THEN ASM_REWRITE_TAC[NSUM_CLAUSES_NUMSEG; LE_0] THEN ASM_ARITH_TAC);;
