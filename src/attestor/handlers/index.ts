/**
 * Every handler group of the attestor's API (src/attestor/api/index.ts), one module per group.
 * What they stand on (settings, sessions, indexes, the chain) is provided by the attestor's wiring
 * (layers/attestor.ts).
 */
import { Layer } from "effect"
import { AttestorBindsLive } from "./binds.js"
import { AttestorCommitmentsLive } from "./commitments.js"
import { AttestorEscrowsLive } from "./escrows.js"
import { AttestorInfoLive } from "./info.js"
import { AttestorLoginsLive } from "./logins.js"
import { AttestorOperatorLive } from "./operator.js"
import { AttestorPublicHandlesLive } from "./publicHandles.js"

export const AttestorHandlers = Layer.mergeAll(
  AttestorOperatorLive,
  AttestorInfoLive,
  AttestorCommitmentsLive,
  AttestorPublicHandlesLive,
  AttestorLoginsLive,
  AttestorEscrowsLive,
  AttestorBindsLive
)
