/**
 * A creator launches a token for someone who has never used the vault
 * (docs/getting-started.md "A creator's launch"):
 *
 *   1. `GET /v1/info`: the attestor's address and the public key hints are sealed to;
 *   2. `POST /v1/commitment` with a messenger user's numeric id: the handle commitment;
 *   3. the escrow id computed from it, and the hint sealed to the attestor;
 *   4. the launch announced on the vault by the devnet's launcher (#0);
 *   5. the attestor indexes the launch and opens the hint: the escrow now waits for the user's
 *      login (examples/recipient-login.ts).
 *
 *   npx tsx examples/creator-launch.ts
 */
import { attestorIndexed, call, loadDevnet, runExample, serviceClients, show, step } from "./lib/devnet.js"
import { commitTo, freshUserId, launchTo } from "./lib/launch.js"

runExample("creator-launch", async () => {
  const file = loadDevnet()
  const { attestor } = await serviceClients(file)

  step("GET /v1/info: who attests, and the key hints are sealed to")
  const info = await call("GET /v1/info", attestor.info.info())
  show("attestor", info.attestor)
  show("hintPublicKey", info.hintPublicKey)
  show("login platforms", info.platforms)

  // A messenger user id is a number the creator already knows (no lookup, so free).
  const userId = freshUserId()
  step(`POST /v1/commitment for messenger user ${userId}`)
  const commitment = await commitTo(attestor, "messenger", userId)
  show("platformId", commitment.platformId)
  show("userIdHash", commitment.userIdHash)
  show("nonce", commitment.nonce)
  show("attestorSalt", commitment.attestorSalt)
  show(
    "handleCommitment = keccak256(abi.encode(platformId, userIdHash, attestorSalt, nonce))",
    commitment.handleCommitment
  )

  step("Compute the escrow id, seal the hint and launch (from account #0, the devnet's launcher)")
  const { id, block } = await launchTo(file, info.hintPublicKey, commitment, "CRTR")
  show("launched in block", block)

  step("Wait for the attestor to index the launch and open its hint (GET /v1/health)")
  await attestorIndexed(attestor, block)
  show("indexed", `the escrow ${id} now waits for messenger user ${userId} to log in`)
})
