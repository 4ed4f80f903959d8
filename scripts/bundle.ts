/**
 * The services as operators run them: each entry point and what it imports in one ES module
 * (dist/services/<name>.js, with its source map beside it), instead of the 1,300 modules tsc's
 * output loads from node_modules. Node keeps the source text and the loader's records of every
 * module it loads; one module, holding only what is reachable, keeps an idle relayer about 20 MiB
 * smaller (docs/operations.md "Bundled services"). `npm run build` runs it after tsc; the benches
 * bundle their servers the same way (bench/lib/build.ts).
 *
 *   tsx scripts/bundle.ts [outdir] [name=entry.ts ...]
 *
 * outdir defaults to dist/services; each name=entry.ts adds an entry point to the services'.
 */
import { dirname, join } from "node:path"
import { fileURLToPath } from "node:url"
import { build } from "esbuild"

const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..")

/** What each service process runs: its entry point, and the embedded database's cluster creator. */
export const SERVICE_ENTRY_POINTS: Readonly<Record<string, string>> = {
  relayer: "src/bin/relayer.ts",
  attestor: "src/bin/attestor.ts",
  // Spawned by src/store/sql.ts from beside the module that spawns it: the bundle's own directory.
  createCluster: "src/store/createCluster.ts"
}

/**
 * Left to node_modules: PGlite and tiny-secp256k1 read their WebAssembly (PGlite its data files
 * too) from beside their own modules, and PGlite's socket server must share that one copy; the
 * CommonJS PostgreSQL and WebSocket clients load optional native modules and Node built-ins with
 * `require`.
 */
const EXTERNAL = [
  "@electric-sql/pglite",
  "@electric-sql/pglite-socket",
  "pg",
  "pg-cursor",
  "tiny-secp256k1",
  "ws"
]

export const bundle = async (
  entryPoints: Readonly<Record<string, string>>,
  outdir: string
): Promise<void> => {
  await build({
    absWorkingDir: ROOT,
    entryPoints: Object.fromEntries(
      Object.entries(entryPoints).map(([name, path]) => [name, join(ROOT, path)])
    ),
    outdir,
    bundle: true,
    platform: "node",
    format: "esm",
    target: "node20",
    external: EXTERNAL,
    // Whitespace and syntax only: names stay as written, so a stack trace still names functions;
    // the source map (node --enable-source-maps) gives the source lines.
    minifyWhitespace: true,
    minifySyntax: true,
    sourcemap: "linked",
    // The map names the source files and lines; the sources themselves are in the repository.
    sourcesContent: false,
    // A CommonJS dependency bundled into an ES module still finds Node's built-ins with `require`.
    banner: {
      js: 'import { createRequire as __createRequire } from "node:module";const require=__createRequire(import.meta.url);'
    },
    logLevel: "warning"
  })
}

if (process.argv[1] !== undefined && fileURLToPath(import.meta.url) === process.argv[1]) {
  const [outdir, ...extra] = process.argv.slice(2)
  const more = extra.map((arg) => {
    const [name, entry] = arg.split("=")
    if (name === undefined || entry === undefined) throw new Error(`expected name=entry.ts, got ${arg}`)
    return [name, entry] as const
  })
  await bundle(
    { ...SERVICE_ENTRY_POINTS, ...Object.fromEntries(more) },
    outdir ?? join(ROOT, "dist", "services")
  )
}
