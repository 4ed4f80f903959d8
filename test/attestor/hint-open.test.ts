/**
 * Opening hints (docs/protocol.md §6) without a chain: `openHint` on hints for this attestor, for
 * others, for another id, garbage and oversized ones; the strict plaintext rules case by case;
 * the `HintDecryptor` service and its metric; and the hint projection's fold, rewind and rebuild.
 */
import { randomBytes } from "node:crypto"
import { describe, expect, it } from "@effect/vitest"
import { decrypt, encrypt, PrivateKey } from "eciesjs"
import { Effect, Exit, Metric, Option } from "effect"
import { type Address, bytesToHex, getAddress, type Hex, keccak256, numberToHex } from "viem"
import { computeId, ZERO_ADDRESS } from "../../schema/ids.js"
import {
  HintDecryptor,
  hintsRejected,
  TEST_HINT_PRIVATE_KEY
} from "../../src/attestor/hints/HintDecryptor.js"
import {
  encodeBeneficiaryHint,
  type HintPlaintext,
  hintBeneficiaryId,
  hintJson,
  hintPublicKeyOf,
  MAX_ENVELOPE_BYTES,
  MAX_ENVELOPES,
  makeHint,
  openHint,
  parseHintPlaintext,
  sealBeneficiaryHint,
  sealHint
} from "../../src/attestor/hints/hintEnvelopes.js"
import {
  type EscrowHint,
  foldHints,
  HintProjection,
  type TokenLaunched
} from "../../src/store/projections/hints.js"

const KEY = TEST_HINT_PRIVATE_KEY
const PUBLIC = hintPublicKeyOf(KEY)
const OTHER_KEY = keccak256(numberToHex(0xabc))
const OTHER_PUBLIC = hintPublicKeyOf(OTHER_KEY)
const PEPPER = Uint8Array.from(randomBytes(32))
const RECIPIENT = getAddress(numberToHex(0xfa11, { size: 20 }))

const nonce = (n: number): Hex => keccak256(numberToHex(n))
const hintFor = (userId: string, n = 1, fallback?: { recipient: Address; delay: bigint }): HintPlaintext =>
  makeHint(PEPPER, 1, userId, nonce(n), fallback)
const sealRaw = (publicKey: Hex, text: string | Uint8Array): Hex =>
  bytesToHex(encrypt(publicKey, typeof text === "string" ? new TextEncoder().encode(text) : text))

