/**
 * Both services' HTTP surfaces, in process on a private devnet, against what an outside probe
 * sends: thousands of generated requests (methods, spellings of every route's path, headers,
 * malformed, deep, oversized and near-valid bodies) never get a 5xx, and every refusal is
 * `{ error, code }` with a docs/protocol.md §7 code. Then the rules the generator leans on, checked one by
 * one on the real routes: other spellings are 404, other methods 405 with `Allow`, and a body
 * field no schema declares is 400 on every POST route, as the OpenAPI document says.
 */
import { Agent, request as httpRequest } from "node:http"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Arbitrary, Effect, FastCheck as fc, Layer, Logger, ManagedRuntime, Schema, Scope } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { Attestor } from "../../layers/attestor.js"
import {
  attestorEnv,
  type DevnetChain,
  devnetChain,
  relayerEnv,
  withSettings,
  writeDevnetFile
} from "../../layers/devnet.js"
import { Relayer } from "../../layers/relayer.js"
import * as attestorSchema from "../../schema/attestor.js"
import { errorCatalog } from "../../schema/errors.js"
import * as relayerSchema from "../../schema/relayer.js"
import { AttestorApi } from "../../src/attestor/api.js"
import { routeTemplates } from "../../src/http/routes.js"
import { serverUrl } from "../../src/http/server.js"
import { RelayerApi } from "../../src/relayer/api/index.js"

/** Generous limits: the probe is one client, and a 429 would hide what a route does. */
const unlimited = {
  RATE_LIMIT_IP_BURST: "1000000",
  RATE_LIMIT_IP_PER_MINUTE: "1000000",
  RATE_LIMIT_BURST: "1000000",
  RATE_LIMIT_PER_MINUTE: "1000000",
  RATE_LIMIT_ID_BURST: "1000000",
  RATE_LIMIT_ID_PER_MINUTE: "1000000",
  OAUTH_STATES_PER_CLIENT: "1000000",
  PORT: "0"
}

const quiet = <A, E, R>(layer: Layer.Layer<A, E, R>) =>
  layer.pipe(Layer.provide(Logger.remove(Logger.defaultLogger)))

const scope = Effect.runSync(Scope.make())
let chain: DevnetChain
let relayer: ManagedRuntime.ManagedRuntime<unknown, unknown> | undefined
let attestor: ManagedRuntime.ManagedRuntime<unknown, unknown> | undefined
const bases: Record<"relayer" | "attestor", string> = { relayer: "", attestor: "" }

beforeAll(async () => {
  chain = await Effect.runPromise(
    Scope.extend(devnetChain({ dir: join(tmpdir(), `http-fuzz-${process.pid}`) }), scope)
  )
  // The services read the deployment file; the URLs it names are not used here.
  await Effect.runPromise(
    writeDevnetFile(chain, { relayerUrl: "http://127.0.0.1:1", attestorUrl: "http://127.0.0.1:1" })
  )
  const relayerRuntime = ManagedRuntime.make(
    quiet(withSettings(Relayer.layer, { ...relayerEnv(chain, 0), ...unlimited }))
  )
  relayer = relayerRuntime as ManagedRuntime.ManagedRuntime<unknown, unknown>
  bases.relayer = await relayerRuntime.runPromise(serverUrl)
  const attestorRuntime = ManagedRuntime.make(
    // A microblog app and fedsocial, so their routes are served (starting calls no provider).
    quiet(
      withSettings(Attestor.layer, {
        ...attestorEnv(chain, 0),
        ...unlimited,
        MICROBLOG_CLIENT_ID: "fuzz",
        FEDSOCIAL_DOMAIN: "fuzz.example",
        FEDSOCIAL_URI: "https://fuzz.example/login",
        // Never the public default: nothing beyond loopback.
        FEDSOCIAL_RPC_URL: chain.anvil.rpcUrl
      })
    )
  )
  attestor = attestorRuntime as ManagedRuntime.ManagedRuntime<unknown, unknown>
  bases.attestor = await attestorRuntime.runPromise(serverUrl)
}, 300_000)

afterAll(async () => {
  await relayer?.dispose()
  await attestor?.dispose()
  await Effect.runPromise(Scope.close(scope, { _tag: "Success", value: undefined } as never))
})

/** One keep-alive connection, as a client would hold it: an answer must leave it usable or close it. */
const agent = new Agent({ keepAlive: true, maxSockets: 1 })

interface Answer {
  readonly status: number
  readonly headers: Record<string, string | Array<string> | undefined>
  readonly body: string
}

