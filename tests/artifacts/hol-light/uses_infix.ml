let USES_INFIX = prove (`1 === 1`, REFL_TAC);;
