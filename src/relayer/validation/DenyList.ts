/**
 * The relayer's deny list (`DENY_LIST`): addresses it will not pay out to, one per line, read once
 * at start. A bad line stops the start with the line number, so a typo cannot silently let a
 * listed address through.
 */
import { readFile } from "node:fs/promises"
import { ConfigError, Context, Effect, Either, Layer, Option } from "effect"
import { type Address, getAddress, isAddress } from "viem"
import { RecipientDenied } from "../../../schema/errors.js"
import { RelayerSettings } from "../../config/relayer.js"

export interface DenyListShape {
  readonly size: number
  readonly isDenied: (address: Address) => boolean
}

export class DenyList extends Context.Tag("DenyList")<DenyList, DenyListShape>() {
  static readonly fromAddresses = (addresses: Iterable<string>): DenyListShape => {
    const set = new Set([...addresses].map((a) => a.toLowerCase()))
    return { size: set.size, isDenied: (address) => set.has(address.toLowerCase()) }
  }

  /** A fixed list, for tests. */
  static readonly test = (addresses: Iterable<string>): Layer.Layer<DenyList> =>
    Layer.succeed(DenyList, DenyList.fromAddresses(addresses))

  /** From the `DENY_LIST` setting; an unset setting denies nothing. */
  static readonly layer: Layer.Layer<DenyList, ConfigError.ConfigError, RelayerSettings> = Layer.effect(
    DenyList,
    Effect.flatMap(RelayerSettings, (settings) =>
      Option.match(settings.denyListFile, {
        onNone: () => Effect.succeed(DenyList.fromAddresses([])),
        onSome: (path) => Effect.map(loadDenyList(path), DenyList.fromAddresses)
      })
    )
  )
}

/**
 * Addresses of a deny-list file: one per line, any case (a mixed-case one must carry a valid
 * checksum); blank lines and `#` comments are ignored.
 */
export const parseDenyList = (text: string): Either.Either<ReadonlyArray<Address>, string> => {
  const out: Array<Address> = []
  for (const [index, raw] of text.split(/\r?\n/).entries()) {
    const line = (raw.split("#")[0] ?? "").trim()
    if (line.length === 0) continue
    const digits = line.slice(2)
    const uniformCase = digits === digits.toLowerCase() || digits === digits.toUpperCase()
    if (!/^0x[0-9a-fA-F]{40}$/.test(line) || !(uniformCase || isAddress(line, { strict: true })))
      return Either.left(`line ${index + 1} is not an address`)
    out.push(getAddress(line.toLowerCase()))
  }
  return Either.right(out)
}

export const loadDenyList = (path: string): Effect.Effect<ReadonlyArray<Address>, ConfigError.ConfigError> =>
  Effect.tryPromise({
    try: () => readFile(path, "utf8"),
    catch: (e) =>
      ConfigError.InvalidData(["DENY_LIST"], `cannot read ${path}: ${(e as NodeJS.ErrnoException).code ?? e}`)
  }).pipe(
    Effect.flatMap((text) =>
      Either.match(parseDenyList(text), {
        onLeft: (reason) => Effect.fail(ConfigError.InvalidData(["DENY_LIST"], `${path}: ${reason}`)),
        onRight: Effect.succeed
      })
    )
  )

/** Refuses when any of `recipients` (labelled for the message) is listed; the zero address means none. */
export const screenRecipients = (
  denyList: DenyListShape,
  recipients: ReadonlyArray<{ readonly label: string; readonly address: Address }>
): Effect.Effect<void, RecipientDenied> => {
  const denied = recipients.find((r) => denyList.isDenied(r.address))
  return denied === undefined
    ? Effect.void
    : Effect.fail(new RecipientDenied({ message: `${denied.label} is on this relayer's deny list` }))
}
