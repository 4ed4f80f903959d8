/**
 * Every way a service is started passes the services' node flags (src/bin/nodeFlags.ts): the npm
 * scripts and the image's command. The devnet's and the tests' service processes take the list
 * itself; the container test runs the image's command.
 */
import { readFileSync } from "node:fs"
import { join } from "node:path"
import { describe, expect, it } from "vitest"
import { SERVICE_NODE_FLAGS } from "../../src/bin/nodeFlags.js"
import { repoRoot } from "../support/process.js"

const flags = SERVICE_NODE_FLAGS.join(" ")

describe("the services' node flags", () => {
  it("are passed by the npm scripts that run a service, before its entry point", () => {
    const { scripts } = JSON.parse(readFileSync(join(repoRoot, "package.json"), "utf8")) as {
      scripts: Record<string, string>
    }
    expect(scripts).toMatchObject({
      relayer: `tsx ${flags} src/bin/relayer.ts`,
      attestor: `tsx ${flags} src/bin/attestor.ts`,
      "start:relayer": `node ${flags} dist/src/bin/relayer.js`,
      "start:attestor": `node ${flags} dist/src/bin/attestor.js`
    })
  })

  it("are passed by the image's command", () => {
    const dockerfile = readFileSync(join(repoRoot, "Dockerfile"), "utf8")
    const command = dockerfile.split("\n").filter((line) => line.startsWith("CMD "))
    expect(command).toEqual([`CMD ["/bin/sh", "-c", "exec node ${flags} \\"dist/src/bin/\${SERVICE}.js\\""]`])
  })
})
