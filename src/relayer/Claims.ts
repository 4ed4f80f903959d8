/**
 * POST /v1/claim (docs/relayer.md §4 "POST /v1/claim processing rules"): the rules in order, each
 * refusing before anything is sent, then the multicall `[register?, consolidate?, claim]`,
 * simulation, gas cap, the per-account rate limit, and the hot key's submission.
 *
 *   0. the same request stored before (pending or mined, not dropped): its hash, nothing checked
 *   1. body (decoded by the route), deadline headroom, relayer, amounts, data hash, adapter
 *   2. deny list: a direct recipient and a registration's fallback recipient
 *   3. a nonce already consumed (409); signatures against the expected owner; nonce (`nonces(id)`,
 *      `+1` after a consolidation);
 *      the full-balance rules against the balance the consolidation leaves
 *   4. fee against the current quote minus `QUOTE_TOLERANCE_BPS`
 *   5. refuse an id or ERC-1271 owner code on a revert cooldown, reserve the nonces it consumes
 *      (409 while another request holds one), build, simulate, cap, check the fee covers the gas
 *      limit at the current gas price (not the quote's, which may be a minute old), send
 *
 * An open claim (`claim.relayer` the zero address) is refused under `OPEN_CLAIMS=refuse`
 * (docs/relayer.md §8 "Open claims").
 */

import { Array as Arr, Context, Effect, Layer, Option } from "effect"
import { BadRequest, NonceMismatch } from "../../schema/errors.js"
import { ZERO_ADDRESS } from "../../schema/ids.js"
import type { ClaimRequest, TxHashResponse } from "../../schema/relayer.js"
import { nowSeconds } from "../clock.js"
import { RelayerSettings } from "../config/relayer.js"
import { TxSender } from "../txsender/TxSender.js"
import { AccountReader } from "./AccountReader.js"
import type { ClaimError } from "./api/claims.js"
import type { QuoteRequest } from "./FeeOracle.js"
import { FeeOracle } from "./FeeOracle.js"
import { claimCall, consolidateCall, registerCall } from "./multicall.js"
import { feePaidAgainstQuote, nonceUsed, Relay } from "./Relay.js"
import {
  checkAdapter,
  checkAgainstConsolidated,
  checkAmounts,
  checkConsolidateStep,
  checkDataHash,
  checkDeadline,
  checkRegistration,
  checkRelayer
} from "./validation/claimRules.js"
import { DenyList, screenRecipients } from "./validation/DenyList.js"
import { expectedOwner } from "./validation/owner.js"
import { VaultSignatures } from "./validation/VaultSignatures.js"

export interface ClaimsShape {
  readonly submit: (request: ClaimRequest) => Effect.Effect<TxHashResponse, ClaimError>
}