describe("openHint", () => {
  it("opens a hint sealed to its key and recomputes commitment and id", () => {
    const hint = hintFor("1000001")
    const id = hintBeneficiaryId(hint)
    const opening = openHint(KEY, id, encodeBeneficiaryHint([sealHint(PUBLIC, hint)]))
    expect(opening.rejected).toEqual([])
    expect(opening.hint).toMatchObject({
      platformId: 1,
      userId: "1000001",
      nonce: hint.nonce,
      attestorSalt: hint.attestorSalt,
      fallback: undefined
    })
    expect(computeId(2, opening.hint?.handleCommitment as Hex, ZERO_ADDRESS, 0n)).toBe(id)
  })

  it("passes over a hint sealed only to another attestor, counting nothing", () => {
    const hint = hintFor("1000002")
    const opening = openHint(
      KEY,
      hintBeneficiaryId(hint),
      encodeBeneficiaryHint([sealHint(OTHER_PUBLIC, hint)])
    )
    expect(opening).toEqual({ hint: undefined, rejected: [] })
  })

  it("finds its envelope among others, wherever it is", () => {
    const hint = hintFor("1000003")
    const id = hintBeneficiaryId(hint)
    for (const envelopes of [
      [sealHint(OTHER_PUBLIC, hint), sealHint(PUBLIC, hint)],
      [sealHint(PUBLIC, hint), sealHint(OTHER_PUBLIC, hint)],
      [sealHint(PUBLIC, hint), sealHint(PUBLIC, hint)]
    ]) {
      const opening = openHint(KEY, id, encodeBeneficiaryHint(envelopes))
      expect(opening.hint?.userId).toBe("1000003")
      expect(opening.rejected).toEqual([])
    }
  })

  it("a committee: sealed to every member, each opens its own envelope and finds the same commitment and id, whatever its own pepper", () => {
    // Three members, each with its own hint key and pepper; the first issued the commitment.
    const members = [KEY, OTHER_KEY, keccak256(numberToHex(0xdef))].map((key) => ({
      key,
      pepper: Uint8Array.from(randomBytes(32))
    }))
    const issuer = members[0] as (typeof members)[0]
    const hint = makeHint(issuer.pepper, 4, "1005", nonce(7), { recipient: RECIPIENT, delay: 3_600n })
    const id = hintBeneficiaryId(hint)
    const sealed = sealBeneficiaryHint(
      members.map((m) => hintPublicKeyOf(m.key)),
      hint
    )
    const openings = members.map((m) => openHint(m.key, id, sealed))
    for (const opening of openings) {
      expect(opening.rejected).toEqual([])
      expect(opening.hint).toMatchObject({ platformId: 4, userId: "1005", attestorSalt: hint.attestorSalt })
      expect(opening.hint?.handleCommitment).toBe(openings[0]?.hint?.handleCommitment)
      expect(computeId(2, opening.hint?.handleCommitment as Hex, RECIPIENT, 3_600n)).toBe(id)
    }
    // The salt travels in the hint because each member's own pepper gives another one: a member
    // recomputing it from its own pepper would reject the escrow.
    for (const m of members.slice(1)) {
      const own = makeHint(m.pepper, 4, "1005", nonce(7), { recipient: RECIPIENT, delay: 3_600n })
      expect(own.attestorSalt).not.toBe(hint.attestorSalt)
      expect(hintBeneficiaryId(own)).not.toBe(id)
    }
  })

  it("rejects a hint that does not commit to the launch's id", () => {
    const hint = hintFor("1000004")
    const otherId = hintBeneficiaryId(hintFor("1000004", 2))
    expect(openHint(KEY, otherId, encodeBeneficiaryHint([sealHint(PUBLIC, hint)]))).toEqual({
      hint: undefined,
      rejected: ["mismatch"]
    })
  })

  it("includes the fallback in the id", () => {
    const fallback = { recipient: RECIPIENT, delay: 86_400n }
    const hint = hintFor("1000005", 1, fallback)
    const id = hintBeneficiaryId(hint)
    const opening = openHint(KEY, id, encodeBeneficiaryHint([sealHint(PUBLIC, hint)]))
    expect(opening.hint?.fallback).toEqual(fallback)
    expect(computeId(2, opening.hint?.handleCommitment as Hex, RECIPIENT, 86_400n)).toBe(id)
    // The same hint without its fallback commits to another id.
    const bare = hintFor("1000005")
    expect(openHint(KEY, id, encodeBeneficiaryHint([sealHint(PUBLIC, bare)])).rejected).toEqual(["mismatch"])
  })

  it("takes an empty hint as no hint at all", () => {
    expect(openHint(KEY, nonce(9), "0x")).toEqual({ hint: undefined, rejected: [] })
  })

  it("rejects what is not abi.encode(bytes[])", () => {
    for (const garbage of [
      "0xdeadbeef",
      `0x${"ff".repeat(64)}`,
      `0x${"00".repeat(31)}20${"00".repeat(31)}05`
    ] as Hex[])
      expect(openHint(KEY, nonce(9), garbage)).toEqual({ hint: undefined, rejected: ["encoding"] })
  })

  it("bounds the work: too many envelopes, an oversized envelope, an oversized hint", () => {
    const hint = hintFor("1000006")
    const id = hintBeneficiaryId(hint)
    const ours = sealHint(PUBLIC, hint)
    const many = Array.from({ length: MAX_ENVELOPES + 1 }, () => ours)
    expect(openHint(KEY, id, encodeBeneficiaryHint(many))).toEqual({
      hint: undefined,
      rejected: ["too_large"]
    })
    expect(openHint(KEY, id, encodeBeneficiaryHint(many.slice(1))).hint?.userId).toBe("1000006")
    // A length word claiming a huge array is refused before any decoding.
    const huge =
      `0x${numberToHex(32, { size: 32 }).slice(2)}${numberToHex(2n ** 200n, { size: 32 }).slice(2)}` as Hex
    expect(openHint(KEY, id, huge).rejected).toEqual(["too_large"])
    const big = bytesToHex(randomBytes(MAX_ENVELOPE_BYTES + 1))
    const opening = openHint(KEY, id, encodeBeneficiaryHint([big, ours]))
    expect(opening.hint?.userId).toBe("1000006")
    expect(opening.rejected).toEqual(["too_large"])
    const giant = encodeBeneficiaryHint(Array.from({ length: 4 }, () => bytesToHex(randomBytes(20_000))))
    expect(openHint(KEY, id, giant).rejected).toEqual(["too_large"])
  })

  it("passes over envelopes that are no envelopes at all", () => {
    const hint = hintFor("1000007")
    const envelopes: Hex[] = ["0x", "0x04", bytesToHex(randomBytes(200)), sealHint(PUBLIC, hint)]
    expect(openHint(KEY, hintBeneficiaryId(hint), encodeBeneficiaryHint(envelopes))).toMatchObject({
      hint: { userId: "1000007" },
      rejected: []
    })
  })

  it("decrypts exactly as eciesjs.decrypt does", () => {
    const secret = new PrivateKey()
    const key = bytesToHex(secret.secret)
    for (let i = 0; i < 5; i++) {
      const plaintext = new TextEncoder().encode(hintJson(hintFor(String(1000 + i), i)))
      const envelope = encrypt(secret.publicKey.toBytes(), plaintext)
      expect(decrypt(secret.secret, envelope)).toEqual(plaintext)
      const hint = parseHintPlaintext(plaintext) as HintPlaintext
      expect(
        openHint(key, hintBeneficiaryId(hint), encodeBeneficiaryHint([bytesToHex(envelope)])).hint?.userId
      ).toBe(String(1000 + i))
    }
  })
})

