import { AttestorLive } from "../../layers/attestor.js"
import { runService } from "./main.js"

runService("attestor", AttestorLive)
