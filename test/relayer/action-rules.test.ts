/**
 * The stateless rules of the owner-action endpoints: the fee-only claim's form and the shield
 * templates, each refusal with its docs/protocol.md §7 code.
 */
import { Effect, Either } from "effect"
import { encodeAbiParameters, type Hex, keccak256, toHex } from "viem"
import { describe, expect, it } from "vitest"
import { errorCatalog } from "../../schema/errors.js"
import {
  EMPTY_DATA_HASH,
  MAX_NOTE_VALUE,
  shieldPayload,
  shieldRequestAbi,
  templatesHash
} from "../../schema/ids.js"
import { ZeroAddress as ZERO } from "../../schema/primitives.js"
import type { Claim } from "../../schema/relayer.js"
import { checkFeeClaim, checkTemplates } from "../../src/relayer/validation/actionRules.js"
import { E18, ID, RELAYER, SHIELD, USDT, WETH } from "./claimSupport.js"

const codeOf = <A>(effect: Effect.Effect<A, { readonly _tag: string }>) =>
  Either.match(Effect.runSync(Effect.either(effect)), {
    onLeft: (error) => errorCatalog[error._tag as keyof typeof errorCatalog].code as string,
    onRight: () => "ok"
  })

const feeClaim = (fields: Partial<Claim> = {}): Claim =>
  ({
    beneficiaryId: ID,
    asset: USDT,
    amount: 3n * E18,
    adapter: ZERO,
    dataHash: EMPTY_DATA_HASH,
    relayer: RELAYER,
    relayerFee: 3n * E18,
    nonce: 1n,
    deadline: 10_000n,
    ...fields
  }) as Claim

describe("checkFeeClaim", () => {
  const check = (fields: Partial<Claim>) =>
    codeOf(checkFeeClaim(feeClaim(fields), { id: ID, relayer: RELAYER }))

  it("accepts a fee-only claim naming this relayer and the account", () => {
    expect(check({})).toBe("ok")
  })

  it.each([
    ["another account", { beneficiaryId: keccak256(toHex("other")) }, "bad_request"],
    ["anyone may submit", { relayer: ZERO }, "relayer_mismatch"],
    ["another relayer", { relayer: SHIELD }, "relayer_mismatch"],
    ["the shield adapter", { adapter: SHIELD }, "adapter_not_allowed"],
    ["a zero fee", { amount: 0n, relayerFee: 0n }, "invalid_amount"],
    ["an amount above the fee", { amount: 4n * E18 }, "invalid_amount"],
    ["adapter data", { dataHash: keccak256("0x01") }, "data_hash_mismatch"]
  ] as const)("refuses %s", (_, fields, code) => {
    expect(check(fields as Partial<Claim>)).toBe(code)
  })
})

/** A shield payload with any field the canonical form fixes set otherwise. */
const payloadWith = (fields: { tokenType?: number; token?: Hex; subId?: bigint; value?: bigint }): Hex =>
  encodeAbiParameters(shieldRequestAbi, [
    ID,
    {
      preimage: {
        npk: keccak256(toHex("npk")),
        token: {
          tokenType: fields.tokenType ?? 0,
          tokenAddress: fields.token ?? USDT,
          tokenSubID: fields.subId ?? 0n
        },
        value: fields.value ?? E18
      },
      ciphertext: { encryptedBundle: [ZERO_WORD, ZERO_WORD, ZERO_WORD], shieldKey: ZERO_WORD }
    }
  ])
const ZERO_WORD: Hex = `0x${"00".repeat(32)}`

describe("checkTemplates", () => {
  const check = (templates: ReadonlyArray<Hex>) => codeOf(checkTemplates(templates, ID, USDT))
  const many = (n: number) => Array.from({ length: n }, (_, i) => shieldPayload(ID, USDT, BigInt(i + 1)))

  it("returns the hash the owner signs: keccak256 of the concatenated template hashes", () => {
    const templates = many(3)
    expect(Effect.runSync(checkTemplates(templates, ID, USDT))).toBe(templatesHash(templates))
  })

  it("takes 1 and 32 templates, and the largest note value", () => {
    expect(check(many(1))).toBe("ok")
    expect(check(many(32))).toBe("ok")
    expect(check([payloadWith({ value: MAX_NOTE_VALUE })])).toBe("ok")
  })

  it.each([
    ["no template", []],
    ["33 templates", many(33)],
    ["a short template", [many(1)[0]!.slice(0, -2) as Hex]],
    ["a long template", [`${many(1)[0]!}00` as Hex]],
    ["a repeated template", [...many(2), many(1)[0]!]],
    ["another account's id", [shieldPayload(keccak256(toHex("other")), USDT, E18)]],
    ["another token", [payloadWith({ token: WETH })]],
    ["token type 1", [payloadWith({ tokenType: 1 })]],
    ["a sub id", [payloadWith({ subId: 1n })]],
    ["a zero value", [payloadWith({ value: 0n })]]
  ] as const)("refuses %s with invalid_templates", (_, templates) => {
    expect(check(templates)).toBe("invalid_templates")
  })
})
