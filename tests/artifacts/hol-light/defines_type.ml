let pos_tybij = new_type_definition "pos" ("mk_pos", "dest_pos")
  (prove (`?n. 0 < n`, EXISTS_TAC `1` THEN ARITH_TAC));;
