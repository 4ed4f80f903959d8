// Compiles the contracts once before any test file runs, so that every file finds a warm cache
// instead of several workers compiling the same sources at the same time.
import { loadArtifacts } from "../../contracts/build.js"

export default async function setup(): Promise<void> {
  await loadArtifacts()
}
