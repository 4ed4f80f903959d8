/**
 * The reusable pieces of the claim pipeline on their own: the deny-list file, the canonical shield
 * payload check, ECDSA recovery as the vault does it, multicall building, and the account read.
 */
import { mkdtempSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Either, Layer, Option } from "effect"
import { decodeFunctionData, encodeFunctionResult, type Hex, keccak256, toHex } from "viem"
import { feeVaultAbi } from "../../contracts/abi.js"
import { shieldPayload } from "../../schema/ids.js"
import { mockChainClient } from "../../src/chain/MockChainClient.js"
import { AccountReader } from "../../src/relayer/AccountReader.js"
import { batchCalls, claimCall, registerCall } from "../../src/relayer/multicall.js"
import { isCanonicalShieldPayload } from "../../src/relayer/validation/claimRules.js"
import { loadDenyList, parseDenyList } from "../../src/relayer/validation/DenyList.js"
import { recoverEcdsa } from "../../src/relayer/validation/VaultSignatures.js"
import {
  claimRequest,
  DENIED,
  E18,
  ID,
  OWNER,
  owner,
  registration,
  settingsLayer,
  USDT,
  WALLET_ID,
  WETH
} from "./claimSupport.js"

describe("deny list file", () => {
  it("reads one address a line in any case, with blank lines and comments", () => {
    const text = `# sanctioned\n${DENIED.toLowerCase()}\n\n  ${WETH.toUpperCase().replace("0X", "0x")}  # trailing comment\r\n${USDT}\n`
    expect(parseDenyList(text)).toEqual(Either.right([DENIED, WETH, USDT]))
  })

  it("refuses a line that is not an address, naming its line, and a wrong checksum", () => {
    expect(parseDenyList(`${DENIED}\nnot-an-address\n`)).toEqual(Either.left("line 2 is not an address"))
    // Mixed case is a checksum, and this one is wrong.
    expect(Either.isLeft(parseDenyList("0x000000000000000000000000000000000000DeaD\n"))).toBe(true)
  })

  it.effect("a missing or bad file stops the start with a DENY_LIST config error", () =>
    Effect.gen(function* () {
      const dir = mkdtempSync(join(tmpdir(), "deny-list-"))
      const bad = join(dir, "bad.txt")
      writeFileSync(bad, "0x1234\n")
      const missing = yield* Effect.flip(loadDenyList(join(dir, "missing.txt")))
      expect(String(missing)).toContain("DENY_LIST")
      const invalid = yield* Effect.flip(loadDenyList(bad))
      expect(String(invalid)).toContain("line 1")
    })
  )
})

describe("shield payload", () => {
  it("is canonical only for this account, the settlement asset, type 0, sub id 0 and 0 < value < 2^120", () => {
    const good = shieldPayload(ID, USDT, 5n * E18)
    expect(isCanonicalShieldPayload(good, ID, USDT)).toBe(true)
    expect(isCanonicalShieldPayload(good, WALLET_ID, USDT)).toBe(false)
    expect(isCanonicalShieldPayload(shieldPayload(ID, WETH, 1n), ID, USDT)).toBe(false)
    expect(isCanonicalShieldPayload(shieldPayload(ID, USDT, 0n), ID, USDT)).toBe(false)
    const word = (i: number, value: string) =>
      `${good.slice(0, 2 + 64 * i)}${value.padStart(64, "0")}${good.slice(2 + 64 * (i + 1))}` as Hex
    expect(isCanonicalShieldPayload(word(2, "1"), ID, USDT)).toBe(false)
    expect(isCanonicalShieldPayload(word(4, "1"), ID, USDT)).toBe(false)
    expect(isCanonicalShieldPayload(word(5, `1${"0".repeat(30)}`), ID, USDT)).toBe(false)
    // A dirty high part of the address word.
    expect(isCanonicalShieldPayload(word(3, `ff${USDT.slice(2).toLowerCase()}`), ID, USDT)).toBe(false)
    expect(isCanonicalShieldPayload(`${good}00`, ID, USDT)).toBe(false)
  })
})

