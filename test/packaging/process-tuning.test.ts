/**
 * Every way a service is started carries the services' process tuning (src/bin/processTuning.ts):
 * the npm scripts pass its node flags, the image passes them and sets its allocator environment.
 * The devnet's, the tests' and the benches' service processes take both from the module itself.
 */
import { readFileSync } from "node:fs"
import { join } from "node:path"
import { describe, expect, it } from "vitest"
import { SERVICE_ALLOCATOR_ENV, SERVICE_NODE_FLAGS } from "../../src/bin/processTuning.js"
import { repoRoot } from "../support/process.js"

const flags = SERVICE_NODE_FLAGS.join(" ")

describe("the services' process tuning", () => {
  it("has its node flags passed by the npm scripts that run a service, before the entry point", () => {
    const { scripts } = JSON.parse(readFileSync(join(repoRoot, "package.json"), "utf8")) as {
      scripts: Record<string, string>
    }
    expect(scripts).toMatchObject({
      relayer: `tsx ${flags} src/bin/relayer.ts`,
      attestor: `tsx ${flags} src/bin/attestor.ts`,
      "start:relayer": `node ${flags} dist/services/relayer.js`,
      "start:attestor": `node ${flags} dist/services/attestor.js`
    })
  })

  it("is the image's: its command passes the node flags, its runtime stage sets the allocator's environment", () => {
    const dockerfile = readFileSync(join(repoRoot, "Dockerfile"), "utf8")
    const command = dockerfile.split("\n").filter((line) => line.startsWith("CMD "))
    expect(command).toEqual([
      `CMD ["/bin/sh", "-c", "exec node ${flags} \\"dist/services/\${SERVICE}.js\\""]`
    ])
    const runtimeStage = dockerfile.slice(dockerfile.indexOf(" AS runtime"))
    for (const [name, value] of Object.entries(SERVICE_ALLOCATOR_ENV))
      expect(runtimeStage).toMatch(new RegExp(`^ENV [^]*?\\s${name}=${value} `, "m"))
  })
})
