let USES_DOUBLE = prove (`double 3 = 6`, REWRITE_TAC[double] THEN ARITH_TAC);;