interface Probe {
  readonly method: string
  readonly path: string
  readonly headers: Record<string, string>
  readonly body?: string | undefined
}

const send = (base: string, probe: Probe) =>
  new Promise<Answer>((resolve, reject) => {
    const { hostname, port } = new URL(base)
    const req = httpRequest(
      {
        host: hostname,
        port,
        method: probe.method,
        path: probe.path,
        // Framed explicitly: Node's client leaves some methods' bodies unframed.
        headers:
          probe.body === undefined
            ? probe.headers
            : { ...probe.headers, "content-length": String(Buffer.byteLength(probe.body)) },
        agent
      },
      (res) => {
        let body = ""
        res.setEncoding("utf8")
        res.on("data", (chunk: string) => {
          body += chunk
        })
        res.on("end", () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }))
        res.on("error", reject)
      }
    )
    req.on("error", reject)
    if (probe.body !== undefined) req.end(probe.body)
    else req.end()
  })

const knownCodes = new Set<string>(Object.values(errorCatalog).map(({ code }) => code))

/** What every answer must be: no 5xx; a refusal with a body is `{ error, code }` with a known code. */
const expectWellFormed = (probe: Probe, answer: Answer) => {
  const where = `${probe.method} ${probe.path}`
  expect(answer.status, where).toBeLessThan(500)
  if (answer.status < 400 || probe.method === "HEAD") return
  // The operator-only refusals may be empty (docs/protocol.md §7).
  if (answer.body === "" && (answer.status === 401 || answer.status === 404)) {
    expect(probe.path.startsWith("/v1/metrics"), where).toBe(true)
    return
  }
  const body = JSON.parse(answer.body) as { error?: unknown; code?: unknown }
  expect(Object.keys(body).sort(), where).toEqual(["code", "error"])
  expect(typeof body.error, where).toBe("string")
  expect(knownCodes.has(String(body.code)), `${where}: ${String(body.code)}`).toBe(true)
  expect(String(body.error).length, where).toBeLessThan(400)
}

const paths = {
  relayer: routeTemplates(RelayerApi).map((r) => r.template),
  attestor: routeTemplates(AttestorApi).map((r) => r.template)
}

/** Spellings of a known path that an attacker tries to slip past guards with. */
const spell = (path: string) =>
  fc.oneof(
    fc.constant(path),
    fc.constant(path.toUpperCase()),
    fc.constant(`${path}/`),
    fc.constant(`/${path}`),
    fc.constant(path.replace("/v1/", "/v1//")),
    fc.nat({ max: Math.max(0, path.length - 1) }).map((i) => {
      const c = path[i] ?? "/"
      return `${path.slice(0, i)}%${c.charCodeAt(0).toString(16)}${path.slice(i + 1)}`
    }),
    fc.constant(`http://127.0.0.1${path}`),
    fc.webSegment().map((s) => `${path}/${s}`),
    fc
      .string({ unit: "binary-ascii", maxLength: 20 })
      .map((s) => `${path}?${encodeURIComponent(s)}=${s.length}`),
    fc.constant(`${path}?asset=0x${"00".repeat(20)}&adapter=0x${"00".repeat(20)}&action=claim`)
  )

const pathOf = (service: "relayer" | "attestor") =>
  fc.oneof(
    { weight: 4, arbitrary: fc.constantFrom(...paths[service]).chain(spell) },
    { weight: 1, arbitrary: fc.webPath().map((p) => (p.startsWith("/") ? p : `/${p}`)) }
  )

const deep = fc.integer({ min: 10, max: 5_000 }).map((n) => `{"a":${"[".repeat(n)}${"]".repeat(n)}}`)

/** Bodies near a real one: a request schema's valid value with a field dropped, retyped or added. */
const nearValid = fc
  .constantFrom<Schema.Schema.AnyNoContext>(
    relayerSchema.ClaimRequest,
    relayerSchema.PingRequest,
    relayerSchema.ProposeBindRequest,
    relayerSchema.TxStatusRequest,
    attestorSchema.CommitmentRequest,
    attestorSchema.BindRequest,
    attestorSchema.MessengerVerifyRequest
  )
  .chain((schema) => Arbitrary.make(schema).map((value) => Schema.encodeSync(schema)(value) as unknown))
  .chain((wire) =>
    fc
      .tuple(fc.constant(wire as Record<string, unknown>), fc.string({ maxLength: 8 }), fc.jsonValue())
      .map(([obj, key, value]) => {
        const keys = Object.keys(obj)
        const copy: Record<string, unknown> = { ...obj }
        const target = keys.length > 0 ? (keys[key.length % keys.length] ?? key) : key
        if (key.length % 3 === 0) delete copy[target]
        else if (key.length % 3 === 1) copy[target] = value
        else copy[key] = value
        return JSON.stringify(copy)
      })
  )