describe("ECDSA recovery", () => {
  it.effect("recovers the signer of a 65-byte v 27/28 low-s signature, nothing otherwise", () =>
    Effect.gen(function* () {
      const digest = keccak256(toHex("digest"))
      const signature = yield* Effect.promise(() => owner.sign({ hash: digest }))
      expect(yield* recoverEcdsa(digest, signature)).toEqual(Option.some(OWNER))
      // v as 0/1 (accepted by some libraries, not by the vault).
      const v = Number.parseInt(signature.slice(130), 16) - 27
      expect(yield* recoverEcdsa(digest, `${signature.slice(0, 130)}0${v}` as Hex)).toEqual(Option.none())
      expect(yield* recoverEcdsa(digest, `${signature}00` as Hex)).toEqual(Option.none())
      expect(yield* recoverEcdsa(digest, `0x${"00".repeat(65)}` as Hex)).toEqual(Option.none())
    })
  )
})

describe("multicall", () => {
  it("sends one step unwrapped and several as multicall in order", async () => {
    const request = await claimRequest()
    const claim = claimCall(request.claim, request.adapterData, request.signature)
    expect(batchCalls([claim])).toBe(claim)
    const batched = decodeFunctionData({
      abi: feeVaultAbi,
      data: batchCalls([registerCall(registration()), claim])
    })
    expect(batched.functionName).toBe("multicall")
    expect(batched.args?.[0]).toEqual([registerCall(registration()), claim])
  })
})

describe("account reader", () => {
  const reader = (answer: (data: Hex) => Hex) =>
    AccountReader.layer.pipe(
      Layer.provide(mockChainClient({ call: (request) => Effect.succeed(answer(request.data)) })),
      Layer.provide(settingsLayer())
    )
  /** What the vault's multicall answers for `accountOf`, `nonces` and `balanceOf` calls. */
  const vault = (kind: number, nonce: bigint, balance: bigint) => (data: Hex) => {
    const { args } = decodeFunctionData({ abi: feeVaultAbi, data })
    const inner = (args?.[0] ?? []) as ReadonlyArray<Hex>
    const results = inner.map((call) => {
      const decoded = decodeFunctionData({ abi: feeVaultAbi, data: call })
      switch (decoded.functionName) {
        case "accountOf":
          return encodeFunctionResult({
            abi: feeVaultAbi,
            functionName: "accountOf",
            result: [kind, OWNER, DENIED, 5n, 0n, DENIED, 7n, 0n]
          })
        case "nonces":
          return encodeFunctionResult({ abi: feeVaultAbi, functionName: "nonces", result: nonce })
        default:
          return encodeFunctionResult({ abi: feeVaultAbi, functionName: "balanceOf", result: balance })
      }
    })
    return encodeFunctionResult({ abi: feeVaultAbi, functionName: "multicall", result: results })
  }

  it.effect("reads owner, nonce and balances in one vault multicall", () =>
    Effect.gen(function* () {
      const snapshot = yield* Effect.flatMap(AccountReader, (r) => r.read(ID, [USDT])).pipe(
        Effect.provide(reader(vault(1, 4n, 9n)))
      )
      expect(Option.getOrThrow(snapshot.account)).toEqual({
        kind: 1,
        owner: OWNER,
        fallbackRecipient: DENIED,
        fallbackDelay: 5n,
        pendingOwner: DENIED,
        pendingReadyAt: 7n
      })
      expect(snapshot.nonce).toBe(4n)
      expect(snapshot.balance(USDT)).toBe(9n)
      expect(snapshot.balance(WETH)).toBe(0n)
    })
  )

  it.effect("an unregistered id (kind 0) has no account", () =>
    Effect.gen(function* () {
      const snapshot = yield* Effect.flatMap(AccountReader, (r) => r.read(ID)).pipe(
        Effect.provide(reader(vault(0, 0n, 0n)))
      )
      expect(Option.isNone(snapshot.account)).toBe(true)
    })
  )

  it.effect("an answer that does not decode is unavailable, not a defect", () =>
    Effect.gen(function* () {
      const error = yield* Effect.flip(
        Effect.flatMap(AccountReader, (r) => r.read(ID)).pipe(Effect.provide(reader(() => "0x1234")))
      )
      expect(error._tag).toBe("Unavailable")
    })
  )
})
