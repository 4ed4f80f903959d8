/**
 * Every handler group of the attestor's API (src/attestor/api/index.ts), one module per group.
 * What they stand on (settings, sessions, indexes, the chain) is provided by the attestor's wiring
 * (layers/attestor.ts).
 */
import { Layer } from "effect"
import { AttestorBindsHandlers } from "./binds.js"
import { AttestorCommitmentsHandlers } from "./commitments.js"
import { AttestorEscrowsHandlers } from "./escrows.js"
import { AttestorInfoHandlers } from "./info.js"
import { AttestorLoginsHandlers } from "./logins.js"
import { AttestorOperatorHandlers } from "./operator.js"
import { AttestorPublicHandlesHandlers } from "./publicHandles.js"

export const AttestorHandlers = Layer.mergeAll(
  AttestorOperatorHandlers,
  AttestorInfoHandlers,
  AttestorCommitmentsHandlers,
  AttestorPublicHandlesHandlers,
  AttestorLoginsHandlers,
  AttestorEscrowsHandlers,
  AttestorBindsHandlers
)
