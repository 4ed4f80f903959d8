// The generated ABI module and the vault's interface against the compiler and docs/protocol.md §5.
import { readdir, readFile } from "node:fs/promises"
import path from "node:path"
import {
  type AbiEvent,
  type AbiFunction,
  type AbiParameter,
  parseAbi,
  parseAbiItem,
  toFunctionSignature
} from "viem"
import { describe, expect, it } from "vitest"
import { feeVaultAbi } from "../../contracts/abi.js"
import { abiModulePath, contractsDir, loadArtifacts, renderAbiModule } from "../../contracts/build.js"

/** docs/protocol.md §5 "Events", verbatim. */
const protocolEvents = [
  "event Deposited(bytes32 indexed id, address indexed asset, address indexed from, uint256 amount)",
  "event Registered(bytes32 indexed id, uint8 kind, address owner, bytes32 commitment, address fallbackRecipient, uint256 fallbackDelay)",
  "event Claimed(bytes32 indexed id, address indexed asset, address indexed adapter, address relayer, uint256 amount, uint256 relayerFee, uint256 nonce)",
  "event Consolidated(bytes32 indexed id, address indexed assetIn, uint256 amountIn, uint256 amountOut, uint256 nonce)",
  "event ShieldTemplatesRegistered(bytes32 indexed id, uint256 count, bytes32 templatesHash, uint256 nonce)",
  "event ShieldTemplatesCleared(bytes32 indexed id, uint256 count)",
  "event ShieldedFromTemplate(bytes32 indexed id, uint256 indexed index, uint256 amount)",
  "event OwnerRotated(bytes32 indexed id, address indexed previousOwner, address indexed newOwner, uint256 nonce)",
  "event Pinged(bytes32 indexed id, uint256 nonce)",
  "event BindProposed(bytes32 indexed id, address indexed newOwner, uint256 readyAt, uint256 bindNonce)",
  "event BindFinalized(bytes32 indexed id, address indexed previousOwner, address indexed newOwner)",
  "event BindCancelled(bytes32 indexed id, address indexed by, bool vetoed)",
  "event SweptToFallback(bytes32 indexed id, address indexed asset, address indexed recipient, uint256 amount)",
  "event TokenLaunched(address indexed token, bytes32 indexed beneficiaryId, bytes beneficiaryHint)"
] as const

/** docs/protocol.md §5 functions and views. */
const protocolFunctions = parseAbi([
  "struct Claim { bytes32 beneficiaryId; address asset; uint256 amount; address adapter; bytes32 dataHash; address relayer; uint256 relayerFee; uint256 nonce; uint256 deadline; }",
  "function deposit(bytes32 id, address asset, uint256 amount)",
  "function registerOwner(address owner, bytes32 salt, address fallbackRecipient, uint256 fallbackDelay) returns (bytes32 id)",
  "function registerHandle(bytes32 handleCommitment, address fallbackRecipient, uint256 fallbackDelay) returns (bytes32 id)",
  "function claim(Claim claim, bytes adapterData, bytes signature)",
  "function consolidate(bytes32 id, address assetIn, uint256 amountIn, uint256 minOut, uint256 deadline, bytes signature)",
  "function registerShieldTemplates(bytes32 id, bytes[] templates, uint256 deadline, bytes signature)",
  "function shieldFromTemplate(bytes32 id, uint256 index)",
  "function rotateOwner(bytes32 id, address newOwner, uint256 deadline, bytes signature)",
  "function ping(bytes32 id, uint256 deadline, bytes signature)",
  "function proposeBind(bytes32 id, address newOwner, uint256 deadline, bytes[] signatures)",
  "function finalizeBind(bytes32 id)",
  "function cancelBind(bytes32 id, uint256 deadline, bytes signature)",
  "function vetoBind(bytes32 id)",
  "function sweepToFallback(bytes32 id, address asset)",
  "function launch(address token, bytes32 beneficiaryId, bytes beneficiaryHint)",
  "function multicall(bytes[] data) returns (bytes[])",
  "function nonces(bytes32) view returns (uint256)",
  "function bindNonces(bytes32) view returns (uint256)",
  "function balanceOf(bytes32 id, address asset) view returns (uint256)",
  "function totalDeposited(bytes32 id, address asset) view returns (uint256)",
  "function accountOf(bytes32 id) view returns (uint8 kind, address owner, address fallbackRecipient, uint256 fallbackDelay, uint256 lastActivity, address pendingOwner, uint256 pendingReadyAt, uint256 sweepClosedUntil)",
  "function shieldTemplateCount(bytes32) view returns (uint256)",
  "function computeId(uint8, bytes32, address, uint256) pure returns (bytes32)",
  "function isAttestor(address) view returns (bool)",
  "function attestorThreshold() view returns (uint256)",
  "function bindDelay() view returns (uint256)",
  "function settlementAsset() view returns (address)",
  "function shieldAdapter() view returns (address)",
  "function swapRouter() view returns (address)",
  "function eip712Domain() view returns (bytes1 fields, string name, string version, uint256 chainId, address verifyingContract, bytes32 salt, uint256[] extensions)"
])

