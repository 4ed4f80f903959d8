/**
 * Baseline: a bare `HttpApi` server from @effect/platform, the floor of the services' framework:
 * one endpoint, its input decoded and its answer encoded by the services' own schemas, no
 * middleware, no logging, no metrics.
 *
 *   PORT=… MODE=get|post SAMPLE_FILE=… node --import tsx bench/baselines/bare.ts
 *
 * - get:  `GET /v1/quote`, query `QuoteQuery`, answer `QuoteResponse`
 * - post: `POST /v1/commitment`, payload `CommitmentRequest`, answer `CommitmentResponse`
 *
 * The answer is SAMPLE_FILE (a real service answer) decoded once at start and encoded per request.
 */
import { readFileSync } from "node:fs"
import { createServer } from "node:http"
import * as HttpApi from "@effect/platform/HttpApi"
import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import { Effect, Layer, Schema } from "effect"
import { CommitmentRequest, CommitmentResponse } from "../../schema/attestor.js"
import { QuoteQuery, QuoteResponse } from "../../schema/relayer.js"

const sample = JSON.parse(readFileSync(process.env.SAMPLE_FILE!, "utf8")) as unknown
const server = NodeHttpServer.layer(createServer, { host: "127.0.0.1", port: Number(process.env.PORT) })

const getApi = HttpApi.make("bare").add(
  HttpApiGroup.make("quote").add(
    HttpApiEndpoint.get("quote", "/v1/quote").setUrlParams(QuoteQuery).addSuccess(QuoteResponse)
  )
)
const postApi = HttpApi.make("bare").add(
  HttpApiGroup.make("commitments").add(
    HttpApiEndpoint.post("commitment", "/v1/commitment")
      .setPayload(CommitmentRequest)
      .addSuccess(CommitmentResponse)
  )
)

const getServer = () => {
  const answer = Schema.decodeUnknownSync(QuoteResponse)(sample)
  const handlers = HttpApiBuilder.group(getApi, "quote", (h) =>
    h.handle("quote", () => Effect.succeed(answer))
  )
  return HttpApiBuilder.serve().pipe(
    Layer.provide(HttpApiBuilder.api(getApi).pipe(Layer.provide(handlers))),
    Layer.provide(server)
  )
}

const postServer = () => {
  const answer = Schema.decodeUnknownSync(CommitmentResponse)(sample)
  const handlers = HttpApiBuilder.group(postApi, "commitments", (h) =>
    h.handle("commitment", () => Effect.succeed(answer))
  )
  return HttpApiBuilder.serve().pipe(
    Layer.provide(HttpApiBuilder.api(postApi).pipe(Layer.provide(handlers))),
    Layer.provide(server)
  )
}

NodeRuntime.runMain(Layer.launch(process.env.MODE === "post" ? postServer() : getServer()))
