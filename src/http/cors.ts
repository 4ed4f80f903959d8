/**
 * Cross-origin requests from browser pages (`CORS_ALLOWED_ORIGINS`, docs/operations.md "HTTP
 * behaviour"): off unless origins are listed. A request whose `Origin` is listed gets
 * `Access-Control-Allow-Origin` naming it on whatever answer it gets; its preflight is answered
 * 204 by the server itself, before routing, rate limits, metrics or the access log. No
 * credentials: the services use none (sessions travel in bodies), so cookies are never allowed.
 * An origin not listed gets no CORS header at all, and its preflight is routed as any `OPTIONS`
 * (405): the browser then refuses to send the request.
 */
import type { IncomingMessage, ServerResponse } from "node:http"

/** The request headers a page may send: JSON bodies and a paid lookup's payment. */
const ALLOWED_HEADERS = "content-type, payment-signature"
/** Answer headers a page may read beyond the safelisted ones. */
const EXPOSED_HEADERS = "retry-after, payment-required, payment-response"
const PREFLIGHT_MAX_AGE_SECONDS = "600"

/**
 * An origin as a browser sends it: `scheme://host[:port]`, no path. Undefined when `text` is not
 * an http(s) origin (a path, query, fragment or user info), so a setting can name what is wrong.
 */
export const corsOrigin = (text: string): string | undefined => {
  try {
    const url = new URL(text)
    if (url.protocol !== "http:" && url.protocol !== "https:") return undefined
    if (url.username !== "" || url.password !== "" || url.search !== "" || url.hash !== "") return undefined
    if (url.pathname !== "/" || /\/$/.test(text)) return undefined
    return url.origin
  } catch {
    return undefined
  }
}

/**
 * Adds `Origin` to whatever `Vary` the answer goes out with: a route's own (a gzip-able body's
 * `Accept-Encoding`) is written with `writeHead`, which replaces a header set before it.
 */
const varyOnOrigin = (response: ServerResponse): void => {
  response.setHeader("vary", "Origin")
  const writeHead = response.writeHead
  response.writeHead = ((status: number, ...rest: Array<unknown>) => {
    const headers = rest.at(-1)
    if (typeof headers === "object" && headers !== null && !Array.isArray(headers)) {
      const key = Object.keys(headers).find((name) => name.toLowerCase() === "vary")
      const vary = key === undefined ? undefined : String((headers as Record<string, unknown>)[key])
      // A copy: the headers may be a cached answer's, kept for the next request.
      if (key !== undefined && !/\borigin\b/i.test(vary ?? ""))
        rest[rest.length - 1] = { ...headers, [key]: `${vary}, Origin` }
    }
    return (writeHead as (...all: Array<unknown>) => ServerResponse).call(response, status, ...rest)
  }) as ServerResponse["writeHead"]
}

/**
 * The server's CORS step for `origins`: adds the allow headers to the answer of a listed origin's
 * request, and answers its preflight (true: answered here); a preflight that comes with a body is
 * handed to `refuse`, which answers it and closes the connection rather than read the body past
 * every body limit. Nothing at all without origins.
 */
export const corsStep = (
  origins: ReadonlyArray<string>,
  refuse: (response: ServerResponse, message: string) => void
): ((request: IncomingMessage, response: ServerResponse) => boolean) => {
  const allowed = new Set(origins)
  if (allowed.size === 0) return () => false
  return (request, response) => {
    const origin = request.headers.origin
    // Every answer may differ by Origin: caches must keep them apart.
    varyOnOrigin(response)
    if (origin === undefined || !allowed.has(origin)) return false
    response.setHeader("access-control-allow-origin", origin)
    response.setHeader("access-control-expose-headers", EXPOSED_HEADERS)
    if (request.method !== "OPTIONS" || request.headers["access-control-request-method"] === undefined)
      return false
    if (
      request.headers["transfer-encoding"] !== undefined ||
      Number(request.headers["content-length"] ?? 0) > 0
    ) {
      refuse(response, "a preflight request has no body")
      return true
    }
    response.writeHead(204, {
      "access-control-allow-methods": "GET, HEAD, POST",
      "access-control-allow-headers": ALLOWED_HEADERS,
      "access-control-max-age": PREFLIGHT_MAX_AGE_SECONDS,
      "content-length": "0"
    })
    response.end()
    return true
  }
}
