/**
 * The schemas are what the OpenAPI document is derived from: every exported schema must have a
 * JSON Schema, bodies must appear as named components, and query schemas must expand into
 * parameters.
 */
import { HttpApi, HttpApiEndpoint, HttpApiGroup, OpenApi } from "@effect/platform"
import { describe, expect, it } from "@effect/vitest"
import { JSONSchema, Schema } from "effect"
import * as attestor from "../../schema/attestor.js"
import * as primitives from "../../schema/primitives.js"
import * as relayer from "../../schema/relayer.js"

const modules = { primitives, relayer, attestor }

describe("JSON Schema", () => {
  for (const [moduleName, module] of Object.entries(modules)) {
    for (const [name, value] of Object.entries(module)) {
      if (!Schema.isSchema(value)) continue
      it(`${moduleName}.${name} has one`, () => {
        expect(() => JSONSchema.make(value)).not.toThrow()
      })
    }
  }
})

const api = HttpApi.make("wire")
  .add(
    HttpApiGroup.make("relayer")
      .add(
        HttpApiEndpoint.get("quote", "/v1/quote")
          .setUrlParams(relayer.QuoteQuery)
          .addSuccess(relayer.QuoteResponse)
      )
      .add(
        HttpApiEndpoint.post("claim", "/v1/claim")
          .setPayload(relayer.ClaimRequest)
          .addSuccess(relayer.TxHashResponse)
      )
      .add(HttpApiEndpoint.get("accounts", "/v1/accounts").addSuccess(relayer.AccountsResponse))
      .add(
        HttpApiEndpoint.post("templates", "/v1/shield-templates")
          .setPayload(relayer.ShieldTemplatesRequest)
          .addSuccess(relayer.TxHashResponse)
      )
      .add(
        HttpApiEndpoint.post("proposeBind", "/v1/propose-bind")
          .setPayload(relayer.ProposeBindRequest)
          .addSuccess(relayer.TxHashResponse)
      )
      .add(
        HttpApiEndpoint.post("txStatus", "/v1/tx-status")
          .setPayload(relayer.TxStatusRequest)
          .addSuccess(relayer.TxStatus)
      )
  )
  .add(
    HttpApiGroup.make("attestor")
      .add(HttpApiEndpoint.get("info", "/v1/info").addSuccess(attestor.AttestorInfo))
      .add(
        HttpApiEndpoint.get("legacyStart", "/v1/oauth/microblog/start")
          .setUrlParams(attestor.LegacyOAuthStartQuery)
          .addSuccess(attestor.OAuthStartResponse)
      )
      .add(
        HttpApiEndpoint.get("callback", "/v1/oauth/microblog/callback")
          .setUrlParams(attestor.OAuthCallbackQuery)
          .addSuccess(attestor.SessionResponse)
      )
      .add(
        HttpApiEndpoint.post("escrows", "/v1/escrows")
          .setPayload(attestor.EscrowsRequest)
          .addSuccess(attestor.EscrowsResponse)
      )
      .add(
        HttpApiEndpoint.post("bind", "/v1/bind")
          .setPayload(attestor.BindRequest)
          .addSuccess(attestor.BindResponse)
      )
  )

describe("OpenAPI", () => {
  const spec = OpenApi.fromApi(api)
  const parameters = (path: string) =>
    (spec.paths[path]?.get?.parameters ?? []).map((p) => [p.name, p.required])

  it("names bodies and primitives as components", () => {
    for (const name of [
      "ClaimRequest",
      "Claim",
      "Registration",
      "AccountsResponse",
      "Address",
      "Uint256",
      "Bytes32",
      "Escrow",
      "BindSignature"
    ]) {
      expect(spec.components.schemas).toHaveProperty(name)
    }
  })

  it("expands query schemas into parameters", () => {
    expect(parameters("/v1/quote")).toStrictEqual([
      ["asset", true],
      ["adapter", true],
      ["action", false],
      ["templates", false],
      ["consolidate", false],
      ["register", false]
    ])
    expect(parameters("/v1/oauth/microblog/callback")).toStrictEqual([
      ["state", true],
      ["code", false],
      ["error", false]
    ])
    expect(parameters("/v1/oauth/microblog/start").map(([name]) => name)).toContain("stealthOwner")
  })

  it("documents the wire patterns", () => {
    expect(spec.components.schemas.Address).toMatchObject({ type: "string", pattern: "^0x[0-9a-fA-F]{40}$" })
    expect(spec.components.schemas.Uint256).toMatchObject({ type: "string", pattern: "^(?:0|[1-9][0-9]*)$" })
  })
})
