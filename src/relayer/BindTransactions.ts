/**
 * The bind transactions (docs/relayer.md §3 bind rows, §4): unpaid, but simulated, gas-capped and
 * charged to the account's rate limit like every other relayed transaction; propose and cancel
 * also to the day's budget of their account and owner (src/relayer/BindBudget.ts).
 *
 * - cancel-bind: the current owner's `CancelBind` over `bindNonces(id)`, only while a bind is
 *   pending (409 `bind_state` otherwise).
 * - propose-bind: attestor signatures over `BindOwner(id, newOwner, bindNonces(id), deadline)`;
 *   the relayer recovers each, drops duplicates and non-attestors, requires `attestorThreshold()`
 *   valid distinct ones (400 `insufficient_attestations`) and sends them sorted by signer, as the
 *   vault demands. A kind-2 registration may travel with it (its fallback recipient screened
 *   against the deny list). 409 `bind_state` while one is pending.
 * - finalize-bind: permissionless once the chain's time reaches `pendingReadyAt` (409 `bind_state`
 *   before, or with no pending bind).
 *
 * Each reserves `bindNonces(id)` before simulation (409 `nonce_mismatch` while another request
 * holds it): propose and cancel consume it; finalize consumes nothing signed but ends the same
 * pending bind a cancel would, so it takes the same key and two finalizes, or a finalize and a
 * cancel, never both go out.
 */

import { Array as Arr, Context, Effect, Layer, Option } from "effect"
import { type Address, decodeFunctionResult, encodeFunctionData } from "viem"
import { feeVaultAbi } from "../../contracts/abi.js"
import {
  BadRequest,
  BindState,
  InsufficientAttestations,
  InvalidSignature,
  NotFound,
  Unavailable
} from "../../schema/errors.js"
import { ZERO_ADDRESS } from "../../schema/ids.js"
import type {
  CancelBindRequest,
  FinalizeBindRequest,
  ProposeBindRequest,
  TxHashResponse
} from "../../schema/relayer.js"
import { ChainClient } from "../chain/ChainClient.js"
import { chainUnavailable } from "../chain/errors.js"
import { nowSeconds } from "../clock.js"
import { RelayerSettings } from "../config/relayer.js"
import { AccountReader, type AccountSnapshot, type VaultAccount } from "./AccountReader.js"
import type { BindTransactionError } from "./api/binds.js"
import { BindBudget } from "./BindBudget.js"
import { bindGasBudgetOf } from "./fees/gasBudget.js"
import { registerCall } from "./multicall.js"
import { Relay } from "./Relay.js"
import { checkDeadline, checkRegistration } from "./validation/claimRules.js"
import { DenyList, screenRecipients } from "./validation/DenyList.js"
import { recoverEcdsa, VaultSignatures } from "./validation/VaultSignatures.js"

type Submit<R> = (request: R) => Effect.Effect<TxHashResponse, BindTransactionError>

export interface BindTransactionsShape {
  readonly cancelBind: Submit<CancelBindRequest>
  readonly proposeBind: Submit<ProposeBindRequest>
  readonly finalizeBind: Submit<FinalizeBindRequest>
}

/** The attestor set as the vault holds it, for a list of candidate signers. */
export interface AttestorView {
  readonly threshold: bigint
  readonly isAttestor: ReadonlyArray<boolean>
}

const registered = (snapshot: AccountSnapshot): Effect.Effect<VaultAccount, NotFound> =>
  Option.match(snapshot.account, {
    onNone: () => Effect.fail(new NotFound({ message: "the account is not registered" })),
    onSome: Effect.succeed
  })

const unavailable = chainUnavailable

/** Ascending by address as the vault compares them (as 160-bit numbers). */
const bySigner = (a: { readonly signer: Address }, b: { readonly signer: Address }) =>
  a.signer.toLowerCase() < b.signer.toLowerCase() ? -1 : 1

