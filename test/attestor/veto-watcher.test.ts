/**
 * The veto watcher (src/attestor/veto/VetoWatcher.ts): the record of judged proposals
 * (src/attestor/veto/ProposalStore.ts, migration 0022) on each test database, and passes over stubbed indexes, chain and
 * sender with the real attestation store: one veto per unattested proposal, never a second one
 * (not on the next pass, not after a restart), a contested owner's proposal vetoed, a proposal
 * whose only attestation was recorded after it was mined vetoed, a
 * simulation that reverts sending nothing, a sender's refusal retried, AUTO_VETO off only counting.
 */
import { SqlClient } from "@effect/sql/SqlClient"
import { describe, expect, layer } from "@effect/vitest"
import { Effect, Layer, Metric, Option } from "effect"
import { type Address, getAddress, type Hex, keccak256, numberToHex } from "viem"
import { AttestationStore, makeAttestationStore } from "../../src/attestor/binds/AttestationStore.js"
import { HintIndex, type HintSnapshot } from "../../src/attestor/hints/HintIndex.js"
import { makeProposalStore, STALE_CLAIM_SECONDS } from "../../src/attestor/veto/ProposalStore.js"
import { bindProposals, makeVetoWatcher, vetoes } from "../../src/attestor/veto/VetoWatcher.js"
import { ISSUED_AT_TOLERANCE_SECONDS } from "../../src/attestor/veto/vetoVerdicts.js"
import { ChainReverted, ChainUnavailable } from "../../src/chain/ChainClient.js"
import { mockChainClient } from "../../src/chain/MockChainClient.js"
import { type AccountsSnapshot, Indexer } from "../../src/indexer/Indexer.js"
import { migrate } from "../../src/store/migrations.js"
import { type AccountState, emptyAccount } from "../../src/store/projections/accounts.js"
import { SendUnavailable, type TxRequest, type TxSenderShape } from "../../src/txsender/TxSender.js"
import { testDatabases } from "../support/database.js"

let counter = 0
const newId = (): Hex => keccak256(numberToHex(++counter))
const newOwner = (): Address => getAddress(numberToHex(0xbeef0000 + ++counter, { size: 20 }))
const VAULT = getAddress(numberToHex(0x7a017, { size: 20 }))
const ATTESTOR = getAddress(numberToHex(0xa77e5, { size: 20 }))

const withMigrations = (database: ReturnType<typeof testDatabases>[number]) =>
  Layer.effectDiscard(migrate).pipe(Layer.provideMerge(database.layer))

const counted = (metric: typeof bindProposals, key: string, value: string) =>
  Effect.map(Metric.value(Metric.tagged(metric, key, value)), (s) => s.count)

