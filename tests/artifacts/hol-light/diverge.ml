let rec spin n = spin (n + 1);;

spin 0;;
