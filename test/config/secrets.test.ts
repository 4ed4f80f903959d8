/**
 * Secrets from files and the signer settings (docs/operations.md "Secrets from files", "Keys"):
 * every secret setting reads `NAME_FILE`, without one trailing newline; `NAME` and `NAME_FILE`
 * together are refused naming both, on the one line with every other bad setting; a key file
 * readable by group or others is warned about; `*_SIGNER=keystore` opens its keystore at start-up
 * and a wrong passphrase or an unreadable file is one refusal naming the setting, never the secret.
 */
import { chmodSync, mkdtempSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { type ConfigError, ConfigProvider, Effect, Either, Option, Redacted } from "effect"
import { privateKeyToAddress } from "viem/accounts"
import { describe, expect, it } from "vitest"
import { loadAttestorSettings } from "../../src/config/attestor.js"
import { loadRelayerSettings } from "../../src/config/relayer.js"
import { keyFileWarnings, SECRET_SETTINGS } from "../../src/config/secrets.js"
import { formatConfigError } from "../../src/config/settings.js"
import { encryptKeystore } from "../../src/keys/keystore.js"

const VAULT = "0x5FbDB2315678afecb367f032d93F642f64180aa3"
const TOKEN = "0xe7f1725E7734CE288F8367e1Bb143E90bb3F0512"
const ADAPTER = "0x9fE46736679d2D9a65F0992F2272dE9f3c7fa6e0"
const HOT_KEY = "0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d"
const ATTESTOR_KEY = "0x5de4111afa1a4b94908f83103eb1f1706367c2e68ca870fc3fb9a804cdab365a"
const HINT_KEY = `0x${"22".repeat(32)}`
const PEPPER = `0x${"33".repeat(32)}`
const PASSPHRASE = "staple battery horse"

const dir = mkdtempSync(join(tmpdir(), "secrets-"))
let files = 0
/** A file holding `text`, mode 0600 unless told. */
const file = (text: string, mode = 0o600): string => {
  const path = join(dir, `f${files++}`)
  writeFileSync(path, text)
  chmodSync(path, mode)
  return path
}

const load = <A>(program: Effect.Effect<A, ConfigError.ConfigError>, env: Record<string, string>) =>
  Effect.runSync(
    Effect.either(Effect.withConfigProvider(program, ConfigProvider.fromMap(new Map(Object.entries(env)))))
  )

const failure = <A>(result: Either.Either<A, ConfigError.ConfigError>): string => {
  if (Either.isRight(result)) throw new Error("expected the settings to be refused")
  return formatConfigError(result.left)
}

const settled = <A>(result: Either.Either<A, ConfigError.ConfigError>): A => {
  if (Either.isLeft(result)) throw new Error(formatConfigError(result.left))
  return result.right
}

const relayerBase = {
  RPC_URL: "http://127.0.0.1:8545",
  FEE_VAULT: VAULT,
  SETTLEMENT_ASSET: TOKEN,
  SHIELD_ADAPTER: ADAPTER
}
const attestorBase = { RPC_URL: "http://127.0.0.1:8545", FEE_VAULT: VAULT, SETTLEMENT_ASSET: TOKEN }

// A cheap scrypt cost: the tests open several; the format is the same at any cost.
const keystoreOf = (key: `0x${string}`, passphrase = PASSPHRASE) =>
  file(JSON.stringify(encryptKeystore(key, passphrase, { scryptN: 1024 })))

describe("secrets from files", () => {
  it("reads every key and secret from NAME_FILE, without one trailing newline", () => {
    const relayer = settled(
      load(loadRelayerSettings, {
        ...relayerBase,
        RELAYER_PRIVATE_KEY_FILE: file(`${HOT_KEY}\n`),
        METRICS_TOKEN_FILE: file("metrics token\n\n"),
        DATABASE_URL_FILE: file("postgres://relayer:s3cret@127.0.0.1:5432/relayer\r\n")
      })
    )
    expect(relayer.hotKey.address).toBe(privateKeyToAddress(HOT_KEY))
    expect(relayer.hotKey.backend).toBe("local")
    // Only one newline goes: a secret may end in one of its own.
    expect(relayer.metricsToken.pipe(Option.map(Redacted.value))).toEqual(Option.some("metrics token\n"))
    expect(relayer.databaseUrl.pipe(Option.map(Redacted.value))).toEqual(
      Option.some("postgres://relayer:s3cret@127.0.0.1:5432/relayer")
    )
    const attestor = settled(
      load(loadAttestorSettings, {
        ...attestorBase,
        ATTESTOR_PRIVATE_KEY_FILE: file(`${ATTESTOR_KEY}\n`),
        HINT_PRIVATE_KEY_FILE: file(HINT_KEY),
        PEPPER_FILE: file(`${PEPPER}\n`),
        MESSENGER_BOT_TOKEN_FILE: file("123:bot-token\n"),
        CODEHOST_CLIENT_ID: "codehost-app",
        CODEHOST_CLIENT_SECRET_FILE: file("codehost secret\n"),
        MICROBLOG_CLIENT_ID: "microblog-app",
        MICROBLOG_CLIENT_SECRET_FILE: file("microblog secret\n"),
        COMMUNITY_CLIENT_ID: "community-app",
        COMMUNITY_CLIENT_SECRET_FILE: file("community secret")
      })
    )
    expect(attestor.signingKey.address).toBe(privateKeyToAddress(ATTESTOR_KEY))
    expect(Redacted.value(attestor.hintKey)).toBe(HINT_KEY)
    expect(Buffer.from(Redacted.value(attestor.pepper)).toString("hex")).toBe("33".repeat(32))
    expect(attestor.messengerBotToken.pipe(Option.map(Redacted.value))).toEqual(Option.some("123:bot-token"))
    expect(attestor.oauthApps.codehost?.clientSecret?.pipe(Redacted.value)).toBe("codehost secret")
    expect(attestor.oauthApps.microblog?.clientSecret?.pipe(Redacted.value)).toBe("microblog secret")
    expect(attestor.oauthApps.community?.clientSecret?.pipe(Redacted.value)).toBe("community secret")
  })

  it("refuses NAME with NAME_FILE, naming both, on one line with every other bad setting", () => {
    const line = failure(
      load(loadAttestorSettings, {
        ...attestorBase,
        ATTESTOR_PRIVATE_KEY: ATTESTOR_KEY,
        ATTESTOR_PRIVATE_KEY_FILE: file(ATTESTOR_KEY),
        HINT_PRIVATE_KEY: HINT_KEY,
        PEPPER: PEPPER,
        PEPPER_FILE: file(PEPPER),
        METRICS_TOKEN: "t",
        METRICS_TOKEN_FILE: file("t"),
        RATE_LIMIT_BURST: "many"
      })
    )
    expect(line).toContain(
      "ATTESTOR_PRIVATE_KEY: set either ATTESTOR_PRIVATE_KEY or ATTESTOR_PRIVATE_KEY_FILE, not both"
    )
    expect(line).toContain("PEPPER: set either PEPPER or PEPPER_FILE, not both")
    expect(line).toContain("METRICS_TOKEN: set either METRICS_TOKEN or METRICS_TOKEN_FILE, not both")
    expect(line).toContain("RATE_LIMIT_BURST")
    expect(line).not.toContain(ATTESTOR_KEY.slice(2))
    expect(line).not.toContain(PEPPER.slice(2))
  })

  it("every secret setting is refused with its file beside it", () => {
    // Everything else set, paid lookups on so that FACILITATOR_TOKEN is read too.
    const attestorFull: Record<string, string> = {
      ...attestorBase,
      ATTESTOR_PRIVATE_KEY: ATTESTOR_KEY,
      HINT_PRIVATE_KEY: HINT_KEY,
      PEPPER,
      CHAIN_ID: "31337",
      HANDLE_LOOKUP_MODE: "paid",
      FACILITATOR_URL: "http://127.0.0.1:9",
      HANDLE_LOOKUP_PRICE: "1000",
      HANDLE_LOOKUP_PAY_TO: VAULT,
      HANDLE_LOOKUP_ASSET_DECIMALS: "6",
      HANDLE_LOOKUP_ASSET_SYMBOL: "USDT"
    }
    for (const name of SECRET_SETTINGS) {
      const both = { [name]: "x", [`${name}_FILE`]: file("x") }
      const line =
        name === "RELAYER_PRIVATE_KEY"
          ? failure(load(loadRelayerSettings, { ...relayerBase, ...both }))
          : failure(load(loadAttestorSettings, { ...attestorFull, ...both }))
      expect(line, name).toContain(`${name}: set either ${name} or ${name}_FILE, not both`)
    }
  })

  it("names the file setting of a file it cannot read, never a secret", () => {
    const missing = join(dir, "no-such-file")
    const line = failure(load(loadRelayerSettings, { ...relayerBase, RELAYER_PRIVATE_KEY_FILE: missing }))
    expect(line).toBe(`RELAYER_PRIVATE_KEY_FILE: cannot read ${missing} (ENOENT)`)
    const bad = failure(
      load(loadRelayerSettings, { ...relayerBase, RELAYER_PRIVATE_KEY_FILE: file("not a key\n") })
    )
    expect(bad).toBe("RELAYER_PRIVATE_KEY: expected a 32-byte hex private key")
  })

  it("warns of a key file readable by group or others, naming the setting", () => {
    const warnings = (env: Record<string, string>) =>
      Effect.runSync(
        Effect.withConfigProvider(keyFileWarnings, ConfigProvider.fromMap(new Map(Object.entries(env))))
      )
    expect(
      warnings({
        RELAYER_PRIVATE_KEY_FILE: file(HOT_KEY, 0o644),
        PEPPER_FILE: file(PEPPER, 0o640),
        ATTESTOR_PRIVATE_KEY_FILE: file(ATTESTOR_KEY, 0o600),
        ATTESTOR_KEYSTORE_PASSPHRASE_FILE: file(PASSPHRASE, 0o400)
      })
    ).toEqual([
      "RELAYER_PRIVATE_KEY_FILE: the file is readable by group or others (mode 0644); chmod 600 it",
      "PEPPER_FILE: the file is readable by group or others (mode 0640); chmod 600 it"
    ])
  })
})

describe("signer settings", () => {
  it("RELAYER_SIGNER=keystore opens the keystore with the passphrase file", () => {
    const relayer = settled(
      load(loadRelayerSettings, {
        ...relayerBase,
        RELAYER_SIGNER: "keystore",
        RELAYER_KEYSTORE: keystoreOf(HOT_KEY),
        RELAYER_KEYSTORE_PASSPHRASE_FILE: file(`${PASSPHRASE}\n`)
      })
    )
    expect(relayer.hotKey).toMatchObject({ backend: "keystore", address: privateKeyToAddress(HOT_KEY) })
    const attestor = settled(
      load(loadAttestorSettings, {
        ...attestorBase,
        ATTESTOR_SIGNER: "keystore",
        ATTESTOR_KEYSTORE: keystoreOf(ATTESTOR_KEY),
        ATTESTOR_KEYSTORE_PASSPHRASE_FILE: file(PASSPHRASE),
        HINT_PRIVATE_KEY: HINT_KEY,
        PEPPER
      })
    )
    expect(attestor.signingKey).toMatchObject({
      backend: "keystore",
      address: privateKeyToAddress(ATTESTOR_KEY)
    })
  })

  it("refuses a wrong passphrase in one line naming the setting, never the passphrase", () => {
    const line = failure(
      load(loadRelayerSettings, {
        ...relayerBase,
        RELAYER_SIGNER: "keystore",
        RELAYER_KEYSTORE: keystoreOf(HOT_KEY),
        RELAYER_KEYSTORE_PASSPHRASE_FILE: file("not the passphrase\n")
      })
    )
    expect(line).toBe("RELAYER_KEYSTORE_PASSPHRASE_FILE: the passphrase does not open RELAYER_KEYSTORE")
  })

  it("refuses a missing or unreadable keystore, and settings of a backend not chosen", () => {
    const missing = join(dir, "absent.json")
    expect(
      failure(
        load(loadRelayerSettings, {
          ...relayerBase,
          RELAYER_SIGNER: "keystore",
          RELAYER_KEYSTORE: missing,
          RELAYER_KEYSTORE_PASSPHRASE_FILE: file(PASSPHRASE)
        })
      )
    ).toBe(`RELAYER_KEYSTORE: cannot read ${missing} (ENOENT)`)
    expect(failure(load(loadRelayerSettings, { ...relayerBase, RELAYER_SIGNER: "keystore" }))).toBe(
      "RELAYER_KEYSTORE: required with RELAYER_SIGNER=keystore; RELAYER_KEYSTORE_PASSPHRASE_FILE: required with RELAYER_SIGNER=keystore"
    )
    expect(
      failure(
        load(loadRelayerSettings, {
          ...relayerBase,
          RELAYER_SIGNER: "keystore",
          RELAYER_KEYSTORE: keystoreOf(HOT_KEY),
          RELAYER_KEYSTORE_PASSPHRASE_FILE: file(PASSPHRASE),
          RELAYER_PRIVATE_KEY: HOT_KEY
        })
      )
    ).toBe(
      "RELAYER_PRIVATE_KEY: not read with RELAYER_SIGNER=keystore: unset RELAYER_PRIVATE_KEY and RELAYER_PRIVATE_KEY_FILE"
    )
    expect(
      failure(
        load(loadRelayerSettings, { ...relayerBase, RELAYER_PRIVATE_KEY: HOT_KEY, RELAYER_KEYSTORE: missing })
      )
    ).toBe(
      "RELAYER_KEYSTORE: RELAYER_KEYSTORE and RELAYER_KEYSTORE_PASSPHRASE_FILE are read only with RELAYER_SIGNER=keystore"
    )
    expect(failure(load(loadRelayerSettings, { ...relayerBase, RELAYER_SIGNER: "hsm" }))).toBe(
      'RELAYER_SIGNER: expected one of local, keystore (got "hsm")'
    )
    expect(
      failure(
        load(loadRelayerSettings, {
          ...relayerBase,
          RELAYER_SIGNER: "keystore",
          RELAYER_KEYSTORE: file("{}"),
          RELAYER_KEYSTORE_PASSPHRASE_FILE: file(PASSPHRASE)
        })
      )
    ).toMatch(/^RELAYER_KEYSTORE: .* is not a keystore this can open: not a version 3 keystore$/)
  })
})