for (const database of testDatabases()) {
  describe(`veto watcher on ${database.name}`, () => {
    layer(withMigrations(database), { timeout: 60_000 })((it) => {
      it.effect("the proposal record: verdicts, a veto claimed once, released when nothing was sent", () =>
        Effect.gen(function* () {
          const store = yield* makeProposalStore
          const id = newId()
          expect(yield* store.get(id, 0n)).toEqual(Option.none())
          yield* store.setVerdict(id, 0n, "attested", 1)
          expect(yield* store.get(id, 0n)).toEqual(Option.some({ verdict: "attested", veto: "none" }))
          yield* store.setVerdict(id, 0n, "unattested", 2)
          expect(yield* store.claimVeto(id, 0n, 3)).toBe(true)
          expect(yield* store.claimVeto(id, 0n, 3)).toBe(false)
          yield* store.endVeto(id, 0n, "none", undefined, 4)
          expect(yield* store.claimVeto(id, 0n, 5)).toBe(true)
          const hash: Hex = `0x${"ab".repeat(32)}`
          yield* store.endVeto(id, 0n, "sent", hash, 6)
          const sent = Option.some({ verdict: "unattested", veto: "sent", txHash: hash })
          expect(yield* store.get(id, 0n)).toEqual(sent)
          expect(yield* store.claimVeto(id, 0n, 7)).toBe(false)
          // Another bind nonce of the same id is another proposal.
          expect(yield* store.get(id, 1n)).toEqual(Option.none())
          expect(yield* store.get(id.toUpperCase().replace("0X", "0x") as Hex, 0n)).toEqual(sent)
          // Reopened only by the hash it was sent with.
          yield* store.reopenVeto(id, 0n, `0x${"cd".repeat(32)}`, 8)
          expect(yield* store.get(id, 0n)).toEqual(sent)
          yield* store.reopenVeto(id, 0n, hash, 8)
          expect(yield* store.get(id, 0n)).toEqual(Option.some({ verdict: "unattested", veto: "none" }))
          // A claim left by a process that stopped is taken again once stale, not before.
          expect(yield* store.claimVeto(id, 0n, 10)).toBe(true)
          expect(yield* store.claimVeto(id, 0n, 10 + STALE_CLAIM_SECONDS)).toBe(false)
          expect(yield* store.claimVeto(id, 0n, 11 + STALE_CLAIM_SECONDS)).toBe(true)
        })
      )

      it.effect(
        "passes: one veto per unattested proposal, contests, simulation reverts, refusals, restarts",
        () =>
          Effect.gen(function* () {
            const accounts = new Map<Hex, AccountState>()
            const known = new Set<string>()
            const reverting = new Set<string>()
            const submitted: Array<TxRequest> = []
            /** What the sender's store says of each veto sent, by hash: pending unless set. */
            const outcomes = new Map<Hex, "success" | "reverted" | "unknown">()
            let refuse: SendUnavailable["reason"] | undefined
            let chainDown = false

            /** Block timestamps by number; a proposal is mined in block 50 (at 1,000) unless said. */
            const blockTimes = new Map<number, number>([[50, 1_000]])
            const propose = (id: Hex, owner: Address, consumed: bigint, block = 50) =>
              accounts.set(id, {
                ...emptyAccount(id),
                pendingOwner: owner,
                pendingReadyAt: 1n,
                pendingBlock: block,
                bindNonce: consumed + 1n
              })
            const idOf = (data: Hex) => `0x${data.slice(10, 74)}`

            // Not enabled: the watcher forks no fiber, the test runs its passes.
            const indexer = Layer.succeed(Indexer, {
              enabled: false,
              status: Effect.die("unused"),
              read: (f) =>
                Effect.sync(() =>
                  f({
                    chainId: 31337,
                    vault: VAULT,
                    block: 100,
                    hash: `0x${"11".repeat(32)}`,
                    version: 1,
                    accounts,
                    projection: undefined as never
                  } satisfies AccountsSnapshot)
                )
            })
            const hints = Layer.succeed(HintIndex, {
              status: Effect.die("unused"),
              escrowsOf: () => Effect.die("unused"),
              read: (f) =>
                Effect.sync(() =>
                  f({
                    block: 100,
                    projection: {
                      escrow: (id: Hex) => (known.has(id.toLowerCase()) ? ({} as never) : undefined)
                    }
                  } as unknown as HintSnapshot)
                )
            })
            const chain = mockChainClient({
              call: (request) =>
                chainDown
                  ? Effect.fail(
                      new ChainUnavailable({
                        operation: "eth_call",
                        reason: "down",
                        attempts: 1,
                        cause: null
                      })
                    )
                  : reverting.has(idOf(request.data))
                    ? Effect.fail(
                        new ChainReverted({ operation: "eth_call", data: "0x", description: "NoPendingBind" })
                      )
                    : Effect.succeed("0x"),
              estimateGas: () => Effect.succeed(50_000n),
              getBlock: (request) =>
                chainDown
                  ? Effect.fail(
                      new ChainUnavailable({
                        operation: "eth_getBlockByNumber",
                        reason: "down",
                        attempts: 1,
                        cause: null
                      })
                    )
                  : Effect.succeed({
                      number: request?.blockNumber ?? 0n,
                      hash: `0x${"22".repeat(32)}`,
                      parentHash: `0x${"33".repeat(32)}`,
                      timestamp: BigInt(blockTimes.get(Number(request?.blockNumber)) ?? 0)
                    })
            })
            const sql = yield* SqlClient
            // As the sender does: the request's own write goes in the statement that stores it;
            // with `store_unsure`, nothing was stored.
            const sender: TxSenderShape = {
              address: ATTESTOR,
              submit: (request) =>
                refuse !== undefined
                  ? Effect.fail(new SendUnavailable({ reason: refuse }))
                  : Effect.gen(function* () {
                      submitted.push(request)
                      const hash = `0x${String(submitted.length).padStart(64, "0")}` as Hex
                      if (request.storedWith !== undefined)
                        yield* Effect.orDie(sql`${request.storedWith(hash)}`)
                      return hash
                    }),
              status: (hash) =>
                Effect.succeed({ txHash: hash as never, status: outcomes.get(hash) ?? "pending" })
            }

            const attestations = yield* makeAttestationStore
            const proposals = yield* makeProposalStore
            const services = Layer.mergeAll(
              indexer,
              hints,
              chain,
              Layer.succeed(AttestationStore, attestations)
            )
            const watcher = (autoVeto: boolean, vetoUnknownIds = false) =>
              makeVetoWatcher(
                {
                  vault: VAULT,
                  autoVeto,
                  vetoUnknownIds,
                  vetoRule: "strict",
                  vetoStaggerSeconds: 0,
                  self: ATTESTOR,
                  pollIntervalMs: 3_600_000
                },
                proposals,
                autoVeto ? Option.some(sender) : Option.none()
              ).pipe(Effect.provide(services), Effect.scoped)

            // Three proposals: attested, unattested (a forged signature), unknown id.
            const attested = { id: newId(), newOwner: newOwner(), bindNonce: 0n }
            const forged = { id: newId(), newOwner: newOwner(), bindNonce: 2n }
            const unknown = { id: newId(), newOwner: newOwner(), bindNonce: 0n }
            for (const p of [attested, forged]) known.add(p.id.toLowerCase())
            for (const p of [attested, forged, unknown]) propose(p.id, p.newOwner, p.bindNonce)
            yield* attestations.record([{ ...attested, deadline: 9n, visibility: "private" }], 1)
            // An attestation for the forged proposal's owner at another bind nonce does not cover it.
            yield* attestations.record([{ ...forged, bindNonce: 1n, deadline: 9n, visibility: "private" }], 1)

            const before = {
              attested: yield* counted(bindProposals, "verdict", "attested"),
              unattested: yield* counted(bindProposals, "verdict", "unattested"),
              unknown: yield* counted(bindProposals, "verdict", "unknown_id"),
              sent: yield* counted(vetoes, "outcome", "sent"),
              skipped: yield* counted(vetoes, "outcome", "skipped"),
              failed: yield* counted(vetoes, "outcome", "failed")
            }

            const on = yield* watcher(true)
            expect(yield* on.pass).toBe(100)
            expect(submitted).toHaveLength(1)
            expect(submitted[0]).toMatchObject({ to: VAULT, gas: 60_000n })
            expect(idOf(submitted[0]!.data)).toBe(forged.id.toLowerCase())
            expect(yield* proposals.get(forged.id, 2n)).toEqual(
              Option.some({ verdict: "unattested", veto: "sent", txHash: `0x${"1".padStart(64, "0")}` })
            )
            expect(yield* proposals.get(attested.id, 0n)).toEqual(
              Option.some({ verdict: "attested", veto: "none" })
            )
            expect(yield* proposals.get(unknown.id, 0n)).toEqual(
              Option.some({ verdict: "unknown_id", veto: "none" })
            )

            // The next pass sends and counts nothing more.
            yield* on.pass
            expect(submitted).toHaveLength(1)
            expect(yield* counted(bindProposals, "verdict", "unattested")).toBe(before.unattested + 1)
            expect(yield* counted(bindProposals, "verdict", "attested")).toBe(before.attested + 1)
            expect(yield* counted(bindProposals, "verdict", "unknown_id")).toBe(before.unknown + 1)
            expect(yield* counted(vetoes, "outcome", "sent")).toBe(before.sent + 1)

            // A contest rules the attested owner out: the proposal is vetoed next pass, even with
            // an unrevoked attestation of it recorded after the contest (as a replica that did
            // not check contests would have).
            expect(
              yield* attestations.contest(
                [{ id: attested.id, pendingOwner: attested.newOwner }],
                newOwner(),
                2
              )
            ).toBe(1)
            yield* sql`
              INSERT INTO attestor_attestations
                (beneficiary_id, new_owner, bind_nonce, deadline, visibility, revoked, issued_at)
              VALUES (${attested.id.toLowerCase()}, ${attested.newOwner.toLowerCase()}, '0', '10',
                'private', false, 3)`
            yield* on.pass
            expect(submitted).toHaveLength(2)
            expect(idOf(submitted[1]!.data)).toBe(attested.id.toLowerCase())

            // A restarted watcher (fresh memory, same database) sends nothing again.
            yield* (yield* watcher(true)).pass
            expect(submitted).toHaveLength(2)

            // VETO_UNKNOWN_IDS judges the unknown id: unattested, vetoed.
            yield* (yield* watcher(true, true)).pass
            expect(submitted).toHaveLength(3)
            expect(idOf(submitted[2]!.data)).toBe(unknown.id.toLowerCase())

            // A proposal the chain does not have pending (a node behind the indexer, or a reorg
            // that took it out): the simulation reverts and nothing is sent, counted once, tried
            // again on each pass while the index has it pending.
            const stale = { id: newId(), newOwner: newOwner(), bindNonce: 0n }
            known.add(stale.id.toLowerCase())
            reverting.add(stale.id.toLowerCase())
            propose(stale.id, stale.newOwner, 0n)
            yield* on.pass
            yield* on.pass
            expect(submitted).toHaveLength(3)
            expect(yield* proposals.get(stale.id, 0n)).toEqual(
              Option.some({ verdict: "unattested", veto: "none" })
            )
            expect(yield* counted(vetoes, "outcome", "skipped")).toBe(before.skipped + 1)
            // The chain has it pending again: vetoed.
            reverting.delete(stale.id.toLowerCase())
            yield* on.pass
            expect(submitted).toHaveLength(4)
            expect(idOf(submitted[3]!.data)).toBe(stale.id.toLowerCase())

            // A sent veto that reverted (a reorg put the proposal back after it) while the index
            // has the proposal pending: sent again, once. One that succeeded is left alone.
            const [staleVeto] = Option.toArray(yield* proposals.get(stale.id, 0n))
            expect(staleVeto?.veto).toBe("sent")
            outcomes.set(staleVeto?.txHash as Hex, "success")
            yield* on.pass
            expect(submitted).toHaveLength(4)
            outcomes.set(staleVeto?.txHash as Hex, "reverted")
            yield* on.pass
            expect(submitted).toHaveLength(5)
            expect(idOf(submitted[4]!.data)).toBe(stale.id.toLowerCase())
            yield* on.pass
            expect(submitted).toHaveLength(5)

            // The chain not answering, or the sender refusing: nothing sent, tried again next pass.
            const retried = { id: newId(), newOwner: newOwner(), bindNonce: 4n }
            known.add(retried.id.toLowerCase())
            propose(retried.id, retried.newOwner, 4n)
            chainDown = true
            yield* on.pass
            chainDown = false
            refuse = "chain"
            yield* on.pass
            expect(submitted).toHaveLength(5)
            expect(yield* proposals.get(retried.id, 4n)).toEqual(
              Option.some({ verdict: "unattested", veto: "none" })
            )
            expect(yield* counted(vetoes, "outcome", "failed")).toBe(before.failed + 1)
            refuse = undefined
            yield* on.pass
            expect(submitted).toHaveLength(6)

            // A sender unsure whether it stored the veto: the claim is kept, nothing sent again
            // (a stored veto would have made the row `sent`), until the claim is stale.
            const unsure = { id: newId(), newOwner: newOwner(), bindNonce: 0n }
            known.add(unsure.id.toLowerCase())
            propose(unsure.id, unsure.newOwner, 0n)
            refuse = "store_unsure"
            yield* on.pass
            refuse = undefined
            yield* on.pass
            expect(submitted).toHaveLength(6)
            expect(yield* proposals.get(unsure.id, 0n)).toEqual(
              Option.some({ verdict: "unattested", veto: "sending" })
            )

            // AUTO_VETO off: an unattested proposal is counted, nothing is sent.
            const quiet = { id: newId(), newOwner: newOwner(), bindNonce: 0n }
            known.add(quiet.id.toLowerCase())
            propose(quiet.id, quiet.newOwner, 0n)
            const off = yield* watcher(false)
            const unattestedBefore = yield* counted(bindProposals, "verdict", "unattested")
            yield* off.pass
            yield* off.pass
            expect(submitted).toHaveLength(6)
            expect(yield* counted(bindProposals, "verdict", "unattested")).toBe(unattestedBefore + 1)
            expect(yield* proposals.get(quiet.id, 0n)).toEqual(
              Option.some({ verdict: "unattested", veto: "none" })
            )

            // An attestation recorded after the proposal was mined, as a replica whose index did
            // not show the pending bind would sign one (for a session made after a contest it could
            // not tie to the pending owner), is not the signature the proposal carries: vetoed.
            // One issued in the block's second, or as many seconds after as the clocks may drift
            // apart, may be: attested.
            blockTimes.set(60, 2_000)
            const late = { id: newId(), newOwner: newOwner(), bindNonce: 0n }
            const onTime = { id: newId(), newOwner: newOwner(), bindNonce: 0n }
            for (const p of [late, onTime]) {
              known.add(p.id.toLowerCase())
              propose(p.id, p.newOwner, 0n, 60)
            }
            yield* attestations.record(
              [{ ...late, deadline: 9n, visibility: "private" }],
              2_000 + ISSUED_AT_TOLERANCE_SECONDS + 1
            )
            yield* attestations.record(
              [{ ...onTime, deadline: 9n, visibility: "private" }],
              2_000 + ISSUED_AT_TOLERANCE_SECONDS
            )
            yield* on.pass
            // The quiet proposal above (AUTO_VETO on now) and the late one.
            expect(submitted.slice(6).map((r) => idOf(r.data))).toEqual(
              [quiet.id, late.id].map((id) => id.toLowerCase())
            )
            expect((yield* proposals.get(late.id, 0n)).pipe(Option.map((h) => h.verdict))).toEqual(
              Option.some("unattested")
            )
            expect(yield* proposals.get(onTime.id, 0n)).toEqual(
              Option.some({ verdict: "attested", veto: "none" })
            )
          })
      )
    })
  })
}