describe("sealBeneficiaryHint: hints are threshold 1", () => {
  const THIRD_KEY = keccak256(numberToHex(0xdef))
  const committee = [KEY, OTHER_KEY, THIRD_KEY]

  it("seals one envelope per recipient, and each recipient opens the hint alone with its own key", () => {
    const hint = hintFor("1000002", 7)
    const id = hintBeneficiaryId(hint)
    const beneficiaryHint = sealBeneficiaryHint(committee.map(hintPublicKeyOf), hint)
    for (const key of committee) {
      const opening = openHint(key, id, beneficiaryHint)
      expect(opening.rejected).toEqual([])
      expect(opening.hint).toMatchObject({
        userId: "1000002",
        nonce: hint.nonce,
        attestorSalt: hint.attestorSalt
      })
    }
    // A key outside the committee reads nothing.
    expect(openHint(keccak256(numberToHex(0x123)), id, beneficiaryHint).hint).toBeUndefined()
    // The explicit threshold 1 is the same.
    expect(
      openHint(OTHER_KEY, id, sealBeneficiaryHint([OTHER_PUBLIC], hint, { threshold: 1 })).hint
    ).toBeDefined()
  })

  it("refuses a threshold above 1 (and any other than 1) instead of sealing a threshold-1 hint", () => {
    const hint = hintFor("1000003")
    const keys = committee.map(hintPublicKeyOf)
    for (const threshold of [2, 3, 0, -1, 1.5, Number.NaN])
      expect(() => sealBeneficiaryHint(keys, hint, { threshold }), String(threshold)).toThrow(
        /^hints are threshold 1: each recipient opens its envelope alone; threshold .* is refused$/
      )
  })

  it("refuses no recipient, one key twice (compressed or not), and more recipients than an attestor tries", () => {
    const hint = hintFor("1000004")
    expect(() => sealBeneficiaryHint([], hint)).toThrow(RangeError)
    const uncompressed = bytesToHex(new PrivateKey(Buffer.from(KEY.slice(2), "hex")).publicKey.toBytes(false))
    expect(() => sealBeneficiaryHint([PUBLIC, OTHER_PUBLIC, uncompressed], hint)).toThrow(/listed twice/)
    const many = Array.from({ length: MAX_ENVELOPES + 1 }, (_, i) =>
      hintPublicKeyOf(keccak256(numberToHex(i + 1)))
    )
    expect(() => sealBeneficiaryHint(many, hint)).toThrow(new RegExp(`at most ${MAX_ENVELOPES} recipients`))
    expect(() => sealBeneficiaryHint(many.slice(0, MAX_ENVELOPES), hint)).not.toThrow()
  })
})

