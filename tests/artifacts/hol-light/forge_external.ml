external cast : 'a -> 'b = "%identity";;

let FORGED : thm = cast (Some ([], `F`));;
