/**
 * The vault's account events (docs/protocol.md §5, "Events") as projections read them from the event
 * store: the stored form is the event name plus its arguments as JSON, with every uint256 as an
 * exact decimal string, addresses EIP-55 and byte strings lowercase hex.
 *
 * Decoding is written out by hand rather than with Schema: a rebuild decodes every stored event,
 * and the values were canonical when the indexer wrote them, so the checks here only make sure
 * each field has the shape the folds rely on.
 */
import { Data, Either } from "effect"
import type { Address, Hex } from "viem"

/** Where an event sits on the chain; projections order and undo by it. */
export interface EventPosition {
  readonly blockNumber: number
  readonly blockHash: Hex
  readonly logIndex: number
}

export type VaultEvent = EventPosition &
  (
    | {
        readonly name: "Deposited"
        readonly id: Hex
        readonly asset: Address
        readonly from: Address
        readonly amount: bigint
      }
    | {
        readonly name: "Registered"
        readonly id: Hex
        readonly kind: 1 | 2
        readonly owner: Address
        readonly commitment: Hex
        readonly fallbackRecipient: Address
        readonly fallbackDelay: bigint
      }
    | {
        readonly name: "Claimed"
        readonly id: Hex
        readonly asset: Address
        readonly adapter: Address
        readonly relayer: Address
        readonly amount: bigint
        readonly relayerFee: bigint
        readonly nonce: bigint
      }
    | {
        readonly name: "Consolidated"
        readonly id: Hex
        readonly assetIn: Address
        readonly amountIn: bigint
        readonly amountOut: bigint
        readonly nonce: bigint
      }
    | {
        readonly name: "ShieldTemplatesRegistered"
        readonly id: Hex
        readonly count: bigint
        readonly templatesHash: Hex
        readonly nonce: bigint
      }
    | { readonly name: "ShieldTemplatesCleared"; readonly id: Hex; readonly count: bigint }
    | {
        readonly name: "ShieldedFromTemplate"
        readonly id: Hex
        readonly index: bigint
        readonly amount: bigint
      }
    | {
        readonly name: "OwnerRotated"
        readonly id: Hex
        readonly previousOwner: Address
        readonly newOwner: Address
        readonly nonce: bigint
      }
    | { readonly name: "Pinged"; readonly id: Hex; readonly nonce: bigint }
    | {
        readonly name: "BindProposed"
        readonly id: Hex
        readonly newOwner: Address
        readonly readyAt: bigint
        readonly bindNonce: bigint
      }
    | {
        readonly name: "BindFinalized"
        readonly id: Hex
        readonly previousOwner: Address
        readonly newOwner: Address
      }
    | { readonly name: "BindCancelled"; readonly id: Hex; readonly by: Address; readonly vetoed: boolean }
    | {
        readonly name: "SweptToFallback"
        readonly id: Hex
        readonly asset: Address
        readonly recipient: Address
        readonly amount: bigint
      }
  )

export type VaultEventName = VaultEvent["name"]

/** A stored event whose arguments do not have the shape of its name. */
export class MalformedEvent extends Data.TaggedError("MalformedEvent")<{
  readonly eventName: string
  readonly field: string
  readonly blockNumber: number
  readonly logIndex: number
}> {
  override get message() {
    return `stored ${this.eventName} at block ${this.blockNumber} log ${this.logIndex} has a malformed ${this.field}`
  }
}

/** An event of the store in its stored form. */
export interface StoredEventLike extends EventPosition {
  readonly eventName: string
  readonly args: Readonly<Record<string, unknown>>
}

const ADDRESS = /^0x[0-9a-fA-F]{40}$/
const BYTES32 = /^0x[0-9a-f]{64}$/
const DECIMAL = /^(?:0|[1-9][0-9]*)$/

/** Thrown only inside `decodeVaultEvent` and turned into its `Left` there. */
class FieldError {
  constructor(readonly field: string) {}
}

type Args = Readonly<Record<string, unknown>>

/**
 * Most accounts have no fallback and many no owner yet: one zero address and one `0n` for all of
 * them, instead of a copy each that the projection keeps (about 90 bytes an account).
 */
const ZERO_ADDRESS: Address = "0x0000000000000000000000000000000000000000"

const address = (args: Args, field: string): Address => {
  const v = args[field]
  if (typeof v !== "string" || !ADDRESS.test(v)) throw new FieldError(field)
  return v === ZERO_ADDRESS ? ZERO_ADDRESS : (v as Address)
}
const bytes32 = (args: Args, field: string): Hex => {
  const v = args[field]
  if (typeof v !== "string" || !BYTES32.test(v)) throw new FieldError(field)
  return v as Hex
}
const uint = (args: Args, field: string): bigint => {
  const v = args[field]
  if (typeof v !== "string" || !DECIMAL.test(v)) throw new FieldError(field)
  return v === "0" ? 0n : BigInt(v)
}
const bool = (args: Args, field: string): boolean => {
  const v = args[field]
  if (typeof v !== "boolean") throw new FieldError(field)
  return v
}
const kind = (args: Args, field: string): 1 | 2 => {
  const v = args[field]
  if (v !== 1 && v !== 2) throw new FieldError(field)
  return v
}

const accountEventNames = new Set<string>([
  "Deposited",
  "Registered",
  "Claimed",
  "Consolidated",
  "ShieldTemplatesRegistered",
  "ShieldTemplatesCleared",
  "ShieldedFromTemplate",
  "OwnerRotated",
  "Pinged",
  "BindProposed",
  "BindFinalized",
  "BindCancelled",
  "SweptToFallback"
] satisfies ReadonlyArray<VaultEventName>)