const bodyOf = fc.oneof(
  { weight: 3, arbitrary: fc.json({ maxDepth: 4 }) },
  { weight: 3, arbitrary: nearValid },
  { weight: 1, arbitrary: deep },
  { weight: 1, arbitrary: fc.string({ unit: "binary", maxLength: 200 }) },
  {
    weight: 1,
    arbitrary: fc.constantFrom(
      "",
      "{",
      "[]",
      "null",
      '{"__proto__":{"a":1}}',
      `{"a":"${"x".repeat(20_000)}"}`
    )
  },
  { weight: 1, arbitrary: fc.nat({ max: 40 }).map((k) => `{"pad":"${"y".repeat(k * 1024)}"}`) }
)

const headersOf = fc.record(
  {
    "content-type": fc.constantFrom(
      "application/json",
      "application/json; charset=utf-8",
      "APPLICATION/JSON",
      "text/plain",
      "application/x-www-form-urlencoded",
      ""
    ),
    "x-forwarded-for": fc.oneof(fc.ipV4(), fc.ipV6(), fc.string({ unit: "grapheme-ascii", maxLength: 30 })),
    "if-none-match": fc.string({ unit: "grapheme-ascii", maxLength: 30 }),
    "accept-encoding": fc.constantFrom("gzip", "br", "*", "identity;q=0", "gzip;q=abc"),
    authorization: fc.oneof(
      fc.constant("Bearer devnet"),
      fc.string({ unit: "grapheme-ascii", maxLength: 30 })
    )
  },
  { requiredKeys: [] }
)

const probeOf = (service: "relayer" | "attestor") =>
  fc
    .record({
      method: fc.constantFrom("GET", "POST", "POST", "POST", "PUT", "DELETE", "PATCH", "OPTIONS", "HEAD"),
      path: pathOf(service),
      headers: headersOf,
      body: fc.option(bodyOf, { nil: undefined })
    })
    .map((probe): Probe => {
      const headers = Object.fromEntries(Object.entries(probe.headers).filter(([, v]) => v !== ""))
      return probe.method === "GET" || probe.method === "HEAD"
        ? { ...probe, headers, body: undefined }
        : { ...probe, headers }
    })

describe.each(["relayer", "attestor"] as const)("%s", (service) => {
  it("answers thousands of generated requests without a 5xx, every refusal { error, code }", async () => {
    await fc.assert(
      fc.asyncProperty(probeOf(service), async (probe) => {
        expectWellFormed(probe, await send(bases[service], probe))
      }),
      { numRuns: 1_500, seed: Number(process.env.FUZZ_SEED ?? Date.now() % 2 ** 31) }
    )
  }, 120_000)

  it("serves no other spelling of a route: each is 404 not_found, its body unread", async () => {
    for (const template of paths[service].filter((p) => !p.includes(":"))) {
      for (const path of [
        template.toUpperCase(),
        `${template}/`,
        `/${template}`,
        template.replace("v1", "v%31")
      ]) {
        const answer = await send(bases[service], {
          method: "POST",
          path,
          headers: { "content-type": "application/json" },
          body: "{not json"
        })
        expect(answer.status, path).toBe(404)
        expect(JSON.parse(answer.body), path).toMatchObject({ code: "not_found" })
      }
    }
  })

  it("answers a known path asked with another method 405 method_not_allowed with Allow", async () => {
    const routes = routeTemplates(service === "relayer" ? RelayerApi : AttestorApi).filter(
      (r) => !r.template.includes(":")
    )
    for (const route of routes) {
      const method = route.method === "GET" ? "DELETE" : "GET"
      const answer = await send(bases[service], { method, path: route.template, headers: {} })
      expect(answer.status, route.template).toBe(405)
      expect(answer.headers.allow, route.template).toBe(route.method === "GET" ? "GET, HEAD" : route.method)
      expect(JSON.parse(answer.body), route.template).toMatchObject({ code: "method_not_allowed" })
    }
  })
})

