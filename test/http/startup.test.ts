/**
 * A request that reaches a service while it starts: the socket is bound before the handlers are
 * installed (their layers are still being built), and such a request must be answered once they
 * are, never left hanging.
 */
import { HttpApi, HttpApiBuilder, HttpApiEndpoint, HttpApiGroup } from "@effect/platform"
import { Effect, Exit, Layer, Schema, Scope } from "effect"
import { describe, expect, it } from "vitest"
import { freeLoopbackPort } from "../../layers/devnet.js"
import { serviceDocument } from "../../src/http/openapi.js"
import { serveApi } from "../../src/http/server.js"

class StartupGroup extends HttpApiGroup.make("startup").add(
  HttpApiEndpoint.get("ready", "/v1/ready").addSuccess(Schema.Struct({ ready: Schema.Boolean }))
) {}

class StartupApi extends HttpApi.make("startup")
  .add(StartupGroup)
  .annotateContext(serviceDocument({ title: "startup", description: "test" })) {}

/** Handlers whose layer takes a while to build, as a service's do while it migrates its database. */
const SlowHandlers = HttpApiBuilder.group(StartupApi, "startup", (handlers) =>
  Effect.as(
    Effect.sleep("600 millis"),
    handlers.handle("ready", () => Effect.succeed({ ready: true }))
  )
)

/** Connects until the port accepts, then sends one GET and waits at most `ms` for its answer. */
const requestDuringStartup = async (port: number, ms: number) => {
  for (let i = 0; i < 400; i++) {
    try {
      const res = await fetch(`http://127.0.0.1:${port}/v1/ready`, { signal: AbortSignal.timeout(ms) })
      return { status: res.status, body: await res.json() }
    } catch (error) {
      if ((error as Error).name === "TimeoutError") return { status: "hung" as const }
      await new Promise((resolve) => setTimeout(resolve, 5))
    }
  }
  throw new Error("the port never accepted")
}

describe("a request during start-up", () => {
  it("is answered once the handlers are installed", { timeout: 30_000 }, async () => {
    const port = await Effect.runPromise(freeLoopbackPort)
    const scope = Effect.runSync(Scope.make())
    const starting = Effect.runPromise(
      Layer.buildWithScope(
        serveApi(StartupApi, SlowHandlers, { host: "127.0.0.1", port, maxBodyBytes: 1024 }),
        scope
      )
    )
    try {
      const answer = await requestDuringStartup(port, 5_000)
      expect(answer).toEqual({ status: 200, body: { ready: true } })
      await starting
    } finally {
      await Effect.runPromise(Scope.close(scope, Exit.void))
    }
  })
})
