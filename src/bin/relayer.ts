import { Relayer } from "../../layers/relayer.js"
import { loadRelayerSettings } from "../config/relayer.js"
import { runService } from "./main.js"

runService("relayer", Relayer.layer, loadRelayerSettings)
