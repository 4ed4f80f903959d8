/**
 * What a log line may say about a failure (`src/logging.ts`): a chain error by its class, never
 * the RPC URL (a hosted RPC's key sits in its path), a request body or a node's text; and the
 * services' logger prints no cause.
 */
import { describe, expect, it } from "@effect/vitest"
import { Cause, Effect, Logger, LogLevel } from "effect"
import { vi } from "vitest"
import { makeChainClient } from "../src/chain/ChainClient.js"
import { ChainReverted, RpcRejected } from "../src/chain/errors.js"
import {
  describeFailure,
  redactUrls,
  safeLogger,
  safeText,
  serviceLogger,
  unsafeLogInfo
} from "../src/logging.js"
import { closedPort } from "./chain/rpcProxy.js"

const SECRET = "SECRETKEY123abc"

describe("redactUrls", () => {
  it("takes out URLs with a path, query or credentials and viem's detail lines, keeps bare origins", () => {
    expect(redactUrls(`failed at https://rpc.example/v3/${SECRET}?x=1 now`)).toBe("failed at <url> now")
    expect(redactUrls(`https://user:${SECRET}@rpc.example`)).toBe("<url>")
    expect(redactUrls("Listening on http://127.0.0.1:8080")).toBe("Listening on http://127.0.0.1:8080")
    expect(redactUrls(`HTTP request failed.\nURL: x\nRequest body: {"a":1}`)).toBe("HTTP request failed.")
    expect(safeText(`a\nURL: https://rpc.example/${SECRET}`)).toBe("a")
  })
})

describe("describeFailure", () => {
  it.effect("names a dead RPC's failure by class, without its URL", () =>
    Effect.gen(function* () {
      const port = yield* Effect.promise(closedPort)
      const chain = makeChainClient({
        rpcUrl: `http://127.0.0.1:${port}/v3/${SECRET}`,
        timeoutMs: 500,
        retries: 0
      })
      const exit = yield* Effect.exit(chain.blockNumber)
      expect(exit._tag).toBe("Failure")
      if (exit._tag !== "Failure") return
      // viem's error inside carries the URL: it must never be printed as it is.
      const error = Cause.squash(exit.cause) as { readonly cause?: { readonly message?: string } }
      expect(error.cause?.message).toContain(SECRET)
      expect(describeFailure(exit.cause)).toBe(
        "ChainUnavailable: eth_blockNumber: no answer after 1 attempt(s)"
      )
    })
  )

  it("leaves out a node's text and a revert's arguments", () => {
    const rejected = new RpcRejected({
      operation: "eth_sendRawTransaction",
      code: -32000,
      httpStatus: undefined,
      rpcMessage: `see https://rpc.example/${SECRET}`,
      kind: "other",
      cause: undefined
    })
    expect(describeFailure(Cause.fail(rejected))).toBe(
      "RpcRejected: eth_sendRawTransaction: code -32000, other"
    )
    const reverted = new ChainReverted({
      operation: "eth_call(claim)",
      data: "0x12345678",
      errorName: "Nope",
      args: ["0x00000000000000000000000000000000000000aa"],
      description: "Nope(0x00000000000000000000000000000000000000aa)"
    })
    expect(describeFailure(Cause.fail(reverted))).toBe("ChainReverted: eth_call(claim): Nope")
    expect(describeFailure(Cause.die(new Error(`https://rpc.example/${SECRET}`)))).toBe("defect (Error)")
  })
})

describe("safeLogger", () => {
  it.effect("writes a failure description instead of the cause, and no URL", () =>
    Effect.gen(function* () {
      const lines: Array<string> = []
      const logger = safeLogger(Logger.map(Logger.logfmtLogger, (line) => lines.push(line)))
      const error = new RpcRejected({
        operation: "eth_gasPrice",
        code: undefined,
        httpStatus: 401,
        rpcMessage: "unauthorized",
        kind: "other",
        cause: new Error(`URL: https://rpc.example/v3/${SECRET}`)
      })
      yield* Effect.logWarning(`refresh failed at https://rpc.example/v3/${SECRET}`, Cause.fail(error)).pipe(
        Effect.annotateLogs("where", `https://rpc.example/v3/${SECRET}`),
        Effect.provide(Logger.replace(Logger.defaultLogger, logger))
      )
      expect(lines).toHaveLength(1)
      const line = lines[0] ?? ""
      expect(line).not.toContain(SECRET)
      expect(line).toContain('failure="RpcRejected: eth_gasPrice: HTTP 401, other"')
      expect(line).not.toContain("cause=")
    })
  )
})

/** A line without what the wall clock puts in it: its timestamp and span durations. */
const untimed = (line: string | undefined) =>
  (line ?? "").replace(/timestamp=\S+/, "timestamp=…").replace(/ outer=\d+ms/, " outer=…ms")

