/**
 * A creator's side of a launch, shared by creator-launch.ts and recipient-login.ts: a commitment
 * to a user from the attestor, the hint sealed to every committee member's hint key, and the
 * vault's `launch` sent by the devnet's launcher (#0).
 */
import { Schema } from "effect"
import { type Hex, parseEventLogs } from "viem"
import { feeVaultAbi, testTokenAbi } from "../../contracts/abi.js"
import { loadArtifacts } from "../../contracts/build.js"
import { CommitmentRequest, type CommitmentResponse, type Platform } from "../../schema/attestor.js"
import { computeId, handleCommitment, userIdHash, ZERO_ADDRESS } from "../../schema/ids.js"
import { type HintPlaintext, sealBeneficiaryHint } from "../../src/attestor/hints/hintEnvelopes.js"
import type { AttestorClient } from "../../src/client.js"
import { call, type DevnetFile, devnetAccount, devnetClients, mined, show } from "./devnet.js"

/** The devnet's launcher: only this account may call `launch` (docs/protocol.md §9). */
export const LAUNCHER = 0

/** A user id nobody else uses, so an example can run again on the same devnet. */
export const freshUserId = (): string => String(2_000_000_000 + Math.floor(Math.random() * 1_000_000_000))

/** `POST /v1/commitment` for a numeric user id: free, no lookup (docs/protocol.md §10). */
export const commitTo = async (
  attestor: AttestorClient,
  platform: Platform,
  userId: string
): Promise<CommitmentResponse> => {
  const payload = Schema.decodeUnknownSync(CommitmentRequest)({ platform, userId })
  const commitment = await call(
    "POST /v1/commitment",
    attestor.commitments.commitment({ payload, headers: {} })
  )
  // docs/protocol.md §2: anyone can check the commitment from its parts; only the salt is the
  // attestor's (an HMAC of the user id under its pepper), so only it can recognize the user.
  const recomputed = handleCommitment(
    commitment.platformId,
    userIdHash(commitment.userId),
    commitment.attestorSalt,
    commitment.nonce
  )
  if (recomputed !== commitment.handleCommitment) throw new Error("the commitment does not match its parts")
  return commitment
}

/**
 * The escrow id of a commitment (kind 2, no fallback), its hint sealed to each of
 * `hintPublicKeys` (one per committee member), and a launch of a fresh test token announced to
 * the vault; the block of the launch.
 */
export const launchTo = async (
  file: DevnetFile,
  hintPublicKeys: ReadonlyArray<Hex>,
  commitment: CommitmentResponse,
  symbol: string
): Promise<{ readonly id: Hex; readonly block: number }> => {
  // docs/protocol.md §2: a kind-2 id commits to the handle commitment and the fallback.
  const id = computeId(2, commitment.handleCommitment, ZERO_ADDRESS, 0n)
  // docs/protocol.md §6: the hint tells the attestor whom the id is for; sealed, only it can read it.
  // One envelope per member of the committee (deployment.json's `attestors`), so each member's
  // hint index finds the escrow; hints are threshold 1: any one envelope opens the whole hint.
  const hint: HintPlaintext = {
    platformId: commitment.platformId,
    userId: commitment.userId,
    nonce: commitment.nonce,
    attestorSalt: commitment.attestorSalt
  }
  const beneficiaryHint = sealBeneficiaryHint(hintPublicKeys, hint)
  show("sealed to members", hintPublicKeys.length)
  show("escrow id", id)
  show("beneficiaryHint bytes", (beneficiaryHint.length - 2) / 2)

  const { publicClient, wallet } = devnetClients(file)
  const launcher = wallet(devnetAccount(LAUNCHER))
  // A launch platform creates the token and calls `launch` in one go; here the launcher deploys a
  // test token and then announces it.
  const artifacts = await loadArtifacts()
  const deployed = await mined(
    publicClient,
    await launcher.deployContract({
      abi: testTokenAbi,
      bytecode: artifacts.TestToken.bytecode,
      args: [`${symbol} (example)`, symbol, 18]
    })
  )
  const token = deployed.contractAddress
  if (token === null || token === undefined) throw new Error("the token was not deployed")
  show("token", token)
  const receipt = await mined(
    publicClient,
    await launcher.writeContract({
      address: file.vault,
      abi: feeVaultAbi,
      functionName: "launch",
      args: [token, id, beneficiaryHint]
    })
  )
  const [launched] = parseEventLogs({ abi: feeVaultAbi, logs: receipt.logs, eventName: "TokenLaunched" })
  show("TokenLaunched", `token ${launched?.args.token}, beneficiaryId ${launched?.args.beneficiaryId}`)
  return { id, block: Number(receipt.blockNumber) }
}
