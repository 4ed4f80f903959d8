/**
 * A body kept as separately compressed pieces (src/http/piecewiseGzip.ts): the pieces make one
 * gzip member any gzip reader accepts, its CRC-32 and length checked, and inflate back to the
 * bytes, whatever the pieces' sizes and contents.
 */
import { randomBytes } from "node:crypto"
import { buffer } from "node:stream/consumers"
import { crc32, gunzipSync } from "node:zlib"
import { describe, expect, it } from "@effect/vitest"
import { crc32Combine, deflatePiece, gzipMember, inflatedPieces } from "../../src/http/piecewiseGzip.js"

/** Text that compresses (JSON-like, repetitive) and bytes that do not, in random lengths. */
const randomPieces = (count: number): Array<Buffer> =>
  Array.from({ length: count }, (_, i) => {
    const length = Math.floor(Math.random() * 70_000)
    return i % 3 === 0
      ? randomBytes(length)
      : Buffer.from(`{"id":"0x${randomBytes(32).toString("hex")}","n":${i}},`.repeat(Math.ceil(length / 90)))
  })

describe("CRC-32 combination", () => {
  it("equals the CRC-32 of the concatenation, for any lengths (empty included)", () => {
    for (let round = 0; round < 300; round++) {
      const a = randomBytes(Math.floor(Math.random() * 5_000))
      const b = randomBytes(round % 10 === 0 ? 0 : Math.floor(Math.random() * 5_000))
      expect(crc32Combine(crc32(a), crc32(b), b.length)).toBe(crc32(Buffer.concat([a, b])))
    }
  })
})

describe("a gzip member from pieces", () => {
  it("gunzips (CRC-32 and length checked) to the pieces in order, and inflates to them as a stream", async () => {
    for (let round = 0; round < 5; round++) {
      const bytes = randomPieces(1 + round * 4)
      bytes.splice(1, 0, Buffer.alloc(0))
      const pieces = bytes.map((b) => deflatePiece(b))
      const whole = Buffer.concat(bytes)
      const member = gzipMember(pieces)
      const compressed = Buffer.concat(member.parts)
      expect(member.length).toBe(compressed.length)
      expect(gunzipSync(compressed).equals(whole)).toBe(true)
      expect((await buffer(inflatedPieces(pieces))).equals(whole)).toBe(true)
    }
  })

  it("reuses a piece in another member unchanged: pieces are independent of their neighbours", () => {
    const [a, b, c] = ["[1,2,3", ",", "4]"].map((text) => deflatePiece(text)) as [
      ReturnType<typeof deflatePiece>,
      ReturnType<typeof deflatePiece>,
      ReturnType<typeof deflatePiece>
    ]
    expect(gunzipSync(Buffer.concat(gzipMember([a, b, c]).parts)).toString()).toBe("[1,2,3,4]")
    expect(gunzipSync(Buffer.concat(gzipMember([c, b, a]).parts)).toString()).toBe("4],[1,2,3")
    expect(gunzipSync(Buffer.concat(gzipMember([]).parts)).length).toBe(0)
  })
})
