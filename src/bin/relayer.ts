import { Relayer } from "../../layers/relayer.js"
import { runService } from "./main.js"

runService("relayer", Relayer.layer)
