/**
 * A settings file for a service run from a checkout (docs/operations.md "Settings files"):
 * `--env-file=<path>` after the entry point, else `ENV_FILE`, else `.env` in the working
 * directory when there is one; `ENV_FILE=none` reads no file. Its lines are `NAME=value` (Node's dotenv format); a setting of the
 * process environment wins over the file's. Read before anything else, so every setting, LOG_LEVEL
 * included, sees it.
 */
import { existsSync } from "node:fs"
import { resolve } from "node:path"

/** Which file to read, and whether it was asked for (then a missing one is an error). */
export const settingsFileOf = (
  argv: ReadonlyArray<string>,
  env: NodeJS.ProcessEnv,
  cwd: string
): { readonly path: string; readonly asked: boolean } | undefined => {
  const flag = argv.find((arg) => arg.startsWith("--env-file="))?.slice("--env-file=".length)
  const asked = flag ?? (env.ENV_FILE === undefined || env.ENV_FILE === "" ? undefined : env.ENV_FILE)
  if (asked === "none") return undefined
  if (asked !== undefined) return { path: resolve(cwd, asked), asked: true }
  const fallback = resolve(cwd, ".env")
  return existsSync(fallback) ? { path: fallback, asked: false } : undefined
}

/**
 * Loads the settings file into the process environment, never over a variable already set. The
 * path it read, or why it could not (the file named by `--env-file` or `ENV_FILE` is missing or
 * unreadable).
 */
export const loadSettingsFile = (): { readonly read?: string; readonly refusal?: string } => {
  const file = settingsFileOf(process.argv.slice(2), process.env, process.cwd())
  if (file === undefined) return {}
  try {
    process.loadEnvFile(file.path)
    return { read: file.path }
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code ?? "unreadable"
    return { refusal: `ENV_FILE: cannot read the settings file ${file.path} (${code})` }
  }
}