const shape = (
  params: readonly { type: string; name?: string | undefined; indexed?: boolean | undefined }[]
) => params.map(({ type, name, indexed }) => ({ type, name: name ?? "", indexed: indexed ?? false }))

describe("contracts/abi.ts", () => {
  it("is exactly what contracts/build.ts generates from the current sources", async () => {
    const committed = await readFile(abiModulePath, "utf8")
    expect(committed).toBe(await renderAbiModule(await loadArtifacts()))
  })

  it("comes from a warm cache once compiled", async () => {
    const started = performance.now()
    await loadArtifacts()
    expect(performance.now() - started).toBeLessThan(3000)
    const cached = (await readdir(path.join(contractsDir, ".cache"))).filter((f) => f.endsWith(".json"))
    expect(cached.length).toBeGreaterThan(0)
  })
})

describe("FeeVault interface", () => {
  it("emits exactly the events of docs/protocol.md §5", () => {
    for (const signature of protocolEvents) {
      const expected = parseAbiItem(signature) as AbiEvent
      const actual = feeVaultAbi.find((item) => item.type === "event" && item.name === expected.name) as
        | AbiEvent
        | undefined
      expect(actual, expected.name).toBeDefined()
      expect(shape(actual!.inputs), expected.name).toEqual(shape(expected.inputs))
      expect(actual!.anonymous ?? false).toBe(false)
    }
  })

  it("has the functions and views of docs/protocol.md §5 with their parameter and result layouts", () => {
    const functions = feeVaultAbi.filter(
      (item): item is Extract<typeof item, { type: "function" }> => item.type === "function"
    )
    for (const expected of protocolFunctions as readonly AbiFunction[]) {
      const actual = functions.find(
        (f) => toFunctionSignature(f as AbiFunction) === toFunctionSignature(expected)
      )
      expect(actual, toFunctionSignature(expected)).toBeDefined()
      expect(actual!.outputs.map((o) => o.type)).toEqual(expected.outputs.map((o) => o.type))
    }
    const accountOf = functions.find((f) => f.name === "accountOf")!
    expect(accountOf.outputs.map((o) => o.name)).toEqual([
      "kind",
      "owner",
      "fallbackRecipient",
      "fallbackDelay",
      "lastActivity",
      "pendingOwner",
      "pendingReadyAt",
      "sweepClosedUntil"
    ])
    const claim = functions.find((f) => f.name === "claim")!
    const expectedClaim = (protocolFunctions as readonly AbiFunction[]).find((f) => f.name === "claim")!
    const components = (p: AbiParameter | undefined) =>
      p !== undefined && "components" in p ? p.components.map(({ name, type }) => ({ name, type })) : []
    // Struct field names matter: viem and the relayer pass the claim as a named object.
    expect(components(claim.inputs[0])).toEqual(components(expectedClaim.inputs[0]))
    expect(components(claim.inputs[0])).toHaveLength(9)
  })
})
