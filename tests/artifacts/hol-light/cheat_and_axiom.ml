let HARD = prove (`!n. n + 0 = n`, CHEAT_TAC);;

let SNEAKY = new_axiom `1 = 2`;;