const makeClaims = Effect.gen(function* () {
  const settings = yield* RelayerSettings
  const accounts = yield* AccountReader
  const denyList = yield* DenyList
  const signatures = yield* VaultSignatures
  const oracle = yield* FeeOracle
  const sender = yield* TxSender
  const { replay, sendPaid } = yield* Relay
  // The claim and consolidation rules of this deployment are settings.
  const rules = settings

  const submit = (request: ClaimRequest): Effect.Effect<TxHashResponse, ClaimError> =>
    Effect.gen(function* () {
      const { claim, adapterData, signature, register, consolidate } = request
      const id = claim.beneficiaryId
      const calls = Arr.append(
        [
          ...(register === undefined ? [] : [registerCall(register)]),
          ...(consolidate === undefined ? [] : [consolidateCall(id, consolidate)])
        ],
        claimCall(claim, adapterData, signature)
      )

      // Sent before (its answer lost, say): the hash it was stored under, before any rule an
      // executed request no longer passes.
      const replayed = yield* replay(calls)
      if (Option.isSome(replayed)) return replayed.value

      // Rule 1: the request on its face.
      const now = yield* nowSeconds
      yield* checkDeadline(claim.deadline, now, settings.minDeadlineSeconds, "claim.deadline")
      if (consolidate !== undefined)
        yield* checkDeadline(consolidate.deadline, now, settings.minDeadlineSeconds, "consolidate.deadline")
      yield* checkRelayer(claim.relayer, sender.address, { allowAnyone: true, field: "claim.relayer" })
      if (claim.relayer === ZERO_ADDRESS && settings.openClaims === "refuse")
        return yield* new BadRequest({
          message: `claim.relayer: this relayer does not take open claims (the zero address); name this relayer, ${sender.address}`
        })
      yield* checkAmounts(claim)
      if (consolidate !== undefined) yield* checkConsolidateStep(rules, consolidate, claim.asset)
      yield* checkDataHash(claim, adapterData)
      const payout = yield* checkAdapter(rules, claim, adapterData)
      if (register !== undefined) yield* checkRegistration(id, register)

      // Rule 2: recipients the relayer will not pay.
      yield* screenRecipients(denyList, [
        ...(payout._tag === "Direct" ? [{ label: "the recipient", address: payout.recipient }] : []),
        ...(register !== undefined && register.fallbackRecipient !== ZERO_ADDRESS
          ? [{ label: "register.fallbackRecipient", address: register.fallbackRecipient }]
          : [])
      ])

      // Rule 3: owner signatures and nonces, against one read of the account.
      const snapshot = yield* accounts.read(id, consolidate === undefined ? [] : [settings.settlementAsset])
      // A nonce of the request already consumed, by a transaction this relayer does not hold
      // for it: told apart from a wrong nonce, and before the registration rules (which an
      // executed registration no longer passes).
      const firstNonce = consolidate === undefined ? claim.nonce : claim.nonce - 1n
      if (firstNonce >= 0n && firstNonce < snapshot.nonce)
        return yield* new NonceMismatch({ message: nonceUsed(snapshot.nonce) })
      const owner = yield* expectedOwner(register, snapshot)
      const signedBy = yield* signatures.verifyOwner({
        owner,
        primaryType: "Claim",
        message: claim,
        signature,
        what: "the claim"
      })
      const nonce = snapshot.nonce
      const claimNonce = consolidate === undefined ? nonce : nonce + 1n
      if (claim.nonce !== claimNonce)
        return yield* new NonceMismatch({
          message:
            consolidate === undefined
              ? `claim.nonce must be the account's current nonce, ${nonce}`
              : `with a consolidation step claim.nonce must be the account's nonce + 1, ${claimNonce}`
        })
      // Whether the vault asks the owner's contract (ERC-1271), whose code may then go on a cooldown.
      let erc1271 = signedBy === "erc1271"
      if (consolidate !== undefined) {
        const consolidateSignedBy = yield* signatures.verifyOwner({
          owner,
          primaryType: "Consolidate",
          message: {
            id,
            assetIn: consolidate.assetIn,
            amountIn: consolidate.amountIn,
            minOut: consolidate.minOut,
            nonce,
            deadline: consolidate.deadline
          },
          signature: consolidate.signature,
          what: "the consolidation"
        })
        erc1271 ||= consolidateSignedBy === "erc1271"
        yield* checkAgainstConsolidated(claim, consolidate, snapshot.balance(settings.settlementAsset))
      }

      // Rule 4: the fee against the current quote.
      const quoteRequest: QuoteRequest = {
        asset: claim.asset,
        adapter: claim.adapter,
        action: "claim",
        consolidate: consolidate !== undefined,
        register: register !== undefined
      }
      const paid = yield* feePaidAgainstQuote(oracle, quoteRequest, {
        fee: claim.relayerFee,
        field: "claim.relayerFee",
        toleranceBps: settings.quoteToleranceBps,
        what: "request"
      })

      // Rule 5: cooldowns, build, simulate, cap, fee cover, send.
      return yield* sendPaid(
        {
          id,
          erc1271Owners: erc1271 ? [owner] : [],
          calls,
          budget: oracle.gasBudget(quoteRequest),
          action: "claim",
          // The consolidation consumes `nonce`, the claim `claimNonce` (the same one without it).
          reserve:
            consolidate === undefined
              ? [{ kind: "nonce", value: nonce }]
              : [
                  { kind: "nonce", value: nonce },
                  { kind: "nonce", value: claimNonce }
                ]
        },
        paid
      )
    }).pipe(Effect.withSpan("Claims.submit"))

  return { submit }
})

export class Claims extends Context.Tag("Claims")<Claims, ClaimsShape>() {
  static readonly layer: Layer.Layer<
    Claims,
    never,
    RelayerSettings | AccountReader | DenyList | VaultSignatures | FeeOracle | TxSender | Relay
  > = Layer.effect(Claims, makeClaims)
}
