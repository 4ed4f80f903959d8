/**
 * Running a service process: logfmt logs, a one-line report of a bad setting or a failed start,
 * and a clean shutdown on SIGINT/SIGTERM (NodeRuntime interrupts the layers, which close the
 * server, the database and every background fiber).
 */
import { NodeRuntime } from "@effect/platform-node"
import { Cause, Effect, Layer, Logger, LogLevel, Option } from "effect"
import { configFailure } from "../config/settings.js"

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
      const text =
        error instanceof Error
          ? `${error.name}: ${error.message}`
          : typeof error === "object" && error !== null && "_tag" in error
            ? String((error as { _tag: unknown })._tag)
            : String(error)
      return `${service}: failed to start: ${text.split("\n")[0]}`
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
    Effect.provide(Logger.logFmt),
    Logger.withMinimumLogLevel(logLevel())
  )
  NodeRuntime.runMain(program, { disableErrorReporting: true, disablePrettyLogger: true })
}