describe("hint plaintext", () => {
  const good = hintFor("1000010")
  const goodJson = JSON.parse(hintJson(good)) as Record<string, unknown>
  const parse = (value: unknown) => parseHintPlaintext(new TextEncoder().encode(JSON.stringify(value)))
  const id = hintBeneficiaryId(good)

  it("reads the protocol's form", () => {
    expect(parse(goodJson)).toEqual(good)
    const withFallback = hintFor("1000010", 1, { recipient: RECIPIENT, delay: 5n })
    expect(parse(JSON.parse(hintJson(withFallback)))).toEqual(withFallback)
  })

  it("refuses what is not UTF-8 JSON of an object", () => {
    for (const raw of ["{", "", "null", "[]", "1", '"x"', "\ufeff" + hintJson(good)])
      expect(parseHintPlaintext(new TextEncoder().encode(raw))).toBeUndefined()
    expect(parseHintPlaintext(Uint8Array.from([0x7b, 0xff, 0x7d]))).toBeUndefined()
  })

  it("refuses a missing field", () => {
    for (const field of ["platformId", "userId", "nonce", "attestorSalt"]) {
      const { [field]: _, ...rest } = goodJson
      expect(parse(rest)).toBeUndefined()
    }
  })

  it("refuses wrong types and values", () => {
    const cases: Array<Record<string, unknown>> = [
      { platformId: "1" },
      { platformId: 0 },
      { platformId: 6 },
      { platformId: 1.5 },
      { platformId: null },
      { userId: 1000010 },
      { nonce: good.nonce.slice(0, 64) },
      { nonce: `${good.nonce}00` },
      { nonce: good.nonce.slice(2) },
      { attestorSalt: "0xzz" + good.attestorSalt.slice(4) },
      { attestorSalt: 1 },
      { extra: true },
      { fallbackRecipient: "0x1234", fallbackDelay: "5" },
      { fallbackRecipient: RECIPIENT, fallbackDelay: 5 },
      { fallbackRecipient: RECIPIENT, fallbackDelay: "05" },
      { fallbackRecipient: RECIPIENT, fallbackDelay: "-5" },
      { fallbackRecipient: RECIPIENT.toLowerCase().replace("0x", "0X"), fallbackDelay: "5" }
    ]
    for (const change of cases)
      expect(parse({ ...goodJson, ...change }), JSON.stringify(change)).toBeUndefined()
  })

  it("refuses a non-canonical user id", () => {
    for (const userId of ["01", "-1", "1e3", " 1", "1 ", "", "0", "1.0", "１２", "9".repeat(33)])
      expect(parse({ ...goodJson, userId }), userId).toBeUndefined()
  })

  it("wants both fallback fields or neither, both set or both zero", () => {
    expect(parse({ ...goodJson, fallbackRecipient: RECIPIENT })).toBeUndefined()
    expect(parse({ ...goodJson, fallbackDelay: "5" })).toBeUndefined()
    expect(parse({ ...goodJson, fallbackRecipient: ZERO_ADDRESS, fallbackDelay: "5" })).toBeUndefined()
    expect(parse({ ...goodJson, fallbackRecipient: RECIPIENT, fallbackDelay: "0" })).toBeUndefined()
    // Zero and zero is the vault's "no fallback", the same as leaving both out.
    expect(parse({ ...goodJson, fallbackRecipient: ZERO_ADDRESS, fallbackDelay: "0" })).toEqual(good)
  })

  it("takes any hex case and returns it lowercase, the recipient checksummed", () => {
    const upper = {
      ...goodJson,
      nonce: `0x${good.nonce.slice(2).toUpperCase()}`,
      fallbackRecipient: RECIPIENT.toLowerCase(),
      fallbackDelay: "7"
    }
    expect(parse(upper)).toEqual({ ...good, fallbackRecipient: RECIPIENT, fallbackDelay: "7" })
  })

  it("rejects each malformed plaintext sealed to this attestor as plaintext, not as a failure", () => {
    const bad = [
      "{",
      JSON.stringify({ ...goodJson, userId: "01" }),
      JSON.stringify({ ...goodJson, fallbackDelay: "5" })
    ]
    const opening = openHint(KEY, id, encodeBeneficiaryHint(bad.map((text) => sealRaw(PUBLIC, text))))
    expect(opening).toEqual({ hint: undefined, rejected: ["plaintext", "plaintext", "plaintext"] })
  })
})

describe("HintDecryptor", () => {
  const reason = (r: string) =>
    Metric.value(Metric.tagged(hintsRejected, "reason", r)).pipe(Effect.map((s) => s.count))

  it.effect("opens with the test key and counts rejections by reason", () =>
    Effect.gen(function* () {
      const decryptor = yield* HintDecryptor
      expect(decryptor.publicKey).toBe(PUBLIC)
      const hint = hintFor("1000020")
      const id = hintBeneficiaryId(hint)
      const found = yield* decryptor.open(id, encodeBeneficiaryHint([sealHint(PUBLIC, hint)]))
      expect(Option.map(found, (h) => h.userId)).toEqual(Option.some("1000020"))
      const mismatch = yield* reason("mismatch")
      const encoding = yield* reason("encoding")
      expect(
        Option.isNone(yield* decryptor.open(nonce(1), encodeBeneficiaryHint([sealHint(PUBLIC, hint)])))
      ).toBe(true)
      expect(Option.isNone(yield* decryptor.open(id, "0x0102"))).toBe(true)
      expect(yield* reason("mismatch")).toBe(mismatch + 1)
      expect(yield* reason("encoding")).toBe(encoding + 1)
    }).pipe(Effect.provide(HintDecryptor.Test))
  )

  it.effect("refuses a key outside the curve's range", () =>
    Effect.gen(function* () {
      const exit = yield* Effect.exit(
        Effect.provide(HintDecryptor, HintDecryptor.fromKey(`0x${"00".repeat(32)}`))
      )
      expect(Exit.isFailure(exit)).toBe(true)
      if (Exit.isFailure(exit)) expect(String(exit.cause)).toContain("InvalidHintKey")
    })
  )
})