describe("unsafeLogInfo", () => {
  const fields = { method: "GET", route: "/v1/items/:id", status: 200, duration_ms: 1.25 }

  /** The lines the services' logger writes for the same access log entry logged both ways. */
  const bothWays = (around: <A>(effect: Effect.Effect<A>) => Effect.Effect<A>) =>
    Effect.gen(function* () {
      const lines: Array<string> = []
      const logger = Logger.replace(
        Logger.defaultLogger,
        safeLogger(Logger.map(Logger.logfmtLogger, (line) => lines.push(line)))
      )
      yield* around(Effect.logInfo("request").pipe(Effect.annotateLogs(fields))).pipe(Effect.provide(logger))
      yield* around(
        Effect.withFiberRuntime((fiber) => Effect.sync(() => unsafeLogInfo(fiber, "request", fields)))
      ).pipe(Effect.provide(logger))
      return lines
    })

  it.effect("writes the line Effect.logInfo with the same annotations writes", () =>
    Effect.gen(function* () {
      const lines = yield* bothWays((effect) =>
        effect.pipe(Effect.annotateLogs("service", "relayer"), Effect.withLogSpan("outer"))
      )
      expect(lines).toHaveLength(2)
      expect(lines[0]).toContain("message=request")
      expect(lines[0]).toContain("route=/v1/items/:id")
      expect(untimed(lines[1])).toBe(untimed(lines[0]))
    })
  )

  it.effect("stamps lines with this machine's time, not the Effect clock's (the devnet's chain clock)", () =>
    Effect.gen(function* () {
      // The test clock stands at 1970; a chain clock hours ahead is the same case.
      const lines = yield* bothWays((effect) => effect)
      const before = Date.now()
      for (const line of lines) {
        const stamp = Date.parse(line.match(/timestamp=(\S+)/)?.[1] ?? "")
        expect(Math.abs(stamp - before)).toBeLessThan(60_000)
      }
      expect(lines).toHaveLength(2)
    })
  )

  it.effect("respects the minimum log level", () =>
    Effect.gen(function* () {
      const lines = yield* bothWays((effect) => Logger.withMinimumLogLevel(effect, LogLevel.Warning))
      expect(lines).toEqual([])
    })
  )

  /**
   * The lines the services' own logger writes to stdout for an entry logged both ways: with it
   * alone, `unsafeLogInfo` writes its line without the logger's steps.
   */
  const serviceLinesBothWays = (
    fields: Readonly<Record<string, unknown>>,
    around: <A>(effect: Effect.Effect<A>) => Effect.Effect<A>
  ) =>
    Effect.gen(function* () {
      const written: Array<string> = []
      const write = vi.spyOn(process.stdout, "write").mockImplementation((chunk: string | Uint8Array) => {
        written.push(String(chunk))
        return true
      })
      try {
        yield* around(Effect.logInfo("request").pipe(Effect.annotateLogs(fields))).pipe(
          Effect.provide(serviceLogger)
        )
        yield* around(
          Effect.withFiberRuntime((fiber) => Effect.sync(() => unsafeLogInfo(fiber, "request", fields)))
        ).pipe(Effect.provide(serviceLogger))
        // Lines are written once per turn of the event loop.
        yield* Effect.promise(() => new Promise((resolve) => setImmediate(resolve)))
      } finally {
        write.mockRestore()
      }
      return written
        .join("")
        .split("\n")
        .filter((line) => line !== "")
    })

  it.effect(
    "writes the services' logger's line on its own path, the fiber's annotations and redaction kept",
    () =>
      Effect.gen(function* () {
        const cases: ReadonlyArray<
          readonly [Readonly<Record<string, unknown>>, <A>(effect: Effect.Effect<A>) => Effect.Effect<A>]
        > = [
          [fields, (effect) => effect],
          [
            { ...fields, route: "two words", note: `at https://rpc.example/v3/${SECRET}`, big: 7n, ok: true },
            (effect) =>
              effect.pipe(
                Effect.annotateLogs({
                  service: "relayer",
                  rpc: `https://rpc.example/v3/${SECRET}`,
                  status: "overridden",
                  "odd key": 'a "quoted" = value',
                  count: 3
                })
              )
          ],
          // Where the line depends on more than plain values, the logger's own steps.
          [fields, (effect) => Effect.withLogSpan(effect, "outer")],
          [fields, (effect) => Effect.withSpan(effect, "traced")],
          [{ ...fields, detail: { nested: [1, 2] } }, (effect) => effect]
        ]
        for (const [entry, around] of cases) {
          const lines = yield* serviceLinesBothWays(entry, around)
          expect(lines).toHaveLength(2)
          expect(untimed(lines[1])).toBe(untimed(lines[0]))
          expect(lines[0]).toContain("message=request")
          expect(lines[0]).not.toContain(SECRET)
        }
        const [annotated] = yield* serviceLinesBothWays({ ...fields, route: "two words" }, (effect) =>
          Effect.annotateLogs(effect, { service: "relayer", status: "overridden" })
        )
        expect(annotated).toContain('route="two words"')
        expect(annotated).toContain("service=relayer")
        expect(annotated).toContain("status=200")
        expect(annotated).not.toContain("overridden")
      })
  )
})
