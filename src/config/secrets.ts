/**
 * Secrets from files (docs/operations.md "Secrets from files"): every secret setting `NAME` may be
 * given instead as `NAME_FILE`, the path of a file holding it (Docker and Kubernetes secrets).
 * Both set is refused; the file's text loses one trailing newline; a key file readable by group or
 * others is warned about at start-up.
 */
import { readFileSync, statSync } from "node:fs"
import { Config, ConfigError, Either, Option } from "effect"

/** Every secret setting of the relayer and the attestor; each also reads `<NAME>_FILE`. */
export const SECRET_SETTINGS = [
  "RELAYER_PRIVATE_KEY",
  "ATTESTOR_PRIVATE_KEY",
  "HINT_PRIVATE_KEY",
  "PEPPER",
  "METRICS_TOKEN",
  "DATABASE_URL",
  "MICROBLOG_CLIENT_SECRET",
  "CODEHOST_CLIENT_SECRET",
  "COMMUNITY_CLIENT_SECRET",
  "MESSENGER_BOT_TOKEN",
  "FACILITATOR_TOKEN",
  "MICROBLOG_BEARER_TOKEN",
  "CODEHOST_API_TOKEN"
] as const

/**
 * The file settings that hold a key or open one: a looser mode than 0600 on them is warned about
 * (the other secrets' files are often mounted read-only by group by the orchestrator).
 */
export const KEY_FILE_SETTINGS = [
  "RELAYER_PRIVATE_KEY_FILE",
  "ATTESTOR_PRIVATE_KEY_FILE",
  "HINT_PRIVATE_KEY_FILE",
  "PEPPER_FILE",
  "RELAYER_KEYSTORE",
  "RELAYER_KEYSTORE_PASSPHRASE_FILE",
  "ATTESTOR_KEYSTORE",
  "ATTESTOR_KEYSTORE_PASSPHRASE_FILE"
] as const

/** A file's text without one trailing newline (`\n` or `\r\n`), as `echo secret > file` leaves it. */
export const withoutTrailingNewline = (text: string): string => text.replace(/\r?\n$/, "")

/**
 * Reads a secret file; the refusal names `setting` and the path's failure code, never the text.
 */
export const readSecretFile = (
  setting: string,
  path: string
): Either.Either<string, ConfigError.ConfigError> => {
  try {
    return Either.right(withoutTrailingNewline(readFileSync(path, "utf8")))
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code ?? "unreadable"
    return Either.left(ConfigError.InvalidData([setting], `cannot read ${path} (${code})`))
  }
}

/**
 * A secret setting's text, from `NAME` or from the file `NAME_FILE` names; none when neither is set
 * (an empty value counts as unset). Both set is refused, naming both.
 */
export const secretText = (name: string): Config.Config<Option.Option<string>> =>
  Config.all([Config.option(Config.string(name)), Config.option(Config.string(`${name}_FILE`))]).pipe(
    Config.mapOrFail(([direct, file]) => {
      const given = Option.filter(direct, (s) => s.length > 0)
      const path = Option.filter(file, (s) => s.length > 0)
      if (Option.isNone(path)) return Either.right(given)
      if (Option.isSome(given))
        return Either.left(ConfigError.InvalidData([name], `set either ${name} or ${name}_FILE, not both`))
      return Either.map(readSecretFile(`${name}_FILE`, path.value), Option.some)
    })
  )

/** A required secret setting: `NAME` or `NAME_FILE`. */
export const requiredSecretText = (name: string): Config.Config<string> =>
  secretText(name).pipe(
    Config.mapOrFail((text) =>
      Option.isSome(text)
        ? Either.right(text.value)
        : Either.left(ConfigError.MissingData([name], "required, not set"))
    )
  )

/** The warning for a key file readable by group or others; none for a private one or none at all. */
export const looseKeyFileWarning = (setting: string, path: string): string | undefined => {
  try {
    const mode = statSync(path).mode & 0o777
    return (mode & 0o077) === 0
      ? undefined
      : `${setting}: the file is readable by group or others (mode ${mode.toString(8).padStart(4, "0")}); chmod 600 it`
  } catch {
    // Unreadable files are refused by the setting that reads them.
    return undefined
  }
}

/** The start-up warnings for every key file setting given (`KEY_FILE_SETTINGS`). */
export const keyFileWarnings: Config.Config<ReadonlyArray<string>> = Config.all(
  KEY_FILE_SETTINGS.map((setting) => Config.option(Config.string(setting)))
).pipe(
  Config.map((paths) =>
    paths.flatMap((path, i) =>
      Option.isSome(path) && path.value.length > 0
        ? [looseKeyFileWarning(KEY_FILE_SETTINGS[i]!, path.value)].filter((w) => w !== undefined)
        : []
    )
  )
)
