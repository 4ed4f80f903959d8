/** The handler of `POST /v1/commitment` (src/attestor/commitments/api.ts): the `Commitments` service. */
import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import { Effect } from "effect"
import { CommitmentResponse, isUserId } from "../../../schema/attestor.js"
import { precomputed } from "../../http/precomputed.js"
import { AttestorApi } from "../api.js"
import { answerWithPayment } from "../lookups/payments/paymentResponseHeader.js"
import { Commitments } from "./Commitments.js"

/**
 * The answer written without encoding it again (src/http/precomputed.ts; a quarter of the route's
 * CPU under load, bench/PROFILE.md). It is its own encoding when its `userId`, from the request
 * or a lookup, is a `UserId`: every other field is the attestor's own, the hashes and the nonce
 * lowercase 32-byte hex (`commitmentFor`), the key fields decoded at start (`commitmentKeys`),
 * `kind` 2, `platform` from the decoded request with its own `platformId`, in the schema's order
 * (byte for byte: test/attestor/commitment.test.ts). Anything else is left to HttpApiBuilder,
 * which encodes (and refuses) it as it would.
 */
export const commitmentAnswer = precomputed(CommitmentResponse, {
  isEncoded: (answer) => isUserId(answer.userId)
})

export const AttestorCommitmentsHandlers = HttpApiBuilder.group(AttestorApi, "commitments", (handlers) =>
  Effect.map(Commitments, (commitments) =>
    handlers.handle("commitment", ({ payload, headers }) =>
      Effect.map(
        answerWithPayment(commitments.commit(payload, headers["payment-signature"])),
        commitmentAnswer.render
      )
    )
  )
)
