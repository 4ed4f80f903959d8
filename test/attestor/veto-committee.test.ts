/**
 * The committee veto rule (`VETO_RULE`, docs/attestor.md "The committee"), in passes of the veto
 * watcher over stubbed indexes and chain, the real attestation store, and proposals whose
 * transactions carry real `BindOwner` signatures of three members:
 *
 * - a proposal signed by the two other members, this one never asked: not vetoed (`unasked`),
 *   sent directly or inside the vault's `multicall` as the relayer sends it; under
 *   `VETO_RULE=strict` the same proposals are vetoed;
 * - one carrying this member's own signature that it never issued (its key signed elsewhere): vetoed;
 * - one sent through a contract (its signatures cannot be read): vetoed, the strict rule;
 * - one to another key than the one this member attested at the same bind nonce: vetoed;
 * - one to an owner a contest ruled out: vetoed;
 * - the veto waits for this member's slot (`VETO_STAGGER_SECONDS`).
 */
import { describe, expect, layer } from "@effect/vitest"
import { Effect, Layer, Option, TestClock } from "effect"
import {
  type Address,
  encodeFunctionData,
  getAddress,
  type Hex,
  keccak256,
  numberToHex,
  type Transaction
} from "viem"
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts"
import { feeVaultAbi } from "../../contracts/abi.js"
import { vaultDomain, vaultTypes } from "../../schema/eip712.js"
import { AttestationStore, makeAttestationStore } from "../../src/attestor/binds/AttestationStore.js"
import { HintIndex, type HintSnapshot } from "../../src/attestor/hints/HintIndex.js"
import { makeProposalStore } from "../../src/attestor/veto/ProposalStore.js"
import { makeVetoWatcher } from "../../src/attestor/veto/VetoWatcher.js"
import { type VetoRule, vetoDelaySeconds } from "../../src/attestor/veto/vetoVerdicts.js"
import { mockChainClient } from "../../src/chain/MockChainClient.js"
import { type AccountsSnapshot, Indexer } from "../../src/indexer/Indexer.js"
import { migrate } from "../../src/store/migrations.js"
import { type AccountState, emptyAccount } from "../../src/store/projections/accounts.js"
import type { TxRequest, TxSenderShape } from "../../src/txsender/TxSender.js"
import { testDatabases } from "../support/database.js"

const CHAIN_ID = 31337
const VAULT = getAddress(numberToHex(0x7a017, { size: 20 }))
const members = [generatePrivateKey(), generatePrivateKey(), generatePrivateKey()].map((k) =>
  privateKeyToAccount(k)
)
/** The member whose watcher runs: the third. */
const self = members[2]!
const ROUTER = getAddress(numberToHex(0xc0de, { size: 20 }))

let counter = 0
const newId = (): Hex => keccak256(numberToHex(0xc0_0000 + ++counter))
const newOwner = (): Address => getAddress(numberToHex(0xbeef_0000 + ++counter, { size: 20 }))

const withMigrations = (database: ReturnType<typeof testDatabases>[number]) =>
  Layer.effectDiscard(migrate).pipe(Layer.provideMerge(database.layer))

interface Proposed {
  readonly id: Hex
  readonly newOwner: Address
  readonly bindNonce: bigint
  /** Which members signed, by index. */
  readonly signers: ReadonlyArray<number>
  /** Sent through a contract rather than to the vault. */
  readonly viaContract?: boolean
  /** Sent inside the vault's own `multicall`, after another call, as the relayer sends it. */
  readonly inMulticall?: boolean
  /** Inside a multicall inside a multicall. */
  readonly nested?: boolean
  /**
   * A decoy first: the same signers' `proposeBind` at the bind nonce before, a `vetoBind`, then the
   * real call, all in one multicall (the proposal pending is the last one).
   */
  readonly decoyFirst?: boolean
}

const DEADLINE = 4_000_000_000n

/** `p`'s signers' sorted `BindOwner` signatures at `bindNonce`. */
const signaturesOf = async (p: Proposed, bindNonce: bigint) => {
  const signatures = await Promise.all(
    p.signers.map((i) =>
      members[i]!.signTypedData({
        domain: vaultDomain(CHAIN_ID, VAULT),
        types: vaultTypes,
        primaryType: "BindOwner",
        message: { id: p.id, newOwner: p.newOwner, bindNonce, deadline: DEADLINE }
      })
    )
  )
  return signatures
    .map((signature, i) => ({ signature, signer: members[p.signers[i]!]!.address.toLowerCase() }))
    .sort((a, b) => (a.signer < b.signer ? -1 : 1))
    .map((s) => s.signature)
}

