/**
 * Where a login may send the browser back (docs/protocol.md §10 "Redirects"; RFC 9700 §4.1.3):
 * a `redirect` must equal an entry of `REDIRECT_ALLOWLIST` in scheme, host, port and path, with no
 * user info, query or fragment of its own. An entry given without a path means `/`.
 *
 * Matching compares the WHATWG parse of the redirect with the entry, and what the login keeps (and
 * the callback's `Location` is built from) is the entry, never the string as sent: a redirect such
 * as `http://localhost:5173\@evil.com`, whose host other RFC 3986 parsers read as `evil.com`, can
 * only ever lead to an entry the operator wrote.
 */

/** An allow-list entry or a redirect in the one form they are compared in: `scheme://host[:port]/path`. */
const canonical = (url: URL): string => `${url.protocol}//${url.host}${url.pathname}`

/**
 * The canonical form of an allow-list entry, or why it cannot be one: an http(s) URL without user
 * info, query or fragment.
 */
export const allowListEntry = (entry: string): { readonly entry: string } | { readonly refusal: string } => {
  if (!URL.canParse(entry)) return { refusal: `"${entry}" is not an http(s) URL` }
  const url = new URL(entry)
  if (url.protocol !== "https:" && url.protocol !== "http:")
    return { refusal: `"${entry}" is not an http(s) URL` }
  if (
    url.username !== "" ||
    url.password !== "" ||
    url.search !== "" ||
    url.hash !== "" ||
    /[?#]/.test(entry)
  )
    return { refusal: `"${entry}" has user info, a query or a fragment` }
  return { entry: canonical(url) }
}

/**
 * The allow-list entry `redirect` equals, or none. A redirect with user info, a query or a
 * fragment (even an empty one) matches nothing.
 */
export const matchRedirect = (allowList: ReadonlySet<string>, redirect: string): string | undefined => {
  if (/[?#]/.test(redirect) || !URL.canParse(redirect)) return undefined
  const url = new URL(redirect)
  if (url.username !== "" || url.password !== "") return undefined
  const form = canonical(url)
  return allowList.has(form) ? form : undefined
}

export const REDIRECT_REFUSED =
  "redirect: not on this attestor's allow-list (scheme, host, port and path must equal an entry, with no query or fragment)"
