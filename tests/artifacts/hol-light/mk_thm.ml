let FORGED = mk_thm([], `1 = 2`);;
