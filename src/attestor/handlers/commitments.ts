/** The handler of `POST /v1/commitment` (src/attestor/api/commitments.ts): the `Commitments` service. */
import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import { Effect } from "effect"
import { type CommitmentResponse, isUserId } from "../../../schema/attestor.js"
import { AttestorApi } from "../api/index.js"
import { Commitments } from "../Commitments.js"
import { answerWithPayment } from "./payment.js"

/**
 * The answer as HttpApiBuilder writes it from `CommitmentResponse`'s encoding, without encoding it
 * again (a quarter of the route's CPU under load, bench/PROFILE.md). Every field but `userId` is the
 * attestor's own: the hashes and the nonce lowercase 32-byte hex (`commitmentFor`), the key fields
 * decoded at start (`commitmentKeys`), `kind` 2, `platform` from the decoded request with its own
 * `platformId`. `userId`, from the request or a lookup, is checked here against `UserId`. The
 * object's fields are in the schema's order, so its JSON is the encoding's byte for byte
 * (test/attestor/commitment.test.ts). Anything else is left to HttpApiBuilder, which encodes (and
 * refuses) it as it would.
 */
export const renderedCommitment = (
  answer: CommitmentResponse
): CommitmentResponse | HttpServerResponse.HttpServerResponse =>
  isUserId(answer.userId) ? HttpServerResponse.unsafeJson(answer) : answer

export const AttestorCommitmentsLive = HttpApiBuilder.group(AttestorApi, "commitments", (handlers) =>
  Effect.map(Commitments, (commitments) =>
    handlers.handle("commitment", ({ payload, headers }) =>
      Effect.map(
        answerWithPayment(commitments.commit(payload, headers["payment-signature"])),
        renderedCommitment
      )
    )
  )
)
