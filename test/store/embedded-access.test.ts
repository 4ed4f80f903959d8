/**
 * The embedded database has no password and every connection to it is its superuser, so no other
 * process may reach it (docs/operations.md "The embedded database"). A process that found a
 * loopback port could log in, write a session row for a token of its choosing and have the
 * attestor sign a bind with it; these tests make that attempt.
 */
import { spawn } from "node:child_process"
import {
  chmod,
  chown,
  mkdir,
  mkdtemp,
  readdir,
  readFile,
  readlink,
  rm,
  stat,
  writeFile
} from "node:fs/promises"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Reactivity } from "@effect/experimental"
import { SqlClient } from "@effect/sql/SqlClient"
import * as PgClient from "@effect/sql-pg/PgClient"
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import { Effect, Layer, Option } from "effect"
import { sqlLayer } from "../../src/store/sql.js"

// One data directory for every test here, whose cluster is created once: creating one takes seconds.
let root = ""
let dataDir = ""
beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), "embedded-access-"))
  dataDir = join(root, "data")
})
afterAll(() => rm(root, { recursive: true, force: true }))

const embedded = (dataDir: string) =>
  sqlLayer({ databaseUrl: Option.none(), dataDir, applicationName: "test" })

/** Runs `use` while the embedded database in `dataDir` is open, after checking that it answers. */
const whileOpen = <A>(dataDir: string, use: Effect.Effect<A, unknown>) =>
  Effect.scoped(
    Effect.gen(function* () {
      const context = yield* Layer.build(embedded(dataDir))
      const sql = Effect.runSync(Effect.provide(SqlClient, context))
      const rows = yield* sql<{ one: number }>`SELECT 1 AS one`
      expect(rows[0]?.one).toBe(1)
      return yield* use
    })
  )

/** The TCP ports this process listens on, from /proc (what `ss -ltnp` lists). */
const listeningTcpPorts = async (): Promise<ReadonlyArray<number>> => {
  const inodes = new Set<string>()
  for (const fd of await readdir("/proc/self/fd")) {
    const link = await readlink(`/proc/self/fd/${fd}`).catch(() => "")
    const inode = /^socket:\[(\d+)\]$/.exec(link)?.[1]
    if (inode) inodes.add(inode)
  }
  const ports: Array<number> = []
  for (const table of ["/proc/self/net/tcp", "/proc/self/net/tcp6"]) {
    const rows = (await readFile(table, "utf8").catch(() => "")).split("\n").slice(1)
    for (const row of rows) {
      // sl local_address rem_address st … inode: state 0A is LISTEN.
      const [, local, , state, , , , , , inode] = row.trim().split(/\s+/)
      if (state === "0A" && inode && inodes.has(inode) && local)
        ports.push(Number.parseInt(local.split(":")[1] ?? "", 16))
    }
  }
  return ports
}

/** A login as `psql "host=127.0.0.1 port=<p> user=x dbname=x"` would make it, then one query. */
const logsIn = (port: number) =>
  Effect.scoped(
    Effect.gen(function* () {
      const sql = yield* PgClient.make({
        host: "127.0.0.1",
        port,
        username: "postgres",
        database: "postgres",
        maxConnections: 1,
        connectTimeout: "2 seconds"
      })
      yield* sql`SELECT 1`
    })
  ).pipe(
    Effect.provide(Reactivity.layer),
    Effect.timeout("5 seconds"),
    Effect.match({ onFailure: () => false, onSuccess: () => true })
  )

/**
 * Runs `script` in a child Node process (as `uid` when given; with the TypeScript loader and from
 * the checkout when `typescript`), and resolves with what it printed.
 */
const printedBy = (script: string, options: { readonly uid?: number; readonly typescript?: boolean } = {}) =>
  new Promise<string>((resolve, reject) => {
    const checkout = join(import.meta.dirname, "..", "..")
    const child = spawn(
      process.execPath,
      [...(options.typescript ? ["--import", "tsx"] : []), "-e", script],
      {
        cwd: options.typescript ? checkout : "/",
        stdio: ["ignore", "pipe", "inherit"],
        ...(options.uid === undefined ? {} : { uid: options.uid, gid: options.uid })
      }
    )
    let out = ""
    child.stdout.on("data", (chunk) => {
      out += chunk
    })
    child.on("error", reject)
    child.on("exit", () => resolve(out.trim()))
  })

/** Connects to the socket at `path` from a child process, as `uid` when given: "connected" or the error's code. */
const connectFromProcess = (path: string, uid?: number) =>
  printedBy(
    `require("node:net").connect(${JSON.stringify(path)})
      .on("connect", function () { console.log("connected"); this.destroy() })
      .on("error", (e) => console.log(e.code))`,
    uid === undefined ? {} : { uid }
  )

/** Opens the file at `path` (`flags` as `fs.open` takes them) from a child process running as `uid`. */
const openFromProcess = (path: string, flags: string, uid: number) =>
  printedBy(
    `require("node:fs").open(${JSON.stringify(path)}, ${JSON.stringify(flags)},
      (e, fd) => { console.log(e ? e.code : "opened"); if (!e) require("node:fs").closeSync(fd) })`,
    { uid }
  )

/** Runs `closeDataDirectory(dataDir)` in a child process as `uid`: "closed", or its refusal. */
const closeAs = (dataDir: string, uid: number) =>
  printedBy(
    `import(${JSON.stringify(join(import.meta.dirname, "..", "..", "src", "store", "sql.ts"))})
      .then((m) => m.closeDataDirectory(${JSON.stringify(dataDir)}))
      .then(() => console.log("closed"), (e) => console.log(e.message))`,
    { uid, typescript: true }
  )

