/**
 * The node flags both services run with: `npm run relayer` / `attestor`, `npm run start:*`, the
 * image's command, the devnet's service processes and the tests' (a packaging test keeps
 * package.json and the Dockerfile in step with this list). Without them a service runs the same,
 * holding more memory. docs/operations.md "Node flags" says why each.
 */
export const SERVICE_NODE_FLAGS: ReadonlyArray<string> = [
  // V8's young generation is two semi-spaces that grow to 16 MiB each under a burst of
  // allocation (start-up, a replay, an accounts body) and stay resident: 4 MiB each holds 24 MiB
  // less, for more frequent scavenges of the same work (bench/README.md).
  "--max-semi-space-size=4",
  // Lets a service collect a start-up replay's garbage at once (src/background/collectGarbage.ts).
  "--expose-gc"
]