const multicall = (calls: ReadonlyArray<Hex>) =>
  encodeFunctionData({ abi: feeVaultAbi, functionName: "multicall", args: [calls] })

/** The `proposeBind` transaction of `p`, with real signatures of its signers. */
const proposalTx = async (p: Proposed, hash: Hex): Promise<Transaction> => {
  const proposeAt = async (bindNonce: bigint) =>
    encodeFunctionData({
      abi: feeVaultAbi,
      functionName: "proposeBind",
      args: [p.id, p.newOwner, DEADLINE, await signaturesOf(p, bindNonce)]
    })
  const input = await proposeAt(p.bindNonce)
  const finalize = encodeFunctionData({ abi: feeVaultAbi, functionName: "finalizeBind", args: [p.id] })
  const data = p.decoyFirst
    ? multicall([
        await proposeAt(p.bindNonce - 1n),
        encodeFunctionData({ abi: feeVaultAbi, functionName: "vetoBind", args: [p.id] }),
        input
      ])
    : p.nested
      ? multicall([finalize, multicall([input])])
      : p.inMulticall
        ? multicall([finalize, input])
        : input
  return { hash, to: p.viaContract ? ROUTER : VAULT, input: data } as unknown as Transaction
}

/** The vault index with `accounts` at block 100, and a hint index that knows every id. */
const stubIndexes = (accounts: Map<Hex, AccountState>) =>
  Layer.merge(
    Layer.succeed(Indexer, {
      enabled: false,
      status: Effect.die("unused"),
      read: (f) =>
        Effect.sync(() =>
          f({
            chainId: CHAIN_ID,
            vault: VAULT,
            block: 100,
            hash: `0x${"11".repeat(32)}`,
            version: 1,
            accounts,
            projection: undefined as never
          } satisfies AccountsSnapshot)
        )
    }),
    Layer.succeed(HintIndex, {
      status: Effect.die("unused"),
      escrowsOf: () => Effect.die("unused"),
      read: (f) =>
        Effect.sync(() =>
          f({ block: 100, projection: { escrow: () => ({}) as never } } as unknown as HintSnapshot)
        )
    })
  )