const makeBindTransactions = Effect.gen(function* () {
  const settings = yield* RelayerSettings
  const chain = yield* ChainClient
  const accounts = yield* AccountReader
  const signatures = yield* VaultSignatures
  const denyList = yield* DenyList
  const { replay, send } = yield* Relay
  const bindBudget = yield* BindBudget
  const budget = (input: Parameters<typeof bindGasBudgetOf>[0]) =>
    bindGasBudgetOf(input, settings.gasBudgetBps)

  /** `attestorThreshold()` and `isAttestor(s)` for each signer, in one call of the vault's multicall. */
  const attestors = (signers: ReadonlyArray<Address>): Effect.Effect<AttestorView, Unavailable> =>
    chain
      .call({
        to: settings.vault,
        data: encodeFunctionData({
          abi: feeVaultAbi,
          functionName: "multicall",
          args: [
            [
              encodeFunctionData({ abi: feeVaultAbi, functionName: "attestorThreshold" }),
              ...signers.map((signer) =>
                encodeFunctionData({ abi: feeVaultAbi, functionName: "isAttestor", args: [signer] })
              )
            ]
          ]
        }),
        errorAbi: feeVaultAbi
      })
      .pipe(
        Effect.mapError(unavailable),
        Effect.flatMap((data) =>
          Effect.try({
            try: () => {
              const [threshold, ...flags] = decodeFunctionResult({
                abi: feeVaultAbi,
                functionName: "multicall",
                data
              })
              if (threshold === undefined || flags.length !== signers.length) throw new Error("short answer")
              return {
                threshold: decodeFunctionResult({
                  abi: feeVaultAbi,
                  functionName: "attestorThreshold",
                  data: threshold
                }),
                isAttestor: flags.map((flag) =>
                  decodeFunctionResult({ abi: feeVaultAbi, functionName: "isAttestor", data: flag })
                )
              }
            },
            catch: () => new Unavailable({ message: "the vault answered with unexpected data" })
          })
        )
      )

  const cancelBind: BindTransactionsShape["cancelBind"] = (request) =>
    Effect.gen(function* () {
      const call = encodeFunctionData({
        abi: feeVaultAbi,
        functionName: "cancelBind",
        args: [request.id, request.deadline, request.signature]
      })
      // Sent before: the hash it was stored under, before any rule (docs/relayer.md §4 "Retries").
      const replayed = yield* replay([call])
      if (Option.isSome(replayed)) return replayed.value
      yield* checkDeadline(request.deadline, yield* nowSeconds, settings.minDeadlineSeconds, "deadline")
      const snapshot = yield* accounts.read(request.id)
      const account = yield* registered(snapshot)
      if (account.pendingOwner === ZERO_ADDRESS)
        return yield* new BindState({ message: "the account has no pending bind to cancel" })
      if (account.owner === ZERO_ADDRESS)
        return yield* new InvalidSignature({
          message: "the account has no owner yet, so nobody can cancel its bind (an attestor can veto it)"
        })
      yield* signatures.verifyOwner({
        owner: account.owner,
        primaryType: "CancelBind",
        message: { id: request.id, bindNonce: snapshot.bindNonce, deadline: request.deadline },
        signature: request.signature,
        what: `the cancel-bind (signed over the account's current bindNonce, ${snapshot.bindNonce})`
      })
      return yield* send({
        id: request.id,
        calls: [call],
        budget: budget({ action: "cancel-bind" }),
        action: "cancel-bind",
        reserve: [{ kind: "bindNonce", value: snapshot.bindNonce }],
        charge: bindBudget.charge({ id: request.id, owner: account.owner, action: "cancel-bind" })
      })
    }).pipe(Effect.withSpan("BindTransactions.cancelBind"))

  const proposeBind: BindTransactionsShape["proposeBind"] = (request) =>
    Effect.gen(function* () {
      const { id, newOwner, deadline, register } = request
      yield* checkDeadline(deadline, yield* nowSeconds, settings.minDeadlineSeconds, "deadline")
      if (newOwner === ZERO_ADDRESS)
        return yield* new BadRequest({ message: "newOwner must not be the zero address" })
      if (register !== undefined) yield* checkRegistration(id, register)
      // The relayer does not help register a fallback it would not pay.
      if (register !== undefined && register.fallbackRecipient !== ZERO_ADDRESS)
        yield* screenRecipients(denyList, [
          { label: "register.fallbackRecipient", address: register.fallbackRecipient }
        ])

      const snapshot = yield* accounts.read(id)
      if (Option.isSome(snapshot.account)) {
        const account = snapshot.account.value
        if (register !== undefined)
          return yield* new BadRequest({ message: "the account is already registered; leave out register" })
        if (account.kind !== 2)
          return yield* new BadRequest({ message: "binds apply to handle accounts (kind 2) only" })
        if (account.pendingOwner !== ZERO_ADDRESS)
          return yield* new BindState({
            message:
              "a bind is already pending for this account; it must be finalized, cancelled or vetoed first"
          })
      } else if (register === undefined) {
        return yield* new NotFound({
          message: "the account is not registered; send its kind-2 registration in register"
        })
      }

      // Recover every signature over the one BindOwner message; keep one per signer.
      const digest = yield* signatures.digest("BindOwner", {
        id,
        newOwner,
        bindNonce: snapshot.bindNonce,
        deadline
      })
      const recovered = yield* Effect.forEach(Arr.dedupe(request.signatures), (signature) =>
        Effect.map(
          recoverEcdsa(digest, signature),
          Option.map((signer) => ({ signer, signature }))
        )
      )
      const distinct = Arr.dedupeWith(Arr.getSomes(recovered), (a, b) => a.signer === b.signer)
      const view = yield* attestors(distinct.map((s) => s.signer))
      const valid = distinct.filter((_, i) => view.isAttestor[i] === true).sort(bySigner)
      if (view.threshold === 0n)
        return yield* new InsufficientAttestations({
          message: "the vault has no attestor threshold set, so it accepts no bind"
        })
      if (BigInt(valid.length) < view.threshold)
        return yield* new InsufficientAttestations({
          message: `${valid.length} valid distinct attestor signature(s) over BindOwner at bindNonce ${snapshot.bindNonce}; the vault requires ${view.threshold}`
        })

      return yield* send({
        id,
        calls: Arr.prependAll(
          Arr.of(
            encodeFunctionData({
              abi: feeVaultAbi,
              functionName: "proposeBind",
              args: [id, newOwner, deadline, valid.map((s) => s.signature)]
            })
          ),
          register === undefined ? [] : [registerCall(register)]
        ),
        budget: budget({
          action: "propose-bind",
          register: register !== undefined,
          signatures: valid.length
        }),
        action: "propose-bind",
        reserve: [{ kind: "bindNonce", value: snapshot.bindNonce }],
        // Charged to the owner the proposal would replace, who may cancel it; none for a first bind.
        charge: bindBudget.charge({
          id,
          owner: Option.match(snapshot.account, { onNone: () => ZERO_ADDRESS, onSome: (a) => a.owner }),
          action: "propose-bind"
        })
      })
    }).pipe(Effect.withSpan("BindTransactions.proposeBind"))

  const finalizeBind: BindTransactionsShape["finalizeBind"] = (request) =>
    Effect.gen(function* () {
      const snapshot = yield* accounts.read(request.id)
      const account = yield* registered(snapshot)
      if (account.pendingOwner === ZERO_ADDRESS)
        return yield* new BindState({ message: "the account has no pending bind to finalize" })
      // The vault compares with its block time, which may run ahead of this machine's clock.
      const head = yield* chain.getBlock().pipe(Effect.mapError(unavailable))
      if (head.timestamp < account.pendingReadyAt)
        return yield* new BindState({
          message: `the pending bind is ready at ${account.pendingReadyAt} (chain time now ${head.timestamp})`
        })
      return yield* send({
        id: request.id,
        calls: [encodeFunctionData({ abi: feeVaultAbi, functionName: "finalizeBind", args: [request.id] })],
        budget: budget({ action: "finalize-bind" }),
        action: "finalize-bind",
        reserve: [{ kind: "bindNonce", value: snapshot.bindNonce }],
        // `finalizeBind(id)` is the call of every bind of the account: not one request's.
        replayable: false
        // Not charged to the bind budget: one finalize succeeds per proposal (src/relayer/BindBudget.ts).
      })
    }).pipe(Effect.withSpan("BindTransactions.finalizeBind"))

  return { cancelBind, proposeBind, finalizeBind }
})

export class BindTransactions extends Context.Tag("BindTransactions")<
  BindTransactions,
  BindTransactionsShape
>() {
  static readonly layer: Layer.Layer<
    BindTransactions,
    never,
    RelayerSettings | ChainClient | AccountReader | VaultSignatures | DenyList | Relay | BindBudget
  > = Layer.effect(BindTransactions, makeBindTransactions)
}
