/**
 * What every login shares (docs/attestor.md §3, §4): the refusal of a platform this instance is not
 * configured for, and the answer that carries a new session. The logins themselves are services:
 * `MessengerLogins`, `OAuthLogins` and `FedsocialLogins`.
 */
import type { Platform, SessionResponse } from "../../../schema/attestor.js"
import type { CreatedSession } from "./SessionStore.js"

/** The refusal of a login this instance is not configured for (400 `unsupported`). */
export const loginNotConfigured = (platform: Platform | string) =>
  `${platform} login is not configured on this attestor`

/** The answer to a login: the token once, and what it stands for. */
export const sessionResponse = (created: CreatedSession): SessionResponse => ({
  session: created.token,
  platform: created.platform,
  userId: created.userId,
  stealthOwner: created.stealthOwner,
  ids: created.ids,
  expiresAt: BigInt(created.expiresAt)
})
