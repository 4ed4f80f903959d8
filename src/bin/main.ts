/**
 * Running a service process: logfmt logs, a one-line report of a bad setting or a failed start,
 * and a clean shutdown on SIGINT/SIGTERM (NodeRuntime interrupts the layers, which close the
 * server, the database and every background fiber).
 */
import { NodeRuntime } from "@effect/platform-node"
import { Cause, Effect, Layer, Logger, LogLevel, Option } from "effect"
import { describeChainError, isChainError } from "../chain/errors.js"
import { configFailure } from "../config/settings.js"
import { safeText, serviceLogger } from "../logging.js"

const logLevel = (): LogLevel.LogLevel => {
  const name = (process.env.LOG_LEVEL ?? "info").toLowerCase()
  return LogLevel.allLevels.find((l) => l.label.toLowerCase() === name) ?? LogLevel.Info
}

/** The one line printed when start-up fails: a bad setting by name, or the failure's kind. */
const startupFailure = (service: string, cause: Cause.Cause<unknown>): string =>
  Option.match(configFailure(cause), {
    onSome: (line) => `${service}: invalid settings: ${line}`,
    onNone: () => {
      const error = Cause.squash(cause)
      // A chain error by its class, anything else on one line without URLs: RPC_URL may hold a key.
      const text = isChainError(error)
        ? describeChainError(error)
        : error instanceof Error
          ? `${error.name}: ${safeText(error.message)}`
          : typeof error === "object" && error !== null && "_tag" in error
            ? String((error as { _tag: unknown })._tag)
            : "unknown failure"
      return `${service}: failed to start: ${text}`
    }
  })

export const runService = <E>(service: string, layer: Layer.Layer<never, E, never>): void => {
  const program = Layer.launch(layer).pipe(
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
    Logger.withMinimumLogLevel(logLevel())
  )
  NodeRuntime.runMain(program, { disableErrorReporting: true, disablePrettyLogger: true })
}
