/**
 * Baseline: a raw `node:http` server answering fixed bytes, the floor of any Node HTTP service.
 *
 *   PORT=… BODY_FILE=… [GZIP_FILE=…] node --import tsx bench/baselines/raw.ts
 *
 * A request body is read in full before answering, as a JSON endpoint must; `accept-encoding: gzip`
 * gets GZIP_FILE when one is given.
 */
import { readFileSync } from "node:fs"
import http from "node:http"

const body = readFileSync(process.env.BODY_FILE!)
const gzip = process.env.GZIP_FILE === undefined ? undefined : readFileSync(process.env.GZIP_FILE)

const server = http.createServer((request, response) => {
  request.resume()
  request.on("end", () => {
    const zipped = gzip !== undefined && /gzip/.test(request.headers["accept-encoding"] ?? "")
    const bytes = zipped ? gzip : body
    response.writeHead(200, {
      "content-type": "application/json",
      "content-length": bytes.length,
      ...(zipped ? { "content-encoding": "gzip" } : {})
    })
    response.end(bytes)
  })
})
server.keepAliveTimeout = 5_000
server.listen(Number(process.env.PORT), "127.0.0.1")
process.on("SIGTERM", () => server.close(() => process.exit(0)))