/** The data directory open to everyone, as a careless volume mount leaves it. */
const openToEveryone = async () => {
  await mkdir(dataDir, { recursive: true })
  await chmod(join(dataDir, ".."), 0o755)
  await chmod(dataDir, 0o777)
}

const socketPath = () => join(dataDir, "socket", `.s.PGSQL.${process.pid}`)

/** While the database in `dataDir` is open: a login attempt on every TCP port this process listens on. */
const loginsWhileOpen = (dataDir: string) =>
  whileOpen(
    dataDir,
    Effect.flatMap(Effect.promise(listeningTcpPorts), (ports) =>
      Effect.forEach(ports, (port) => Effect.map(logsIn(port), (ok) => ({ port, ok })))
    )
  )

describe("the embedded database", () => {
  it.effect("listens on no TCP port: a login on every port this process listens on is refused", () =>
    Effect.map(loginsWhileOpen(dataDir), (logins) => expect(logins.filter((login) => login.ok)).toEqual([]))
  )

  it.effect("a database in memory listens on no TCP port either", () =>
    Effect.map(loginsWhileOpen("memory://"), (logins) =>
      expect(logins.filter((login) => login.ok)).toEqual([])
    )
  )

  it.effect("is served on a socket in DATA_DIR/socket, a directory of mode 0700, removed at close", () =>
    Effect.gen(function* () {
      const seen = yield* whileOpen(
        dataDir,
        Effect.promise(async () => ({
          directory: await stat(join(dataDir, "socket")),
          socket: await stat(socketPath())
        }))
      )
      expect(seen.directory.mode & 0o777).toBe(0o700)
      expect(seen.directory.uid).toBe(process.getuid?.())
      expect(seen.socket.isSocket()).toBe(true)
      const after = yield* Effect.promise(() => readdir(join(dataDir, "socket")))
      expect(after).toEqual([])
    })
  )

  it.effect("closes a socket directory that was left open to others, and replaces a stale socket", () =>
    Effect.gen(function* () {
      yield* Effect.promise(async () => {
        await mkdir(join(dataDir, "socket"), { recursive: true })
        await chmod(join(dataDir, "socket"), 0o777)
        // What a process killed before it closed its socket leaves behind.
        await writeFile(socketPath(), "")
      })
      const mode = yield* whileOpen(
        dataDir,
        Effect.promise(() => stat(join(dataDir, "socket")).then((s) => s.mode & 0o777))
      )
      expect(mode).toBe(0o700)
    })
  )

  it.effect("a DATA_DIR too deep for a socket path is served on a socket in a fresh 0700 directory", () =>
    Effect.gen(function* () {
      // A socket path over 103 bytes cannot be bound: DATA_DIR/socket would not do.
      const deep = join(root, "a-data-directory-whose-socket-path-would-not-fit-in-a-unix-socket-address")
      const seen = yield* whileOpen(
        deep,
        Effect.promise(async () => {
          const sockets: Array<string> = []
          for (const entry of await readdir(tmpdir())) {
            if (!entry.startsWith("fee-vault-db-")) continue
            const path = join(tmpdir(), entry, `.s.PGSQL.${process.pid}`)
            if (
              await stat(path).then(
                (s) => s.isSocket(),
                () => false
              )
            )
              sockets.push(join(tmpdir(), entry))
          }
          return Promise.all(
            sockets.map(async (directory) => ({ directory, mode: (await stat(directory)).mode }))
          )
        })
      )
      expect(seen).toHaveLength(1)
      expect((seen[0]?.mode ?? 0) & 0o777).toBe(0o700)
      const left = yield* Effect.promise(() =>
        stat(seen[0]?.directory ?? "").then(
          () => true,
          () => false
        )
      )
      expect(left).toBe(false)
    })
  )

  // Only root can start a process as another user; CI runs as root.
  it.runIf(process.getuid?.() === 0)(
    "another user's process cannot connect to the socket; the owner's can",
    () =>
      Effect.runPromise(
        Effect.gen(function* () {
          yield* Effect.promise(openToEveryone)
          const [owner, other] = yield* whileOpen(
            dataDir,
            Effect.promise(() =>
              Promise.all([connectFromProcess(socketPath()), connectFromProcess(socketPath(), 65534)])
            )
          )
          expect(owner).toBe("connected")
          expect(other).toBe("EACCES")
        })
      )
  )

  it.runIf(process.getuid?.() === 0)(
    "a DATA_DIR the service may write but does not own is refused naming DATA_DIR, even closed to others",
    async () => {
      const shared = join(root, "shared")
      await mkdir(shared, { recursive: true })
      await chmod(root, 0o755)
      // A volume of root's, writable by the service (user 65534) through its group: the group's
      // other members, and the owner, could read and write the database at any time.
      await chown(shared, 0, 65534)
      for (const mode of [0o770, 0o777]) {
        await chmod(shared, mode)
        expect(await closeAs(shared, 65534)).toMatch(
          /^DATA_DIR .*shared belongs to another user, so it cannot be closed to everyone else/
        )
      }
    }
  )

  it.runIf(process.getuid?.() === 0)(
    "another user cannot read or write the database's files: DATA_DIR is closed to 0700 at every start",
    () =>
      Effect.runPromise(
        Effect.gen(function* () {
          yield* Effect.promise(openToEveryone)
          const [mode, read, written] = yield* whileOpen(
            dataDir,
            Effect.promise(() =>
              Promise.all([
                stat(dataDir).then((s) => s.mode & 0o777),
                openFromProcess(join(dataDir, "PG_VERSION"), "r", 65534),
                openFromProcess(join(dataDir, "postgresql.auto.conf"), "a", 65534)
              ])
            )
          )
          expect(mode).toBe(0o700)
          expect(read).toBe("EACCES")
          expect(written).toBe("EACCES")
        })
      )
  )
})
