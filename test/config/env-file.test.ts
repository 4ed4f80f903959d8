/**
 * The settings file a service reads first (src/config/envFile.ts, docs/operations.md "A service
 * from a checkout"): `--env-file=<path>` after the entry point, else `ENV_FILE`, else `.env` in the
 * working directory; `ENV_FILE=none` reads none; a named file that cannot be read is a refusal; and
 * a variable already set in the environment wins over the file's.
 */
import { mkdtempSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterEach, describe, expect, it } from "vitest"
import { loadSettingsFile, settingsFileOf } from "../../src/config/envFile.js"

const dir = mkdtempSync(join(tmpdir(), "env-file-"))
const withDotEnv = mkdtempSync(join(tmpdir(), "env-file-dot-"))
writeFileSync(join(withDotEnv, ".env"), "PORT=1\n")

describe("which settings file", () => {
  it("takes --env-file, then ENV_FILE, then .env of the working directory", () => {
    expect(settingsFileOf(["--env-file=a.env"], { ENV_FILE: "b.env" }, dir)).toEqual({
      path: join(dir, "a.env"),
      asked: true
    })
    expect(settingsFileOf([], { ENV_FILE: "b.env" }, dir)).toEqual({ path: join(dir, "b.env"), asked: true })
    expect(settingsFileOf([], {}, withDotEnv)).toEqual({ path: join(withDotEnv, ".env"), asked: false })
    expect(settingsFileOf([], {}, dir)).toBeUndefined()
  })

  it("reads none with ENV_FILE=none, even beside a .env", () => {
    expect(settingsFileOf([], { ENV_FILE: "none" }, withDotEnv)).toBeUndefined()
  })
})

describe("loading it", () => {
  const saved = { argv: process.argv, env: { ...process.env } }
  afterEach(() => {
    process.argv = saved.argv
    for (const name of ["ENV_FILE", "ENV_FILE_TEST_KEPT", "ENV_FILE_TEST_READ"]) delete process.env[name]
    Object.assign(process.env, saved.env)
  })

  it("never overrides a variable the environment sets, and names the file it read", () => {
    const file = join(dir, "settings.env")
    writeFileSync(file, "ENV_FILE_TEST_KEPT=from-file\nENV_FILE_TEST_READ=from-file\n")
    process.argv = [process.argv[0]!, "service.js"]
    process.env.ENV_FILE = file
    process.env.ENV_FILE_TEST_KEPT = "from-environment"
    expect(loadSettingsFile()).toEqual({ read: file })
    expect(process.env.ENV_FILE_TEST_KEPT).toBe("from-environment")
    expect(process.env.ENV_FILE_TEST_READ).toBe("from-file")
  })

  it("refuses a named file it cannot read, by ENV_FILE", () => {
    process.argv = [process.argv[0]!, "service.js"]
    process.env.ENV_FILE = join(dir, "missing.env")
    expect(loadSettingsFile().refusal).toMatch(
      /^ENV_FILE: cannot read the settings file .*missing\.env \(ENOENT\)$/
    )
  })
})