/** Whether a stored event is one of the account events the projections fold. */
export const isAccountEvent = (eventName: string): eventName is VaultEventName =>
  accountEventNames.has(eventName)

const decodeFields = (e: StoredEventLike): VaultEvent | undefined => {
  const r = e.args
  // The position is written out in each literal: spreading a shared object into every event made
  // each one several times larger and slower to build (V8), which a start-up replay of every
  // stored event pays 100k times over.
  switch (e.eventName) {
    case "Deposited":
      return {
        blockNumber: e.blockNumber,
        blockHash: e.blockHash,
        logIndex: e.logIndex,
        name: "Deposited",
        id: bytes32(r, "id"),
        asset: address(r, "asset"),
        from: address(r, "from"),
        amount: uint(r, "amount")
      }
    case "Registered":
      return {
        blockNumber: e.blockNumber,
        blockHash: e.blockHash,
        logIndex: e.logIndex,
        name: "Registered",
        id: bytes32(r, "id"),
        kind: kind(r, "kind"),
        owner: address(r, "owner"),
        commitment: bytes32(r, "commitment"),
        fallbackRecipient: address(r, "fallbackRecipient"),
        fallbackDelay: uint(r, "fallbackDelay")
      }
    case "Claimed":
      return {
        blockNumber: e.blockNumber,
        blockHash: e.blockHash,
        logIndex: e.logIndex,
        name: "Claimed",
        id: bytes32(r, "id"),
        asset: address(r, "asset"),
        adapter: address(r, "adapter"),
        relayer: address(r, "relayer"),
        amount: uint(r, "amount"),
        relayerFee: uint(r, "relayerFee"),
        nonce: uint(r, "nonce")
      }
    case "Consolidated":
      return {
        blockNumber: e.blockNumber,
        blockHash: e.blockHash,
        logIndex: e.logIndex,
        name: "Consolidated",
        id: bytes32(r, "id"),
        assetIn: address(r, "assetIn"),
        amountIn: uint(r, "amountIn"),
        amountOut: uint(r, "amountOut"),
        nonce: uint(r, "nonce")
      }
    case "ShieldTemplatesRegistered":
      return {
        blockNumber: e.blockNumber,
        blockHash: e.blockHash,
        logIndex: e.logIndex,
        name: "ShieldTemplatesRegistered",
        id: bytes32(r, "id"),
        count: uint(r, "count"),
        templatesHash: bytes32(r, "templatesHash"),
        nonce: uint(r, "nonce")
      }
    case "ShieldTemplatesCleared":
      return {
        blockNumber: e.blockNumber,
        blockHash: e.blockHash,
        logIndex: e.logIndex,
        name: "ShieldTemplatesCleared",
        id: bytes32(r, "id"),
        count: uint(r, "count")
      }
    case "ShieldedFromTemplate":
      return {
        blockNumber: e.blockNumber,
        blockHash: e.blockHash,
        logIndex: e.logIndex,
        name: "ShieldedFromTemplate",
        id: bytes32(r, "id"),
        index: uint(r, "index"),
        amount: uint(r, "amount")
      }
    case "OwnerRotated":
      return {
        blockNumber: e.blockNumber,
        blockHash: e.blockHash,
        logIndex: e.logIndex,
        name: "OwnerRotated",
        id: bytes32(r, "id"),
        previousOwner: address(r, "previousOwner"),
        newOwner: address(r, "newOwner"),
        nonce: uint(r, "nonce")
      }
    case "Pinged":
      return {
        blockNumber: e.blockNumber,
        blockHash: e.blockHash,
        logIndex: e.logIndex,
        name: "Pinged",
        id: bytes32(r, "id"),
        nonce: uint(r, "nonce")
      }
    case "BindProposed":
      return {
        blockNumber: e.blockNumber,
        blockHash: e.blockHash,
        logIndex: e.logIndex,
        name: "BindProposed",
        id: bytes32(r, "id"),
        newOwner: address(r, "newOwner"),
        readyAt: uint(r, "readyAt"),
        bindNonce: uint(r, "bindNonce")
      }
    case "BindFinalized":
      return {
        blockNumber: e.blockNumber,
        blockHash: e.blockHash,
        logIndex: e.logIndex,
        name: "BindFinalized",
        id: bytes32(r, "id"),
        previousOwner: address(r, "previousOwner"),
        newOwner: address(r, "newOwner")
      }
    case "BindCancelled":
      return {
        blockNumber: e.blockNumber,
        blockHash: e.blockHash,
        logIndex: e.logIndex,
        name: "BindCancelled",
        id: bytes32(r, "id"),
        by: address(r, "by"),
        vetoed: bool(r, "vetoed")
      }
    case "SweptToFallback":
      return {
        blockNumber: e.blockNumber,
        blockHash: e.blockHash,
        logIndex: e.logIndex,
        name: "SweptToFallback",
        id: bytes32(r, "id"),
        asset: address(r, "asset"),
        recipient: address(r, "recipient"),
        amount: uint(r, "amount")
      }
    default:
      return undefined
  }
}

/**
 * The typed form of a stored event: `Right(undefined)` for a vault event no projection folds
 * (`TokenLaunched`, admin events), `Left` when the stored arguments are malformed.
 */
export const decodeVaultEvent = (
  e: StoredEventLike
): Either.Either<VaultEvent | undefined, MalformedEvent> => {
  try {
    return Either.right(decodeFields(e))
  } catch (error) {
    if (error instanceof FieldError)
      return Either.left(
        new MalformedEvent({
          eventName: e.eventName,
          field: error.field,
          blockNumber: e.blockNumber,
          logIndex: e.logIndex
        })
      )
    throw error
  }
}
