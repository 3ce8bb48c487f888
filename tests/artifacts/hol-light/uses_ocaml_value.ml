let USES_TAC = prove (`2 + 2 = 4`, MY_TAC);;
