/**
 * The stateless rules of the owner-action endpoints (docs/relayer.md §2 "Fee-only claim wrapper",
 * §4 "Action endpoints"; docs/protocol.md §5, §7): the fee-only claim on its face, and the shield
 * templates (count, size, uniqueness, canonical form) with the hash the owner signed.
 */
import { Effect } from "effect"
import { type Address, type Hex, keccak256 } from "viem"
import {
  AdapterNotAllowed,
  BadRequest,
  DataHashMismatch,
  InvalidAmount,
  InvalidTemplates,
  type RelayerMismatch
} from "../../../schema/errors.js"
import {
  EMPTY_DATA_HASH,
  MAX_TEMPLATES,
  SHIELD_PAYLOAD_BYTES,
  templatesHash,
  ZERO_ADDRESS
} from "../../../schema/ids.js"
import type { Claim } from "../../../schema/relayer.js"
import { checkRelayer, isCanonicalShieldPayload } from "./claimRules.js"

/**
 * A fee-only claim pays this relayer `relayerFee` of its asset and moves nothing else: the zero
 * adapter, `amount == relayerFee > 0`, empty adapter data, this relayer by name (a fee anyone could
 * collect would pay whoever front-runs it), and the account the action is for.
 */
export const checkFeeClaim = (
  fee: Claim,
  expected: { readonly id: Hex; readonly relayer: Address }
): Effect.Effect<void, RelayerMismatch | AdapterNotAllowed | InvalidAmount | DataHashMismatch | BadRequest> =>
  Effect.gen(function* () {
    if (fee.beneficiaryId.toLowerCase() !== expected.id.toLowerCase())
      return yield* new BadRequest({ message: "fee.claim.beneficiaryId must be the request's id" })
    yield* checkRelayer(fee.relayer, expected.relayer, { allowAnyone: false, field: "fee.claim.relayer" })
    if (fee.adapter !== ZERO_ADDRESS)
      return yield* new AdapterNotAllowed({ message: "fee.claim.adapter must be the zero address" })
    if (fee.relayerFee === 0n)
      return yield* new InvalidAmount({ message: "fee.claim.relayerFee must be above zero" })
    if (fee.amount !== fee.relayerFee)
      return yield* new InvalidAmount({
        message: "fee.claim.amount must equal fee.claim.relayerFee: a fee-only claim pays nothing else"
      })
    if (fee.dataHash !== EMPTY_DATA_HASH)
      return yield* new DataHashMismatch({ message: "fee.claim.dataHash must be keccak256 of empty bytes" })
  })

/**
 * Templates as the vault will take them: 1..32, each exactly the 320-byte canonical shield payload
 * of this account and the settlement asset, no two alike. Returns the `templatesHash` the owner's
 * `RegisterShieldTemplates` must sign.
 */
export const checkTemplates = (
  templates: ReadonlyArray<Hex>,
  id: Hex,
  settlementAsset: Address
): Effect.Effect<Hex, InvalidTemplates> => {
  const refuse = (message: string) => Effect.fail(new InvalidTemplates({ message }))
  if (templates.length < 1 || templates.length > MAX_TEMPLATES)
    return refuse(`templates must hold 1 to ${MAX_TEMPLATES} templates, not ${templates.length}`)
  const seen = new Set<string>()
  for (const [i, template] of templates.entries()) {
    if (template.length !== 2 + SHIELD_PAYLOAD_BYTES * 2)
      return refuse(`templates[${i}] must be exactly ${SHIELD_PAYLOAD_BYTES} bytes`)
    const hash = keccak256(template)
    if (seen.has(hash)) return refuse(`templates[${i}] repeats an earlier template`)
    seen.add(hash)
    if (!isCanonicalShieldPayload(template, id, settlementAsset))
      return refuse(
        `templates[${i}] is not the canonical shield payload of this account: the account's id, token type 0, the settlement asset, sub id 0 and 0 < value < 2^120`
      )
  }
  return Effect.succeed(templatesHash(templates))
}
