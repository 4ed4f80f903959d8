/**
 * A creator launches a token for someone who has never used the vault
 * (docs/getting-started.md "A creator's launch"):
 *
 *   1. `GET /v1/info` of every attestor deployment.json lists (one, or each member of a committee
 *      devnet): its address and the public key hints are sealed to;
 *   2. `POST /v1/commitment` with a messenger user's numeric id: the handle commitment;
 *   3. the escrow id computed from it, and the hint sealed to each attestor (one envelope each);
 *   4. the launch announced on the vault by the devnet's launcher (#0);
 *   5. each attestor indexes the launch and opens its envelope: the escrow now waits for the
 *      user's login (examples/recipient-login.ts).
 *
 *   npx tsx examples/creator-launch.ts
 */
import { attestorIndexed, call, loadDevnet, memberClients, runExample, show, step } from "./lib/devnet.js"
import { commitTo, freshUserId, launchTo } from "./lib/launch.js"

runExample("creator-launch", async () => {
  const file = loadDevnet()
  const members = await memberClients(file)
  const [attestor] = members
  if (attestor === undefined) throw new Error("deployment.json lists no attestor")

  step(
    `GET /v1/info of each attestor (${members.length}, threshold ${file.attestorThreshold}): who attests, and the keys hints are sealed to`
  )
  const hintPublicKeys = []
  for (const member of members) {
    const info = await call("GET /v1/info", member.info.info())
    show(
      "attestor",
      `${info.attestor}, hintPublicKey ${info.hintPublicKey}, login platforms ${info.platforms.join(" ")}`
    )
    hintPublicKeys.push(info.hintPublicKey)
  }

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
  const { id, block } = await launchTo(file, hintPublicKeys, commitment, "CRTR")
  show("launched in block", block)

  step("Wait for each attestor to index the launch and open its envelope (GET /v1/health)")
  for (const member of members) await attestorIndexed(member, block)
  show("indexed", `the escrow ${id} now waits for messenger user ${userId} to log in`)
})
