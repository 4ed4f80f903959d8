import { fileURLToPath } from "node:url"
import { defineConfig } from "vitest/config"

/** The package's entry points, as a project that installs it imports them, from the sources here. */
const entryPoint = (path: string) => fileURLToPath(new URL(path, import.meta.url))

export default defineConfig({
  resolve: {
    alias: {
      "fee-vault-services/client": entryPoint("./src/client.ts"),
      "fee-vault-services/relayer": entryPoint("./src/exports/relayer.ts"),
      "fee-vault-services/attestor": entryPoint("./src/exports/attestor.ts"),
      "fee-vault-services/testing": entryPoint("./src/exports/testing.ts")
    }
  },
  test: {
    include: ["test/**/*.test.ts", "examples/**/*.test.ts"],
    globalSetup: ["test/setup/global.ts"],
    // Each file starts its own anvil and database, and mostly waits on them and on the services'
    // processes: three files at a time keep two cores busy.
    pool: "forks",
    poolOptions: { forks: { maxForks: 3, minForks: 1 } },
    testTimeout: 60_000,
    hookTimeout: 120_000,
    sequence: { hooks: "stack" },
    // Quiet by default: a passing test's console output (request logs) is dropped, a failing one's
    // is shown; the services log at warn unless TEST_LOG asks for more (test/support/process.ts).
    silent: "passed-only",
    // Only a test slower than this is listed under its file: 127 files stay a screenful.
    slowTestThreshold: 30_000
  }
})
