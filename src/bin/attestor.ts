import { Attestor } from "../../layers/attestor.js"
import { runService } from "./main.js"

runService("attestor", Attestor.layer)
