import { RelayerLive } from "../../layers/relayer.js"
import { runService } from "./main.js"

runService("relayer", RelayerLive)
