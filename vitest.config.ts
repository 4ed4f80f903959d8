import { defineConfig } from "vitest/config"

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    globalSetup: ["test/setup/global.ts"],
    // Each file starts its own anvil and database; two cores run two files at a time.
    pool: "forks",
    poolOptions: { forks: { maxForks: 2, minForks: 1 } },
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
