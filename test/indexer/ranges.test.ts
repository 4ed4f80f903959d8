/**
 * Range bookkeeping: coverage from the start block, gaps, what a reorg keeps, and dropping
 * ranges a later one contains.
 */
import { type Hex, keccak256, stringToHex } from "viem"
import { describe, expect, it } from "vitest"
import { RangeBook } from "../../src/indexer/ranges.js"

const h = (s: string): Hex => keccak256(stringToHex(s))
let seq = 0
const range = (fromBlock: number, toBlock: number, hash = h(`${toBlock}`)) => ({
  seq: ++seq,
  fromBlock,
  toBlock,
  toHash: hash
})
const all = () => true

describe("RangeBook", () => {
  it("covers the contiguous prefix from the start block, in any commit order", () => {
    const book = new RangeBook(10)
    expect(book.coverage(all)).toBeUndefined()
    book.add([range(20, 29), range(10, 14)])
    expect(book.coverage(all)).toEqual({ block: 14, hash: h("14") })
    expect(book.nextCovered(15, all)).toBe(20)
    book.add([range(15, 19)])
    expect(book.coverage(all)).toEqual({ block: 29, hash: h("29") })
    expect(book.highest(all)).toBe(29)
  })

  it("ignores ranges whose last block is orphaned and keeps what a reorg leaves", () => {
    const book = new RangeBook(10)
    book.add([range(10, 14), range(15, 17)])
    const orphaned = new Set([h("17")])
    const canonical = (hash: Hex) => !orphaned.has(hash)
    expect(book.coverage(canonical)).toEqual({ block: 14, hash: h("14") })
    expect(book.keptUpTo({ number: 16, hash: h("16") }, all)).toEqual([
      { fromBlock: 15, toBlock: 16, toHash: h("16") }
    ])
    expect(book.keptUpTo({ number: 14, hash: h("14") }, all)).toEqual([])
  })

  it("drops older ranges a range from the start contains, and keeps those reaching beyond it", () => {
    const book = new RangeBook(10)
    book.add([range(10, 11), range(12, 13), range(14, 30), range(31, 35)])
    book.add([range(8, 30)])
    expect(book.size).toBe(2)
    expect(book.coverage(all)).toEqual({ block: 35, hash: h("35") })
  })
})
