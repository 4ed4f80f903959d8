import { Attestor } from "../../layers/attestor.js"
import { loadAttestorSettings } from "../config/attestor.js"
import { runService } from "./main.js"

runService("attestor", Attestor.layer, loadAttestorSettings)
