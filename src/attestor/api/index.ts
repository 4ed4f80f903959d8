/**
 * The attestor's HTTP API (docs/attestor.md §4), assembled from its endpoint groups: the server,
 * the OpenAPI document and the typed client (src/client.ts) all derive from it. Handlers live in
 * src/attestor/handlers/.
 */
import { serviceApi } from "../../http/declare.js"
import { AttestorBindsGroup } from "./binds.js"
import { AttestorCommitmentsGroup } from "./commitments.js"
import { AttestorEscrowsGroup } from "./escrows.js"
import { AttestorInfoGroup } from "./info.js"
import { AttestorLoginsGroup } from "./logins.js"
import { AttestorOperatorGroup } from "./operator.js"
import { AttestorPublicHandlesGroup } from "./publicHandles.js"

export class AttestorApi extends serviceApi("attestor", {
  title: "Fee vault attestor",
  description:
    "Issues handle commitments, verifies social logins and signs BindOwner for a key chosen before login (docs/attestor.md)."
})
  .add(AttestorOperatorGroup)
  .add(AttestorInfoGroup)
  .add(AttestorCommitmentsGroup)
  .add(AttestorPublicHandlesGroup)
  .add(AttestorLoginsGroup)
  .add(AttestorEscrowsGroup)
  .add(AttestorBindsGroup) {}
