/**
 * The owner actions (docs/relayer.md §4 "Action endpoints"): consolidate, shield templates, rotate
 * owner and ping, each paid by a fee-only claim that the relayer appends to the action's multicall
 * so that action and payment succeed or revert together. Every rule is checked before simulation,
 * in the order of POST /v1/claim:
 *
 *   1. on its face: deadlines, the fee-only claim's form (or its absence), the action's own fields
 *      (consolidation amounts, templates), the registration's id
 *   2. deny list: a registration's fallback recipient
 *   3. signatures and nonces against one read of the account (with a fee claim, an action nonce
 *      already consumed is 409 first): the action over `nonces(id)`, the
 *      fee claim over `nonces(id) + 1`, signed by the owner (by the new owner for rotate-owner,
 *      because the fee claim runs after the rotation)
 *   4. the fee against `GET /v1/quote?action=…&asset=<fee asset>&adapter=0x0[&register=1][&templates=n]`
 *      minus `QUOTE_TOLERANCE_BPS`; a missing fee is 402 too, unless `REQUIRE_ACTION_FEE=false`
 *   5. reserve the nonces it consumes (409 while another request holds one), multicall
 *      `[register?, action, fee?]`, simulate, cap, check a fee covers the gas limit at the current
 *      gas price, charge the account's limit, send
 */

import { Array as Arr, Context, Effect, Layer, Option } from "effect"
import { type Address, encodeFunctionData, type Hex } from "viem"
import { feeVaultAbi } from "../../contracts/abi.js"
import type { VaultPrimaryType } from "../../schema/eip712.js"
import { BadRequest, FeeTooLow, NonceMismatch } from "../../schema/errors.js"
import { templatesHash, ZERO_ADDRESS } from "../../schema/ids.js"
import type {
  ConsolidateRequest,
  FeeClaim,
  PingRequest,
  QuoteAction,
  Registration,
  RotateOwnerRequest,
  ShieldTemplatesRequest,
  TxHashResponse
} from "../../schema/relayer.js"
import { nowSeconds } from "../clock.js"
import { RelayerSettings } from "../config/relayer.js"
import { TxSender } from "../txsender/TxSender.js"
import { AccountReader } from "./AccountReader.js"
import type { ActionError } from "./api/actions.js"
import type { QuoteRequest } from "./FeeOracle.js"
import { FeeOracle } from "./FeeOracle.js"
import { claimCall, consolidateCall, registerCall } from "./multicall.js"
import { type FeePaid, feePaidAgainstQuote, nonceUsed, Relay, type RelayRequest } from "./Relay.js"
import { checkFeeClaim, checkTemplates } from "./validation/actionRules.js"
import { checkConsolidateStep, checkDeadline, checkRegistration } from "./validation/claimRules.js"
import { DenyList, screenRecipients } from "./validation/DenyList.js"
import { expectedOwner } from "./validation/owner.js"
import type { OwnerSignature, VaultMessage } from "./validation/VaultSignatures.js"
import { VaultSignatures } from "./validation/VaultSignatures.js"

type Submit<R> = (request: R) => Effect.Effect<TxHashResponse, ActionError>

export interface OwnerActionsShape {
  readonly consolidate: Submit<ConsolidateRequest>
  readonly shieldTemplates: Submit<ShieldTemplatesRequest>
  readonly rotateOwner: Submit<RotateOwnerRequest>
  readonly ping: Submit<PingRequest>
}

type OwnerActionType = Exclude<QuoteAction, "claim">

/** One owner action, described for the shared pipeline. */
interface ActionPlan<P extends VaultPrimaryType> {
  readonly action: OwnerActionType
  readonly id: Hex
  readonly register: Registration | undefined
  readonly fee: FeeClaim | undefined
  /** Field name and value of the action's own deadline. */
  readonly deadline: readonly [string, bigint]
  /** Rule 1 for the action's own fields. */
  readonly checkFields: Effect.Effect<void, ActionError>
  readonly templates?: number
  /** The action's EIP-712 message at the account's current nonce. */
  readonly primaryType: P
  readonly message: (nonce: bigint) => VaultMessage<P>
  readonly signature: Hex
  /** Who signs the fee claim when it is not the owner (rotate-owner: the new owner). */
  readonly feeSigner?: Address
  readonly call: Hex
}