/** Every POST route's request body, as its endpoint declares it. */
const postBodies = {
  relayer: {
    "/v1/claim": relayerSchema.ClaimRequest,
    "/v1/consolidate": relayerSchema.ConsolidateRequest,
    "/v1/shield-templates": relayerSchema.ShieldTemplatesRequest,
    "/v1/rotate-owner": relayerSchema.RotateOwnerRequest,
    "/v1/ping": relayerSchema.PingRequest,
    "/v1/cancel-bind": relayerSchema.CancelBindRequest,
    "/v1/propose-bind": relayerSchema.ProposeBindRequest,
    "/v1/finalize-bind": relayerSchema.FinalizeBindRequest,
    "/v1/tx-status": relayerSchema.TxStatusRequest
  },
  attestor: {
    "/v1/commitment": attestorSchema.CommitmentRequest,
    "/v1/oauth/messenger/verify": attestorSchema.MessengerVerifyRequest,
    "/v1/escrows": attestorSchema.EscrowsRequest,
    "/v1/bind": attestorSchema.BindRequest,
    "/v1/oauth/:platform/start": attestorSchema.OAuthStartRequest,
    "/v1/oauth/fedsocial/verify": attestorSchema.FedsocialVerifyRequest,
    "/v1/public-handle": attestorSchema.PublicHandleRequest
  }
} as const

/** A template's path as a request names it (`:platform` filled in) and as the OpenAPI document does. */
const concretePath = (template: string) => template.replace(":platform", "microblog")
const documentPath = (template: string) => template.replace(":platform", "{platform}")

describe.each(["relayer", "attestor"] as const)("%s request bodies", (service) => {
  it("cover every POST route", () => {
    const posts = routeTemplates(service === "relayer" ? RelayerApi : AttestorApi)
      .filter((r) => r.method === "POST")
      .map((r) => r.template)
      .sort()
    expect(Object.keys(postBodies[service]).sort()).toEqual(posts)
  })

  it("refuse a field they do not declare with 400 bad_request naming it, as the OpenAPI document says", async () => {
    const document = JSON.parse(
      (await send(bases[service], { method: "GET", path: "/v1/openapi.json", headers: {} })).body
    )
    for (const [template, schema] of Object.entries(postBodies[service])) {
      const path = concretePath(template)
      const declared =
        document.paths[documentPath(template)].post.requestBody.content["application/json"].schema
      const resolved =
        declared.$ref === undefined ? declared : document.components.schemas[declared.$ref.split("/").pop()]
      expect(resolved.additionalProperties, path).toBe(false)
      const [value] = fc.sample(Arbitrary.make(schema as Schema.Schema<unknown, unknown>), {
        numRuns: 1,
        seed: 7
      })
      const wire = Schema.encodeSync(schema as Schema.Schema<unknown, unknown>)(value) as Record<
        string,
        unknown
      >
      const answer = await send(bases[service], {
        method: "POST",
        path,
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ ...wire, undeclaredField: true })
      })
      expect(answer.status, path).toBe(400)
      const body = JSON.parse(answer.body) as { error: string; code: string }
      expect(body.code, path).toBe("bad_request")
      expect(body.error, path).toContain("undeclaredField")
    }
  })
})

describe.each(["relayer", "attestor"] as const)("%s HTTP details", (service) => {
  const anyPost = service === "relayer" ? "/v1/tx-status" : "/v1/commitment"

  it("refuses an encoded body 415 and an unknown Expect 417, each with the JSON error body", async () => {
    for (const headers of [
      { "content-encoding": "gzip" },
      { "transfer-encoding": "gzip, chunked" },
      { expect: "200-ok" }
    ]) {
      const encoded = "transfer-encoding" in headers
      const answer = await send(bases[service], {
        method: "POST",
        path: anyPost,
        headers: { "content-type": "application/json", ...headers },
        // A chunked body is framed by its chunks, not a length.
        body: encoded ? undefined : "{}"
      })
      const where = JSON.stringify(headers)
      expect(answer.status, where).toBe("expect" in headers ? 417 : 415)
      expect(JSON.parse(answer.body), where).toEqual({ error: expect.any(String), code: "bad_request" })
    }
  })
})

describe("attestor messenger login", () => {
  it("refuses an auth.id above 2^53 quoting its digits as sent, not a rounded number", async () => {
    const id = "9007199254740993"
    const answer = await send(bases.attestor, {
      method: "POST",
      path: "/v1/oauth/messenger/verify",
      headers: { "content-type": "application/json" },
      body: `{"auth":{"id":${id},"auth_date":1700000000,"hash":"${"a".repeat(64)}"},"stealthOwner":"0x${"11".repeat(20)}"}`
    })
    expect(answer.status).toBe(400)
    const body = JSON.parse(answer.body) as { error: string; code: string }
    expect(body.code).toBe("bad_request")
    expect(body.error).toContain(`auth.id: ${id} `)
    expect(body.error).not.toContain("9007199254740992")
  })
})
