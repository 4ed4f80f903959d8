/**
 * Running a service process: logfmt logs, a one-line report of a bad setting or a failed start,
 * and a clean shutdown on SIGINT/SIGTERM (NodeRuntime interrupts the layers, which close the
 * server, the database and every background fiber).
 */
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import { Cause, Effect, Either, Layer, Logger, LogLevel, Option } from "effect"
import { describeChainError, isChainError } from "../chain/errors.js"
import { loadSettingsFile } from "../config/envFile.js"
import { configFailure } from "../config/settings.js"
import { safeText, serviceLogger } from "../logging.js"

const LOG_LEVELS = LogLevel.allLevels.map((level) => level.label.toLowerCase())

/** `LOG_LEVEL` (default `info`), or why it is refused. */
const logLevel = (): Either.Either<LogLevel.LogLevel, string> => {
  const given = (process.env.LOG_LEVEL ?? "info").toLowerCase()
  // "warning" as Effect's own WARNING level is spelled in its logs.
  const name = given === "warning" ? "warn" : given
  const level = LogLevel.allLevels.find((l) => l.label.toLowerCase() === name)
  return level === undefined
    ? Either.left(`LOG_LEVEL: expected one of ${LOG_LEVELS.join(", ")} (got "${given.slice(0, 40)}")`)
    : Either.right(level)
}

/** The listening socket's failure, by what an operator can do about it; none for anything else. */
const serveFailure = (error: unknown): string | undefined => {
  if (typeof error !== "object" || error === null || (error as { _tag?: unknown })._tag !== "ServeError")
    return undefined
  const cause = (error as { cause?: { code?: unknown; address?: unknown; port?: unknown } }).cause
  const where = `${String(cause?.address ?? process.env.HOST ?? "")}:${String(cause?.port ?? process.env.PORT ?? "")}`
  switch (cause?.code) {
    case "EADDRINUSE":
      return `port ${where} is already in use (PORT, HOST): stop whatever listens there or choose another port`
    case "EACCES":
      return `not allowed to listen on ${where} (PORT, HOST): choose a port above 1023 or grant the permission`
    case "EADDRNOTAVAIL":
      return `${where} is not an address of this machine (HOST)`
    default:
      return `cannot listen on ${where} (PORT, HOST): ${typeof cause?.code === "string" ? cause.code : "unknown reason"}`
  }
}

/** The one line printed when start-up fails: a bad setting by name, or the failure's kind. */
const startupFailure = (service: string, cause: Cause.Cause<unknown>): string =>
  Option.match(configFailure(cause), {
    onSome: (line) => `${service}: invalid settings: ${line}`,
    onNone: () => {
      const error = Cause.squash(cause)
      // A chain error by its class, anything else on one line without URLs: RPC_URL may hold a key.
      const text =
        serveFailure(error) ??
        (isChainError(error)
          ? describeChainError(error)
          : error instanceof Error
            ? `${error.name}: ${safeText(error.message)}`
            : typeof error === "object" && error !== null && "_tag" in error
              ? String((error as { _tag: unknown })._tag)
              : "unknown failure")
      return `${service}: failed to start: ${text}`
    }
  })

/**
 * The settings' refusal beside a bad `LOG_LEVEL`, so the one line names every bad setting at once:
 * `settings` is the service's loader, run with no logger (nothing has started).
 */
const otherRefusals = async (settings: Effect.Effect<unknown, unknown>): Promise<string | undefined> => {
  const exit = await Effect.runPromiseExit(settings.pipe(Effect.provide(Logger.remove(Logger.defaultLogger))))
  return exit._tag === "Failure" ? Option.getOrUndefined(configFailure(exit.cause)) : undefined
}

export const runService = <E>(
  service: string,
  layer: Layer.Layer<never, E, never>,
  settings: Effect.Effect<unknown, unknown> = Effect.void
): void => {
  const file = loadSettingsFile()
  if (file.refusal !== undefined) {
    process.stderr.write(`${service}: invalid settings: ${file.refusal}\n`)
    process.exitCode = 1
    return
  }
  const level = logLevel()
  if (Either.isLeft(level)) {
    const refused = level.left
    process.exitCode = 1
    void otherRefusals(settings).then((others) =>
      process.stderr.write(
        `${service}: invalid settings: ${others === undefined ? refused : `${refused}; ${others}`}\n`
      )
    )
    return
  }
  const program = Effect.zipRight(
    file.read === undefined
      ? Effect.void
      : Effect.logInfo(`settings from ${file.read}; the environment's own win over it`),
    Layer.launch(layer)
  ).pipe(
    Effect.catchAllCause((cause) =>
      Cause.isInterruptedOnly(cause)
        ? Effect.void
        : Effect.sync(() => {
            process.stderr.write(`${startupFailure(service, cause)}\n`)
            process.exitCode = 1
          })
    ),
    // Never a cause or a URL in a line (src/logging.ts).
    Effect.provide(serviceLogger),
    Logger.withMinimumLogLevel(level.right)
  )
  NodeRuntime.runMain(program, { disableErrorReporting: true, disablePrettyLogger: true })
}
