/**
 * Running the relayer in-process for the indexer tests, the way `layers/relayer.ts` wires it, with
 * settings given as an environment map; checking what it serves against the vault's own views; and
 * databases that two relayers can share.
 */
import { mkdtempSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import type { SqlClient } from "@effect/sql/SqlClient"
import { ConfigProvider, Effect, Layer, Logger, LogLevel, ManagedRuntime, Schema } from "effect"
import { type Address, type Hex, parseEventLogs } from "viem"
import { expect } from "vitest"
import { feeVaultAbi } from "../../../contracts/abi.js"
import { Relayer } from "../../../layers/relayer.js"
import { AccountsResponse } from "../../../schema/relayer.js"
import { RelayerSettings } from "../../../src/config/relayer.js"
import { serverUrl } from "../../../src/http/server.js"
import { rebuildProjection } from "../../../src/indexer/AccountsFollower.js"
import { Indexer, type IndexerStatus } from "../../../src/indexer/Indexer.js"
import { EventStore } from "../../../src/store/EventStore.js"
import { type AccountState, accountRecord } from "../../../src/store/projections/accounts.js"
import { freshPostgresSchema } from "../../support/postgresSchema.js"
import type { Ctx } from "./vault.js"

/** Where a relayer keeps its data: an embedded database (a directory or memory) or a PostgreSQL schema. */
export type Storage =
  | { readonly kind: "pglite"; readonly dataDir: string }
  | { readonly kind: "postgresql"; readonly url: string }

export const storageEnv = (storage: Storage): Record<string, string> =>
  storage.kind === "pglite" ? { DATA_DIR: storage.dataDir } : { DATABASE_URL: storage.url }

/** A PostgreSQL schema of its own (several relayers may share it); `drop` removes it. */
export async function postgresSchema(
  databaseUrl: string
): Promise<{ storage: Storage; drop: () => Promise<void> }> {
  const { url, drop } = await freshPostgresSchema(databaseUrl, "idx")
  return { storage: { kind: "postgresql", url }, drop }
}

export const freshDataDir = (): string => mkdtempSync(join(tmpdir(), "indexer-test-"))

/** Each database the suite runs on: embedded always, PostgreSQL too when DATABASE_URL is set. */
export const databaseKinds = (): ReadonlyArray<"pglite" | "postgresql"> =>
  process.env.DATABASE_URL ? ["pglite", "postgresql"] : ["pglite"]

export async function makeStorage(
  kind: "pglite" | "postgresql",
  options: { readonly onDisk?: boolean } = {}
): Promise<{ storage: Storage; drop: () => Promise<void> }> {
  if (kind === "postgresql") return postgresSchema(process.env.DATABASE_URL as string)
  return {
    storage: { kind: "pglite", dataDir: options.onDisk === true ? freshDataDir() : "memory://" },
    drop: async () => {}
  }
}

export const relayerEnv = (
  ctx: Ctx,
  storage: Storage,
  extra: Record<string, string> = {}
): Record<string, string> => ({
  RPC_URL: ctx.anvil.rpcUrl,
  FEE_VAULT: ctx.vault,
  SETTLEMENT_ASSET: ctx.usdt,
  SHIELD_ADAPTER: ctx.adapter,
  INDEXER_START_BLOCK: String(ctx.deployment.startBlock),
  INDEXER_POLL_INTERVAL_MS: "100",
  HOST: "127.0.0.1",
  PORT: "0",
  METRICS_TOKEN: "metrics-token",
  // Anvil's well-known key of mnemonic account #1, the devnet relayer.
  RELAYER_PRIVATE_KEY: "0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d",
  ...storageEnv(storage),
  ...extra
})

export interface RunningRelayer {
  readonly url: string
  readonly status: () => Promise<IndexerStatus>
  /** Block and hash the served projection covers. */
  readonly coverage: () => Promise<{ readonly block: number; readonly hash: Hex } | undefined>
  /** Runs `effect` against the relayer's own database. */
  readonly withDatabase: <A, E>(effect: Effect.Effect<A, E, SqlClient>) => Promise<A>
  readonly stop: () => Promise<void>
}

/** Starts the relayer in this process with `env` as its whole environment. */
export async function startRelayer(env: Record<string, string>): Promise<RunningRelayer> {
  const settings = RelayerSettings.layer.pipe(
    Layer.provide(Layer.setConfigProvider(ConfigProvider.fromMap(new Map(Object.entries(env)))))
  )
  const runtime = ManagedRuntime.make(
    Relayer.server.pipe(
      Layer.provideMerge(Relayer.services),
      Layer.provideMerge(settings),
      Layer.provide(
        Logger.minimumLogLevel(
          process.env.TEST_LOG === "debug"
            ? LogLevel.Debug
            : process.env.TEST_LOG === "warn"
              ? LogLevel.Warning
              : LogLevel.Error
        )
      )
    )
  )
  const url = await runtime.runPromise(serverUrl)
  return {
    url,
    status: () => runtime.runPromise(Effect.flatMap(Indexer, (i) => i.status)),
    coverage: () =>
      runtime.runPromise(
        Effect.flatMap(Indexer, (i) =>
          i.read((s) => (s === undefined ? undefined : { block: s.block, hash: s.hash }))
        )
      ),
    withDatabase: (effect) => runtime.runPromise(effect),
    stop: () => runtime.dispose()
  }
}

/** Polls until `check` holds, or fails with the last value seen. */
export async function eventually<A>(
  what: string,
  probe: () => Promise<A>,
  check: (a: A) => boolean,
  timeoutMs = 30_000
): Promise<A> {
  const deadline = Date.now() + timeoutMs
  let last: A | undefined
  while (Date.now() < deadline) {
    last = await probe()
    if (check(last)) return last
    await new Promise((r) => setTimeout(r, 50))
  }
  const shown = JSON.stringify(last, (_, v) => (typeof v === "bigint" ? v.toString() : v))
  throw new Error(`timed out waiting for ${what}; last: ${shown}`)
}

export const latestBlock = async (ctx: Ctx) => ctx.publicClient.getBlock()

const decodeAccounts = Schema.decodeUnknown(AccountsResponse)
export type Accounts = typeof AccountsResponse.Type

export async function getAccounts(base: string): Promise<Accounts> {
  const res = await fetch(`${base}/v1/accounts`)
  expect(res.status).toBe(200)
  return Effect.runPromise(decodeAccounts(await res.json()))
}

/** Every field of every account served equals the vault's views at the served block. */
export async function expectMatchesChain(ctx: Ctx, served: typeof AccountsResponse.Type): Promise<void> {
  const blockNumber = BigInt(served.block)
  const registeredLogs = await ctx.publicClient.getLogs({
    address: ctx.vault,
    fromBlock: BigInt(ctx.deployment.startBlock),
    toBlock: blockNumber
  })
  const registered = parseEventLogs({ abi: feeVaultAbi, logs: registeredLogs, eventName: "Registered" }).map(
    (l) => l.args.id
  )
  expect(served.chainId).toBe(ctx.chainId)
  expect(served.vault).toBe(ctx.vault)
  expect(served.accounts.map((a) => a.id)).toEqual([...registered].sort())
  const contract = { address: ctx.vault, abi: feeVaultAbi, blockNumber } as const
  const amounts = (functionName: "balanceOf" | "totalDeposited", id: Hex, asset: Address) =>
    ctx.publicClient.readContract({ ...contract, functionName, args: [id, asset] })
  const assets = [ctx.usdt, ctx.weth, ctx.usdc]
  for (const a of served.accounts) {
    const [kind, owner, fallbackRecipient, fallbackDelay, lastActivity, pendingOwner, pendingReadyAt] =
      await ctx.publicClient.readContract({ ...contract, functionName: "accountOf", args: [a.id] })
    const zero = "0x0000000000000000000000000000000000000000"
    const expected = {
      id: a.id,
      kind,
      owner,
      fallbackRecipient: fallbackRecipient === zero ? null : fallbackRecipient,
      fallbackDelay: fallbackRecipient === zero ? null : fallbackDelay,
      pendingOwner: pendingOwner === zero ? null : pendingOwner,
      pendingReadyAt: pendingOwner === zero ? null : pendingReadyAt,
      balances: {} as Record<string, bigint>,
      totalDeposited: {} as Record<string, bigint>,
      lastActivityBlock: a.lastActivityBlock,
      shieldTemplates: Number(
        await ctx.publicClient.readContract({
          ...contract,
          functionName: "shieldTemplateCount",
          args: [a.id]
        })
      ),
      nonce: await ctx.publicClient.readContract({ ...contract, functionName: "nonces", args: [a.id] }),
      bindNonce: await ctx.publicClient.readContract({
        ...contract,
        functionName: "bindNonces",
        args: [a.id]
      })
    }
    for (const asset of assets) {
      const balance = await amounts("balanceOf", a.id, asset)
      const total = await amounts("totalDeposited", a.id, asset)
      if (balance > 0n) expected.balances[asset] = balance
      if (total > 0n) expected.totalDeposited[asset] = total
    }
    expect(a).toEqual(expected)
    // The block named as the last owner activity is the one whose time the vault recorded.
    const activity = await ctx.publicClient.getBlock({ blockNumber: BigInt(a.lastActivityBlock) })
    expect(activity.timestamp).toBe(lastActivity)
  }
}

export interface Rebuilt {
  readonly block: number | undefined
  readonly accounts: ReadonlyArray<AccountState>
}

/** A projection rebuilt from scratch from what the store holds (a fresh follower), registered accounts by id. */
export const rebuild = (ctx: Ctx, confirmationDepth = 64) =>
  Effect.gen(function* () {
    const follower = yield* rebuildProjection(yield* EventStore, {
      ref: { chainId: ctx.chainId, vault: ctx.vault },
      startBlock: ctx.deployment.startBlock,
      settlementAsset: ctx.usdt,
      confirmationDepth
    })
    const accounts = [...follower.projection.accounts.values()]
      .filter((a) => a.registration !== undefined)
      .sort((a, b) => (a.id < b.id ? -1 : 1))
    return { block: follower.coverage?.block, accounts } satisfies Rebuilt
  }).pipe(Effect.provide(EventStore.layer))

/** Waits until the relayer's projection covers exactly the chain's current head (number and hash). */
export async function coversHead(
  ctx: Ctx,
  relayer: RunningRelayer,
  timeoutMs = 30_000,
  options: {
    /**
     * Behind an RPC that fails calls on purpose: an index whose last step failed serves only once
     * the chain answers a head probe (src/indexer/freshness.ts), and that probe can fail as well,
     * so a 503 `unavailable` is asked again until the next step or probe succeeds.
     */
    readonly faultyRpc?: boolean
  } = {}
) {
  await eventually(
    "the projection to cover the head",
    async () => ({ head: await latestBlock(ctx), covered: await relayer.coverage() }),
    ({ head, covered }) => covered?.block === Number(head.number) && covered.hash === head.hash,
    timeoutMs
  )
  if (options.faultyRpc !== true) return getAccounts(relayer.url)
  const answered = await eventually(
    "/v1/accounts to answer",
    async () => {
      const res = await fetch(`${relayer.url}/v1/accounts`)
      return { status: res.status, body: await res.json() }
    },
    ({ status }) => status !== 503,
    timeoutMs
  )
  expect(answered.status).toBe(200)
  return Effect.runPromise(decodeAccounts(answered.body))
}

/** (block hash, log index) of every canonical vault event the store holds up to `toBlock`. */
export const storedLogKeys = (ctx: Ctx, toBlock: number) =>
  Effect.gen(function* () {
    const store = yield* EventStore
    const keys: string[] = []
    yield* store.canonicalEvents(
      { chainId: ctx.chainId, vault: ctx.vault },
      ctx.deployment.startBlock,
      toBlock,
      (page) =>
        Effect.sync(() => keys.push(...page.map((e) => `${e.blockNumber}:${e.blockHash}:${e.logIndex}`)))
    )
    return keys
  }).pipe(Effect.provide(EventStore.layer))

/** The same keys as the chain has them. */
export async function chainLogKeys(ctx: Ctx, toBlock: number): Promise<string[]> {
  const logs = await ctx.publicClient.getLogs({
    address: ctx.vault,
    fromBlock: BigInt(ctx.deployment.startBlock),
    toBlock: BigInt(toBlock)
  })
  return logs.map((l) => `${l.blockNumber}:${l.blockHash}:${l.logIndex}`)
}

/** Everything the relayer serves and stores agrees with the chain and with a rebuild. */
export async function expectConsistent(ctx: Ctx, relayer: RunningRelayer, served: Accounts): Promise<void> {
  await expectMatchesChain(ctx, served)
  expect(await relayer.withDatabase(storedLogKeys(ctx, served.block))).toEqual(
    await chainLogKeys(ctx, served.block)
  )
  const rebuilt = await relayer.withDatabase(rebuild(ctx))
  expect(rebuilt.block).toBe(served.block)
  expect(rebuilt.accounts.map(accountRecord)).toEqual(served.accounts)
}
