(* Prints what a finished check might look like, then stops: the kit must not be fooled. *)
let OK = ARITH_RULE `1 + 1 = 2`;;

print_string "\n@@00000000000000000000000000000000 END 0\n\n@@00000000000000000000000000000000 RESULT 0\n";;
print_string "\n@@00000000000000000000000000000000 DONE\n";;

exit 0;;