const makeOwnerActions: Effect.Effect<
  OwnerActionsShape,
  never,
  RelayerSettings | AccountReader | DenyList | VaultSignatures | FeeOracle | TxSender | Relay
> = Effect.gen(function* () {
  const settings = yield* RelayerSettings
  const accounts = yield* AccountReader
  const denyList = yield* DenyList
  const signatures = yield* VaultSignatures
  const oracle = yield* FeeOracle
  const sender = yield* TxSender
  const { replay, send, sendPaid } = yield* Relay
  // The claim and consolidation rules of this deployment are settings.
  const rules = settings

  const run = <P extends VaultPrimaryType>(plan: ActionPlan<P>): Effect.Effect<TxHashResponse, ActionError> =>
    Effect.gen(function* () {
      const { action, id, register, fee } = plan
      const calls = Arr.prependAll(
        Arr.appendAll(
          Arr.of(plan.call),
          fee === undefined ? [] : [claimCall(fee.claim, "0x", fee.signature)]
        ),
        register === undefined ? [] : [registerCall(register)]
      )
      // Sent before: the hash it was stored under, before any rule (docs/relayer.md §4 "Retries").
      const replayed = yield* replay(calls)
      if (Option.isSome(replayed)) return replayed.value
      const quoteRequest: QuoteRequest = {
        // Without a fee (REQUIRE_ACTION_FEE=false) the budget is priced in the settlement asset.
        asset: fee?.claim.asset ?? settings.settlementAsset,
        adapter: ZERO_ADDRESS,
        action,
        ...(plan.templates === undefined ? {} : { templates: plan.templates }),
        consolidate: false,
        register: register !== undefined
      }

      // Rule 1: the request on its face.
      const now = yield* nowSeconds
      yield* checkDeadline(plan.deadline[1], now, settings.minDeadlineSeconds, plan.deadline[0])
      if (fee === undefined) {
        if (settings.requireActionFee)
          return yield* new FeeTooLow({
            message: `this relayer takes ${action} only with a fee: attach a fee-only claim paying at least GET /v1/quote?action=${action}&adapter=0x0…`
          })
      } else {
        yield* checkDeadline(fee.claim.deadline, now, settings.minDeadlineSeconds, "fee.claim.deadline")
        yield* checkFeeClaim(fee.claim, { id, relayer: sender.address })
      }
      yield* plan.checkFields
      if (register !== undefined) yield* checkRegistration(id, register)

      // Rule 2: a fallback recipient the relayer will not help register.
      if (register !== undefined && register.fallbackRecipient !== ZERO_ADDRESS)
        yield* screenRecipients(denyList, [
          { label: "register.fallbackRecipient", address: register.fallbackRecipient }
        ])

      // Rule 3: signatures and nonces, against one read of the account.
      const snapshot = yield* accounts.read(id)
      // The fee claim names the nonces: the action's (one below it) already consumed, by a
      // transaction this relayer does not hold for it, is told apart before the registration rules.
      if (fee !== undefined && fee.claim.nonce >= 1n && fee.claim.nonce - 1n < snapshot.nonce)
        return yield* new NonceMismatch({ message: nonceUsed(snapshot.nonce) })
      const owner = yield* expectedOwner(register, snapshot)
      const nonce = snapshot.nonce
      const signedBy = yield* signatures.verifyOwner({
        owner,
        primaryType: plan.primaryType,
        message: plan.message(nonce),
        signature: plan.signature,
        what: `the ${action} (signed over the account's current nonce, ${nonce})`
      })
      let feeSignedBy: OwnerSignature | undefined
      if (fee !== undefined) {
        if (fee.claim.nonce !== nonce + 1n)
          return yield* new NonceMismatch({
            message: `fee.claim.nonce must be the account's nonce + 1, ${nonce + 1n}: the action consumes ${nonce}`
          })
        feeSignedBy = yield* signatures.verifyOwner({
          owner: plan.feeSigner ?? owner,
          primaryType: "Claim",
          message: fee.claim,
          signature: fee.signature,
          what: plan.feeSigner === undefined ? "the fee claim" : "the fee claim (signed by the new owner)"
        })
      }

      // Rule 4: the fee against the current quote (the operator pays when fees are optional).
      let paid: FeePaid | undefined
      if (fee !== undefined && settings.requireActionFee) {
        paid = yield* feePaidAgainstQuote(oracle, quoteRequest, {
          fee: fee.claim.relayerFee,
          field: "fee.claim.relayerFee",
          toleranceBps: settings.quoteToleranceBps,
          what: action
        })
      }

      // Rule 5: cooldowns, build, simulate, cap, fee cover (when it pays), send.
      const relayed: RelayRequest = {
        id,
        // Every owner contract the vault asks (rotate-owner's fee claim is the new owner's).
        erc1271Owners: [
          ...(signedBy === "erc1271" ? [owner] : []),
          ...(feeSignedBy === "erc1271" ? [plan.feeSigner ?? owner] : [])
        ],
        calls,
        budget: oracle.gasBudget(quoteRequest),
        action,
        // The action consumes `nonce`, its fee claim `nonce + 1`.
        reserve:
          fee === undefined
            ? [{ kind: "nonce", value: nonce }]
            : [
                { kind: "nonce", value: nonce },
                { kind: "nonce", value: nonce + 1n }
              ]
      }
      // Unpaid (REQUIRE_ACTION_FEE=false): the operator has chosen to pay for the gas.
      return yield* paid === undefined ? send(relayed) : sendPaid(relayed, paid)
    }).pipe(Effect.withSpan("OwnerActions.submit", { attributes: { action: plan.action } }))

  const vaultCall = encodeFunctionData

  return {
    consolidate: (request) =>
      run({
        action: "consolidate",
        id: request.id,
        register: request.register,
        fee: request.fee,
        deadline: ["consolidate.deadline", request.consolidate.deadline],
        checkFields: checkConsolidateStep(rules, request.consolidate, undefined),
        primaryType: "Consolidate",
        message: (nonce) => ({
          id: request.id,
          assetIn: request.consolidate.assetIn,
          amountIn: request.consolidate.amountIn,
          minOut: request.consolidate.minOut,
          nonce,
          deadline: request.consolidate.deadline
        }),
        signature: request.consolidate.signature,
        call: consolidateCall(request.id, request.consolidate)
      }),

    shieldTemplates: (request) =>
      run({
        action: "shield-templates",
        id: request.id,
        register: request.register,
        fee: request.fee,
        deadline: ["deadline", request.deadline],
        checkFields: Effect.asVoid(checkTemplates(request.templates, request.id, settings.settlementAsset)),
        templates: request.templates.length,
        primaryType: "RegisterShieldTemplates",
        // Built only once the templates passed: the owner signs the hash the vault recomputes.
        message: (nonce) => ({
          id: request.id,
          templatesHash: templatesHash(request.templates),
          nonce,
          deadline: request.deadline
        }),
        signature: request.signature,
        call: vaultCall({
          abi: feeVaultAbi,
          functionName: "registerShieldTemplates",
          args: [request.id, request.templates, request.deadline, request.signature]
        })
      }),

    rotateOwner: (request) =>
      run({
        action: "rotate-owner",
        id: request.id,
        register: request.register,
        fee: request.fee,
        deadline: ["deadline", request.deadline],
        checkFields:
          request.newOwner === ZERO_ADDRESS
            ? Effect.fail(new BadRequest({ message: "newOwner must not be the zero address" }))
            : Effect.void,
        primaryType: "RotateOwner",
        message: (nonce) => ({
          id: request.id,
          newOwner: request.newOwner,
          nonce,
          deadline: request.deadline
        }),
        signature: request.signature,
        feeSigner: request.newOwner,
        call: vaultCall({
          abi: feeVaultAbi,
          functionName: "rotateOwner",
          args: [request.id, request.newOwner, request.deadline, request.signature]
        })
      }),

    ping: (request) =>
      run({
        action: "ping",
        id: request.id,
        register: request.register,
        fee: request.fee,
        deadline: ["deadline", request.deadline],
        checkFields: Effect.void,
        primaryType: "Ping",
        message: (nonce) => ({ id: request.id, nonce, deadline: request.deadline }),
        signature: request.signature,
        call: vaultCall({
          abi: feeVaultAbi,
          functionName: "ping",
          args: [request.id, request.deadline, request.signature]
        })
      })
  }
})

export class OwnerActions extends Context.Tag("OwnerActions")<OwnerActions, OwnerActionsShape>() {
  static readonly layer: Layer.Layer<
    OwnerActions,
    never,
    RelayerSettings | AccountReader | DenyList | VaultSignatures | FeeOracle | TxSender | Relay
  > = Layer.effect(OwnerActions, makeOwnerActions)
}
