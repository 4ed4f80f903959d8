/**
 * A large body kept only compressed, in pieces that are compressed on their own: each piece is raw
 * DEFLATE (RFC 1951) ended with a sync flush, so it ends byte-aligned in a block that is not the
 * last, and no piece refers back into another. Pieces in any order therefore concatenate into one
 * valid DEFLATE stream; one final empty block closes it. A gzip member (RFC 1952) is that stream
 * between a header and a trailer whose CRC-32 is combined from the pieces' own (zlib's
 * `crc32_combine`), so the uncompressed bytes are never needed together.
 *
 * A piece that changes is compressed again alone; the identity representation is the stream
 * inflated as it is sent.
 */
import { Readable } from "node:stream"
import { constants, crc32, deflateRawSync, inflateRawSync } from "node:zlib"

/** One piece: its raw DEFLATE bytes, and the CRC-32 and length of what they inflate to. */
export interface DeflatedPiece {
  readonly deflated: Buffer
  readonly crc: number
  readonly length: number
}

export const deflatePiece = (bytes: Uint8Array | string): DeflatedPiece => {
  const raw = typeof bytes === "string" ? Buffer.from(bytes) : bytes
  return {
    deflated: deflateRawSync(raw, { finishFlush: constants.Z_SYNC_FLUSH }),
    crc: crc32(raw),
    length: raw.length
  }
}

// CRC-32 combination as in zlib's crc32.c: multiplication modulo the CRC polynomial (reflected).
const POLY = 0xedb88320

/** a·b modulo the polynomial; `a` must not be 0. */
const multModP = (a: number, b: number): number => {
  let m = 0x80000000
  let p = 0
  let bb = b >>> 0
  for (;;) {
    if ((a & m) !== 0) {
      p ^= bb
      if ((a & (m - 1)) === 0) break
    }
    m >>>= 1
    bb = bb & 1 ? (bb >>> 1) ^ POLY : bb >>> 1
  }
  return p >>> 0
}

/** x^(2^k) modulo the polynomial, k = 0..31. */
const X2N: ReadonlyArray<number> = (() => {
  const table = [0x40000000]
  for (let k = 1; k < 32; k++) table.push(multModP(table[k - 1] as number, table[k - 1] as number))
  return table
})()

/** x^(n·2^k) modulo the polynomial. */
const x2nModP = (n: number, k: number): number => {
  let p = 0x80000000
  let rest = n
  let i = k
  while (rest > 0) {
    if (rest % 2 === 1) p = multModP(X2N[i & 31] as number, p)
    rest = Math.floor(rest / 2)
    i++
  }
  return p
}

/** The CRC-32 of A followed by B, from the CRC-32 of each and the length of B. */
export const crc32Combine = (crcA: number, crcB: number, lengthB: number): number =>
  (multModP(x2nModP(lengthB, 3), crcA >>> 0) ^ crcB) >>> 0

/** A final, empty block with fixed codes: the end of the DEFLATE stream. */
const FINAL_BLOCK = Buffer.from([0x03, 0x00])
/** Magic, DEFLATE, no flags, no modification time, no extra flags, Unix (as zlib writes it). */
const GZIP_HEADER = Buffer.from([0x1f, 0x8b, 0x08, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x03])

/** The whole body as one gzip member: buffers to send in order (the pieces' own, not copies), and their total length. */
export const gzipMember = (
  pieces: ReadonlyArray<DeflatedPiece>
): { readonly parts: ReadonlyArray<Uint8Array>; readonly length: number } => {
  let crc = 0
  let length = 0
  let compressed = GZIP_HEADER.length + FINAL_BLOCK.length + 8
  const parts: Array<Uint8Array> = [GZIP_HEADER]
  for (const piece of pieces) {
    crc = crc32Combine(crc, piece.crc, piece.length)
    length += piece.length
    compressed += piece.deflated.length
    parts.push(piece.deflated)
  }
  const trailer = Buffer.alloc(8)
  trailer.writeUInt32LE(crc, 0)
  // ISIZE: the length modulo 2^32.
  trailer.writeUInt32LE(length % 0x100000000, 4)
  parts.push(FINAL_BLOCK, trailer)
  return { parts, length: compressed }
}

/**
 * The uncompressed bytes of the pieces, inflated one piece at a time as they are read: each piece
 * inflates on its own (it refers to nothing before it), so a reader holds one piece's bytes at a
 * time. Synchronous, piece by piece, it was faster than an inflate stream through the thread pool.
 */
export const inflatedPieces = (pieces: ReadonlyArray<DeflatedPiece>): Readable =>
  Readable.from(
    (function* () {
      for (const piece of pieces)
        if (piece.length > 0) yield inflateRawSync(piece.deflated, { finishFlush: constants.Z_SYNC_FLUSH })
    })(),
    { objectMode: false }
  )