for (const database of testDatabases()) {
  describe(`committee veto rule on ${database.name}`, () => {
    layer(withMigrations(database), { timeout: 60_000 })((it) => {
      it.effect(
        "spares an unasked proposal, vetoes own forged, unreadable, conflicting and contested ones",
        () =>
          Effect.gen(function* () {
            const accounts = new Map<Hex, AccountState>()
            const txs = new Map<Hex, Transaction>()
            const logs: Array<{ id: Hex; newOwner: Address; bindNonce: bigint; tx: Hex }> = []
            const submitted: Array<TxRequest> = []
            const propose = (p: Proposed) =>
              Effect.promise(async () => {
                const hash = keccak256(numberToHex(0xf00_0000 + ++counter))
                txs.set(hash, await proposalTx(p, hash))
                logs.push({ id: p.id, newOwner: p.newOwner, bindNonce: p.bindNonce, tx: hash })
                accounts.set(p.id, {
                  ...emptyAccount(p.id),
                  pendingOwner: p.newOwner,
                  pendingReadyAt: 1n,
                  pendingBlock: 50,
                  bindNonce: p.bindNonce + 1n
                })
              })
            const indexes = stubIndexes(accounts)
            const chain = mockChainClient({
              chainId: Effect.succeed(CHAIN_ID),
              // The vault: threshold 2, the three members registered.
              readContract: ((request: { functionName: string; args?: ReadonlyArray<unknown> }) =>
                Effect.succeed(
                  request.functionName === "attestorThreshold"
                    ? 2n
                    : members.some((m) => m.address.toLowerCase() === String(request.args?.[0]).toLowerCase())
                )) as never,
              call: () => Effect.succeed("0x"),
              estimateGas: () => Effect.succeed(50_000n),
              getBlock: () =>
                Effect.succeed({
                  number: 50n,
                  hash: `0x${"22".repeat(32)}`,
                  parentHash: `0x${"33".repeat(32)}`,
                  timestamp: 1_000n
                }),
              getLogs: ((request: { args: { id: Hex } }) =>
                Effect.succeed(
                  logs
                    .filter((l) => l.id === request.args.id)
                    .map((l) => ({
                      args: { id: l.id, newOwner: l.newOwner, readyAt: 1n, bindNonce: l.bindNonce },
                      transactionHash: l.tx
                    }))
                )) as never,
              getTransaction: (hash) => Effect.succeed(Option.fromNullable(txs.get(hash)))
            })
            const sender: TxSenderShape = {
              address: self.address,
              submit: (request) =>
                Effect.sync(() => {
                  submitted.push(request)
                  return `0x${String(submitted.length).padStart(64, "0")}` as Hex
                }),
              status: (hash) => Effect.succeed({ txHash: hash as never, status: "pending" })
            }
            const attestations = yield* makeAttestationStore
            const proposals = yield* makeProposalStore
            const services = Layer.mergeAll(indexes, chain, Layer.succeed(AttestationStore, attestations))
            const watcher = (vetoRule: VetoRule, vetoStaggerSeconds = 0) =>
              makeVetoWatcher(
                {
                  vault: VAULT,
                  autoVeto: true,
                  vetoUnknownIds: false,
                  vetoRule,
                  vetoStaggerSeconds,
                  self: self.address,
                  pollIntervalMs: 3_600_000
                },
                proposals,
                Option.some(sender)
              ).pipe(Effect.provide(services), Effect.scoped)
            const vetoedIds = () => submitted.map((r) => `0x${r.data.slice(10, 74)}`)

            // Members 1 and 2 signed; this member (3) was never asked.
            const unasked: Proposed = { id: newId(), newOwner: newOwner(), bindNonce: 0n, signers: [0, 1] }
            // The same, inside the vault's multicall (a registration first, as the relayer sends).
            const unaskedBatched: Proposed = {
              id: newId(),
              newOwner: newOwner(),
              bindNonce: 0n,
              signers: [0, 1],
              inMulticall: true
            }
            // Its own signature among them, never issued by it, in a multicall too.
            const ownForgedBatched: Proposed = {
              id: newId(),
              newOwner: newOwner(),
              bindNonce: 0n,
              signers: [1, 2],
              inMulticall: true
            }
            // Its own signature among them, never issued by it.
            const ownForged: Proposed = { id: newId(), newOwner: newOwner(), bindNonce: 0n, signers: [0, 2] }
            // Sent through a contract: unreadable.
            const viaContract: Proposed = {
              id: newId(),
              newOwner: newOwner(),
              bindNonce: 0n,
              signers: [0, 1],
              viaContract: true
            }
            // This member attested another key for the id at this bind nonce.
            const conflicting: Proposed = {
              id: newId(),
              newOwner: newOwner(),
              bindNonce: 3n,
              signers: [0, 1]
            }
            yield* attestations.record(
              [
                {
                  id: conflicting.id,
                  newOwner: newOwner(),
                  bindNonce: 3n,
                  deadline: DEADLINE,
                  visibility: "private"
                }
              ],
              900
            )
            // Unasked, in a multicall inside a multicall: read through.
            const unaskedNested: Proposed = {
              id: newId(),
              newOwner: newOwner(),
              bindNonce: 0n,
              signers: [0, 1],
              nested: true
            }
            // A decoy proposal (its signatures over the bind nonce before) ahead of the real one
            // that carries this member's signature: the real one is read too.
            const decoy: Proposed = {
              id: newId(),
              newOwner: newOwner(),
              bindNonce: 5n,
              signers: [0, 2],
              decoyFirst: true
            }
            // Signed by one member where the vault needs two: not the call the vault accepted.
            const tooFew: Proposed = { id: newId(), newOwner: newOwner(), bindNonce: 0n, signers: [0] }
            // Its attestation of another key at an earlier bind nonce does not make a conflict.
            const earlier: Proposed = { id: newId(), newOwner: newOwner(), bindNonce: 2n, signers: [0, 1] }
            yield* attestations.record(
              [
                {
                  id: earlier.id,
                  newOwner: newOwner(),
                  bindNonce: 1n,
                  deadline: DEADLINE,
                  visibility: "private"
                }
              ],
              900
            )
            for (const p of [
              unasked,
              unaskedBatched,
              ownForged,
              ownForgedBatched,
              viaContract,
              conflicting,
              earlier,
              unaskedNested,
              decoy,
              tooFew
            ])
              yield* propose(p)

            const committee = yield* watcher("committee")
            yield* committee.pass
            expect(new Set(vetoedIds())).toEqual(
              new Set([
                ownForged.id,
                ownForgedBatched.id,
                viaContract.id,
                conflicting.id,
                decoy.id,
                tooFew.id
              ])
            )
            expect(Option.getOrUndefined(yield* proposals.get(unaskedNested.id, 0n))?.verdict).toBe("unasked")
            expect(Option.getOrUndefined(yield* proposals.get(unaskedBatched.id, 0n))?.verdict).toBe(
              "unasked"
            )
            expect(Option.getOrUndefined(yield* proposals.get(unasked.id, 0n))?.verdict).toBe("unasked")
            expect(Option.getOrUndefined(yield* proposals.get(earlier.id, 2n))?.verdict).toBe("unasked")
            // Passes later: still spared.
            yield* committee.pass
            expect(submitted).toHaveLength(6)

            // The user contests the unasked proposal at this member: vetoed on the next pass.
            yield* attestations.contest(
              [{ id: unasked.id, pendingOwner: unasked.newOwner }],
              newOwner(),
              1_100
            )
            yield* committee.pass
            expect(vetoedIds()).toContain(unasked.id)
            expect(submitted).toHaveLength(7)

            // The strict rule vetoes every proposal it did not attest: the others too.
            yield* (yield* watcher("strict")).pass
            expect(vetoedIds()).toContain(earlier.id)
            expect(vetoedIds()).toContain(unaskedBatched.id)
            expect(vetoedIds()).toContain(unaskedNested.id)
            expect(submitted).toHaveLength(10)
          })
      )

      it.effect("a veto waits for this member's slot", () =>
        Effect.gen(function* () {
          // An id whose slot for this member is not the first.
          let id = newId()
          while (vetoDelaySeconds(id, self.address, 10) === 0) id = newId()
          const delay = vetoDelaySeconds(id, self.address, 10)
          const owner = newOwner()
          const accounts = new Map<Hex, AccountState>([
            [
              id,
              {
                ...emptyAccount(id),
                pendingOwner: owner,
                pendingReadyAt: 1n,
                pendingBlock: 50,
                bindNonce: 1n
              }
            ]
          ])
          const submitted: Array<TxRequest> = []
          const indexes = stubIndexes(accounts)
          const chain = mockChainClient({
            call: () => Effect.succeed("0x"),
            estimateGas: () => Effect.succeed(50_000n),
            getBlock: () =>
              Effect.succeed({
                number: 50n,
                hash: `0x${"22".repeat(32)}`,
                parentHash: `0x${"33".repeat(32)}`,
                timestamp: 1_000n
              })
          })
          const attestations = yield* makeAttestationStore
          // A contest at this member rules the owner out: vetoable without reading signatures.
          yield* attestations.contest([{ id, pendingOwner: owner }], newOwner(), 900)
          const sender: TxSenderShape = {
            address: self.address,
            submit: (request) =>
              Effect.sync(() => {
                submitted.push(request)
                return `0x${"01".padStart(64, "0")}` as Hex
              }),
            status: (hash) => Effect.succeed({ txHash: hash as never, status: "pending" })
          }
          const watcher = yield* makeVetoWatcher(
            {
              vault: VAULT,
              autoVeto: true,
              vetoUnknownIds: false,
              vetoRule: "committee",
              vetoStaggerSeconds: 10,
              self: self.address,
              pollIntervalMs: 3_600_000
            },
            yield* makeProposalStore,
            Option.some(sender)
          ).pipe(
            Effect.provide(Layer.mergeAll(indexes, chain, Layer.succeed(AttestationStore, attestations)))
          )
          yield* watcher.pass
          expect(submitted).toHaveLength(0)
          yield* TestClock.adjust(`${delay - 1} seconds`)
          yield* watcher.pass
          expect(submitted).toHaveLength(0)
          yield* TestClock.adjust("1 second")
          yield* watcher.pass
          expect(submitted).toHaveLength(1)
        }).pipe(Effect.scoped)
      )
    })
  })
}
