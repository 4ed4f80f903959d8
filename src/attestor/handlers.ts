/**
 * Every handler group of the attestor's API (src/attestor/api.ts), one module per group.
 * What they stand on (settings, sessions, indexes, the chain) is provided by the attestor's wiring
 * (layers/attestor.ts).
 */
import { Layer } from "effect"
import { AttestorBindsHandlers } from "./binds/handlers.js"
import { AttestorCommitmentsHandlers } from "./commitments/handlers.js"
import { AttestorEscrowsHandlers } from "./escrows/handlers.js"
import { AttestorInfoHandlers } from "./info/handlers.js"
import { AttestorLoginsHandlers } from "./logins/handlers.js"
import { AttestorOperatorHandlers } from "./operator/handlers.js"
import { AttestorPublicHandlesHandlers } from "./publicHandles/handlers.js"

export const AttestorHandlers = Layer.mergeAll(
  AttestorOperatorHandlers,
  AttestorInfoHandlers,
  AttestorCommitmentsHandlers,
  AttestorPublicHandlesHandlers,
  AttestorLoginsHandlers,
  AttestorEscrowsHandlers,
  AttestorBindsHandlers
)
