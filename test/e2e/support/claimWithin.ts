/** A client that waits a bounded time for a relayer's answer to a claim. */
import type { Hex } from "viem"

export interface ClaimAnswer {
  readonly status: number | "no answer"
  readonly txHash?: Hex
  readonly code?: string
  readonly error?: string
}

/** Posts `body` to `<base>/v1/claim`, giving up after `ms`: "no answer" then. */
export const claimWithin = async (base: string, body: string, ms: number): Promise<ClaimAnswer> => {
  try {
    const res = await fetch(`${base}/v1/claim`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body,
      signal: AbortSignal.timeout(ms)
    })
    const json = (await res.json()) as { txHash?: Hex; code?: string; error?: string }
    return { status: res.status, ...json }
  } catch {
    return { status: "no answer" }
  }
}
