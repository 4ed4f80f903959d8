/**
 * The signer settings of a service key (docs/operations.md "Keys"): `<KEY>_SIGNER` chooses the
 * backend, and each backend reads its own settings. The signer is opened while the settings are
 * read, so a backend that cannot sign (a wrong passphrase, an unreadable file) stops start-up
 * with the one settings line, naming the setting and never the secret.
 *
 * - `local` (default): `<KEY>_PRIVATE_KEY` or `<KEY>_PRIVATE_KEY_FILE`, 32 bytes of hex.
 * - `keystore`: `<KEY>_KEYSTORE`, the path of a Web3 Secret Storage v3 file, and
 *   `<KEY>_KEYSTORE_PASSPHRASE_FILE`, the path of the file holding its passphrase.
 */
import { readFileSync } from "node:fs"
import { Config, ConfigError, Effect, Either, Option, Redacted } from "effect"
import type { Hex } from "viem"
import { privateKeyToAddress } from "viem/accounts"
import { decryptKeystore, KeystoreError, keystoreAddress } from "../keys/keystore.js"
import { inMemorySigner, type Signer, type SignerBackend, signerBackends } from "../keys/Signer.js"
import { readSecretFile, secretText } from "./secrets.js"
import { oneOf, privateKey } from "./settings.js"

/** Whether 32 bytes are a secp256k1 private key (above 0, below the curve's order). */
const isValidKey = (key: Hex): boolean => {
  try {
    privateKeyToAddress(key)
    return true
  } catch {
    return false
  }
}

/** The file a keystore setting names, as text; the refusal names the setting and the failure code. */
const readKeystoreFile = (setting: string, path: string): Either.Either<string, ConfigError.ConfigError> => {
  try {
    return Either.right(readFileSync(path, "utf8"))
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code ?? "unreadable"
    return Either.left(ConfigError.InvalidData([setting], `cannot read ${path} (${code})`))
  }
}

/**
 * Opens a keystore with the passphrase in another file: the key it holds, or one refusal naming
 * the setting at fault (the passphrase's for a wrong passphrase, the keystore's for the rest).
 */
export const openKeystore = (
  names: { readonly keystore: string; readonly passphraseFile: string },
  paths: { readonly keystore: string; readonly passphraseFile: string }
): Either.Either<Hex, ConfigError.ConfigError> =>
  Either.gen(function* () {
    const text = yield* readKeystoreFile(names.keystore, paths.keystore)
    const passphrase = yield* readSecretFile(names.passphraseFile, paths.passphraseFile)
    const key = yield* Either.try({
      try: () => decryptKeystore(text, passphrase),
      catch: (error) =>
        error instanceof KeystoreError && error.reason === "wrong-passphrase"
          ? ConfigError.InvalidData([names.passphraseFile], `the passphrase does not open ${names.keystore}`)
          : ConfigError.InvalidData(
              [names.keystore],
              `${paths.keystore} is not a keystore this can open: ${error instanceof KeystoreError ? error.message : "unreadable"}`
            )
    })
    if (!isValidKey(key))
      return yield* Either.left(ConfigError.InvalidData([names.keystore], "holds no valid secp256k1 key"))
    const named = keystoreAddress(text)
    if (named !== undefined && named !== privateKeyToAddress(key))
      return yield* Either.left(
        ConfigError.InvalidData([names.keystore], "its address field is not the address of the key it holds")
      )
    return key
  })

/** A path setting that must be set (non-empty) for the backend chosen. */
const requiredPath = (name: string, backend: string) =>
  Config.option(Config.string(name)).pipe(
    Config.mapOrFail((value) =>
      Option.isSome(value) && value.value.length > 0
        ? Either.right(value.value)
        : Either.left(ConfigError.MissingData([name], `required with ${backend}`))
    )
  )

/**
 * The signer of the key `key` names (`RELAYER`, `ATTESTOR`): its backend from `<KEY>_SIGNER`,
 * opened now. Settings of a backend not chosen are refused when set, so a key is never read from a
 * place the operator believes unused.
 */
export const signerSetting = (key: "RELAYER" | "ATTESTOR"): Effect.Effect<Signer, ConfigError.ConfigError> =>
  Effect.gen(function* () {
    const choice = `${key}_SIGNER`
    const privateKeyName = `${key}_PRIVATE_KEY`
    const names = { keystore: `${key}_KEYSTORE`, passphraseFile: `${key}_KEYSTORE_PASSPHRASE_FILE` }
    const backend = yield* oneOf(choice, signerBackends).pipe(Config.withDefault<SignerBackend>("local"))
    if (backend === "local") {
      const unused = yield* Config.all([
        Config.option(Config.nonEmptyString(names.keystore)),
        Config.option(Config.nonEmptyString(names.passphraseFile))
      ])
      if (unused.some(Option.isSome))
        return yield* Effect.fail(
          ConfigError.InvalidData(
            [names.keystore],
            `${names.keystore} and ${names.passphraseFile} are read only with ${choice}=keystore`
          )
        )
      const hex = yield* privateKey(privateKeyName)
      return inMemorySigner(Redacted.value(hex), "local")
    }
    const stray = yield* secretText(privateKeyName)
    if (Option.isSome(stray))
      return yield* Effect.fail(
        ConfigError.InvalidData(
          [privateKeyName],
          `not read with ${choice}=keystore: unset ${privateKeyName} and ${privateKeyName}_FILE`
        )
      )
    const paths = yield* Config.all({
      keystore: requiredPath(names.keystore, `${choice}=keystore`),
      passphraseFile: requiredPath(names.passphraseFile, `${choice}=keystore`)
    })
    const opened = openKeystore(names, paths)
    return Either.isLeft(opened) ? yield* Effect.fail(opened.left) : inMemorySigner(opened.right, "keystore")
  })
