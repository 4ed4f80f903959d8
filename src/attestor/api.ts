/**
 * The attestor's HTTP API (docs/attestor.md §4), assembled from its endpoint groups: the server,
 * the OpenAPI document and the typed client (src/client.ts) all derive from it. Handlers live in
 * each feature folder (handlers.ts), merged in src/attestor/handlers.ts.
 */
import { serviceApi } from "../http/declare.js"
import { AttestorBindsGroup } from "./binds/api.js"
import { AttestorCommitmentsGroup } from "./commitments/api.js"
import { AttestorEscrowsGroup } from "./escrows/api.js"
import { AttestorInfoGroup } from "./info/api.js"
import { AttestorLoginsGroup } from "./logins/api.js"
import { AttestorOperatorGroup } from "./operator/api.js"
import { AttestorPublicHandlesGroup } from "./publicHandles/api.js"

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
