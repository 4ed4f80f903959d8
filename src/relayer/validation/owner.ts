/** Whose signature an owner-signed request must carry. */
import { Effect, Option } from "effect"
import type { Address } from "viem"
import { BadRequest, InvalidSignature, NotFound } from "../../../schema/errors.js"
import { ZERO_ADDRESS } from "../../../schema/ids.js"
import type { Registration } from "../../../schema/relayer.js"
import type { AccountSnapshot } from "../AccountReader.js"

/**
 * The registering owner, else the registered one. A handle account has no owner until a bind
 * finalizes, so nobody can sign for it yet; an unregistered account without a registration is
 * unknown, and a registration of an account that exists would only make the vault revert.
 */
export const expectedOwner = (
  register: Registration | undefined,
  snapshot: AccountSnapshot
): Effect.Effect<Address, NotFound | InvalidSignature | BadRequest> => {
  // Made only when refused: an error's construction (and its stack) is not free.
  const noOwner = () =>
    new InvalidSignature({
      message: "a handle account has no owner until a bind finalizes, so no signature can be valid"
    })
  if (register !== undefined) {
    if (Option.isSome(snapshot.account))
      return Effect.fail(new BadRequest({ message: "the account is already registered; leave out register" }))
    return register.kind === 1 ? Effect.succeed(register.owner) : Effect.fail(noOwner())
  }
  return Option.match(snapshot.account, {
    onNone: () =>
      Effect.fail(
        new NotFound({ message: "the account is not registered; send its registration in register" })
      ),
    onSome: (account) =>
      account.owner === ZERO_ADDRESS ? Effect.fail(noOwner()) : Effect.succeed(account.owner)
  })
}
