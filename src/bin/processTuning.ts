/**
 * How both services' processes are started beyond their settings: node flags and the C allocator's
 * environment. Both only change how much memory stays resident; a service started without them
 * behaves the same. docs/operations.md "Process tuning" says why each; a packaging test keeps
 * package.json and the Dockerfile in step with this file, and the devnet, the tests and the
 * benches start the services with it.
 */

/** Passed by `npm run relayer` / `attestor`, `npm run start:*`, the image's command and the devnet. */
export const SERVICE_NODE_FLAGS: ReadonlyArray<string> = [
  // V8's young generation is two semi-spaces that grow to 16 MiB each under a burst of
  // allocation (start-up, a replay, an accounts body) and stay resident: 4 MiB each holds 24 MiB
  // less, for more frequent scavenges of the same work.
  "--max-semi-space-size=4",
  // Lets the relayer collect a start-up replay's garbage at once (src/background/collectGarbage.ts).
  "--expose-gc",
  // The embedded database's WebAssembly compiled on the main thread: compiled on V8's worker
  // threads, it leaves tens of MiB in their glibc heaps that are never returned.
  "--wasm-num-compilation-tasks=0"
]

/**
 * Set by the image and the devnet (an environment variable cannot be set portably in an npm
 * script). glibc's malloc raises its mmap threshold each time a large block is freed, up to
 * 32 MiB, and from then on serves large blocks (the memory behind Buffers: bodies, zlib's output,
 * database results) from heaps it seldom returns to the system. A fixed threshold of 128 KiB,
 * glibc's initial one, keeps every larger block in its own mapping, returned when freed. Other C
 * libraries ignore it.
 */
export const SERVICE_ALLOCATOR_ENV: Readonly<Record<string, string>> = {
  MALLOC_MMAP_THRESHOLD_: "131072"
}