describe("the hint projection", () => {
  const TOKEN = (n: number) => getAddress(numberToHex(0x7000 + n, { size: 20 }))
  const opener = (launch: TokenLaunched): EscrowHint | undefined =>
    openHint(KEY, launch.beneficiaryId, launch.beneficiaryHint).hint
  let logIndex = 0
  const launch = (
    blockNumber: number,
    beneficiaryId: Hex,
    beneficiaryHint: Hex,
    token = TOKEN(logIndex)
  ): TokenLaunched => ({
    name: "TokenLaunched",
    blockNumber,
    blockHash: keccak256(numberToHex(blockNumber)),
    logIndex: logIndex++,
    txHash: keccak256(numberToHex(1_000_000 + logIndex)),
    token,
    beneficiaryId,
    beneficiaryHint
  })
  const sealed = (hint: HintPlaintext, publicKey = PUBLIC) =>
    encodeBeneficiaryHint([sealHint(publicKey, hint)])

  const a1 = hintFor("1000030", 1)
  const a2 = hintFor("1000030", 2)
  const b = hintFor("1000031", 1, { recipient: RECIPIENT, delay: 60n })
  const launches = [
    launch(10, hintBeneficiaryId(a1), sealed(a1)),
    launch(11, hintBeneficiaryId(b), sealed(b, OTHER_PUBLIC)),
    launch(11, nonce(5), "0xdeadbeef"),
    launch(12, hintBeneficiaryId(a1), sealed(a1)),
    launch(13, hintBeneficiaryId(b), sealed(b)),
    launch(14, hintBeneficiaryId(a2), sealed(a2))
  ]

  it("indexes escrows by platform user with every launch to each id", () => {
    const p = foldHints(opener, launches)
    const a = p.escrowsOf(1, "1000030")
    expect(a.map((e) => e.beneficiaryId)).toEqual([hintBeneficiaryId(a1), hintBeneficiaryId(a2)])
    expect(a[0]?.launches.map((l) => l.blockNumber)).toEqual([10, 12])
    // The launch at block 11 named b's id with a hint for someone else: it is b's all the same.
    const bs = p.escrowsOf(1, "1000031")
    expect(bs.map((e) => e.launches.map((l) => l.blockNumber))).toEqual([[11, 13]])
    expect(bs[0]?.hint.fallback).toEqual({ recipient: RECIPIENT, delay: 60n })
    expect(p.escrowsOf(1, "1000032")).toEqual([])
    expect(p.escrowsOf(2, "1000030")).toEqual([])
    expect(p.escrow(hintBeneficiaryId(b))?.launches).toHaveLength(2)
    expect(p.escrow(nonce(5))).toBeUndefined()
  })

  it("takes launches back on rewind and ends equal to the fold of what remains", () => {
    for (const block of [14, 13, 12, 11, 10, 9]) {
      const p = foldHints(opener, launches)
      p.rewind(block)
      const rebuilt = foldHints(
        opener,
        launches.filter((l) => l.blockNumber <= block)
      )
      expect(p.escrows()).toEqual(rebuilt.escrows())
      expect(p.launchCount).toBe(rebuilt.launchCount)
      for (const userId of ["1000030", "1000031"])
        expect(p.escrowsOf(1, userId)).toEqual(rebuilt.escrowsOf(1, userId))
    }
    const p = foldHints(opener, launches)
    p.rewind(12)
    // b is known again only once its own hint is applied again.
    expect(p.escrowsOf(1, "1000031")).toEqual([])
    for (const l of launches.filter((l) => l.blockNumber > 12)) p.apply(l, opener(l))
    expect(p.escrows()).toEqual(foldHints(opener, launches).escrows())
  })

  it("refuses launches out of chain order", () => {
    const p = new HintProjection()
    p.apply(launches[1]!, undefined)
    expect(() => p.apply(launches[0]!, undefined)).toThrow()
  })
})
