/**
 * Web3 Secret Storage v3 keystores (src/keys/keystore.ts) and the key tool (src/bin/keys.ts,
 * `npm run keys`), run as its own process the way an operator runs it:
 *
 * - the specification's published test vectors (scrypt and pbkdf2, written by an independent
 *   implementation) open to their key and address;
 * - a keystore the tool writes opens, with Node's own scrypt and AES-128-CTR (a second
 *   implementation), to the key whose address the tool printed, and `address` prints it too;
 * - a wrong passphrase is refused; no output ever holds the key or the passphrase.
 */
import { spawn } from "node:child_process"
import { createDecipheriv, scryptSync } from "node:crypto"
import { mkdtempSync, readFileSync, statSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { type Hex, keccak256 } from "viem"
import { privateKeyToAddress } from "viem/accounts"
import { describe, expect, it } from "vitest"
import { decryptKeystore, encryptKeystore, KeystoreError } from "../../src/keys/keystore.js"
import { localSigner, signTypedDataWith } from "../../src/keys/Signer.js"
import { repoRoot } from "../support/process.js"

/** The specification's test vectors: password "testpassword", this key. */
const SPEC_KEY = "0x7a28b5ba57c53603b0b07b56bba752f7784bf506fa95edc395f5cf6c7514fe9d"
const SPEC_ADDRESS = "0x008AeEda4D805471dF9b2A5B0f38A0C3bCBA786b"
const fixture = (kdf: string) =>
  readFileSync(join(repoRoot, "test", "keys", "fixtures", `web3-secret-storage-${kdf}.json`), "utf8")

const dir = mkdtempSync(join(tmpdir(), "keystore-"))
let files = 0
const file = (text?: string, mode = 0o600): string => {
  const path = join(dir, `f${files++}`)
  if (text !== undefined) writeFileSync(path, text, { mode })
  return path
}

/** Runs the key tool; its exit code and both outputs. */
const keys = (args: ReadonlyArray<string>, stdin?: string) =>
  new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => {
    const child = spawn(process.execPath, ["--import", "tsx", "src/bin/keys.ts", ...args], {
      cwd: repoRoot,
      env: { PATH: process.env.PATH, HOME: process.env.HOME },
      stdio: ["pipe", "pipe", "pipe"]
    })
    let stdout = ""
    let stderr = ""
    child.stdout.setEncoding("utf8").on("data", (c: string) => {
      stdout += c
    })
    child.stderr.setEncoding("utf8").on("data", (c: string) => {
      stderr += c
    })
    child.stdin.end(stdin ?? "")
    child.once("exit", (code) => resolve({ code, stdout, stderr }))
  })

/** Opens a v3 scrypt keystore with Node's crypto (not the code under test): its key. */
const openWithNode = (text: string, passphrase: string): Hex => {
  const { crypto } = JSON.parse(text) as {
    crypto: {
      ciphertext: string
      cipherparams: { iv: string }
      kdfparams: { n: number; r: number; p: number; dklen: number; salt: string }
      mac: string
    }
  }
  const { n, r, p, dklen, salt } = crypto.kdfparams
  const derived = scryptSync(passphrase, Buffer.from(salt, "hex"), dklen, {
    N: n,
    r,
    p,
    maxmem: 512 * 1024 * 1024
  })
  const ciphertext = Buffer.from(crypto.ciphertext, "hex")
  const mac = keccak256(Buffer.concat([derived.subarray(16, 32), ciphertext])).slice(2)
  if (mac !== crypto.mac) throw new Error("MAC mismatch")
  const decipher = createDecipheriv(
    "aes-128-ctr",
    derived.subarray(0, 16),
    Buffer.from(crypto.cipherparams.iv, "hex")
  )
  return `0x${Buffer.concat([decipher.update(ciphertext), decipher.final()]).toString("hex")}`
}

// scrypt at geth's standard cost takes seconds per call, more on a busy machine.
const SECRETS_TIMEOUT = 300_000

describe("keystores", () => {
  it("the specification's scrypt and pbkdf2 vectors open to their key", { timeout: SECRETS_TIMEOUT }, () => {
    for (const kdf of ["scrypt", "pbkdf2"]) {
      const key = decryptKeystore(fixture(kdf), "testpassword")
      expect(key).toBe(SPEC_KEY)
      expect(privateKeyToAddress(key)).toBe(SPEC_ADDRESS)
    }
  })

  it("refuses a wrong passphrase and a tampered file", { timeout: SECRETS_TIMEOUT }, () => {
    expect(() => decryptKeystore(fixture("pbkdf2"), "testpassword2")).toThrow(
      expect.objectContaining({ reason: "wrong-passphrase" })
    )
    const tampered = fixture("pbkdf2").replace('"5318b4d5', '"5318b4d6')
    expect(() => decryptKeystore(tampered, "testpassword")).toThrow(KeystoreError)
    expect(() => decryptKeystore('{"version":3,"crypto":{"cipher":"aes-256-gcm"}}', "x")).toThrow(
      expect.objectContaining({ reason: "unsupported" })
    )
    expect(() => decryptKeystore("not json", "x")).toThrow(expect.objectContaining({ reason: "malformed" }))
  })

  it("what it writes, Node's scrypt and AES open to the same key", () => {
    const key = "0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d"
    const text = JSON.stringify(encryptKeystore(key, "correct horse", { scryptN: 1024 }))
    expect(openWithNode(text, "correct horse")).toBe(key)
    expect(decryptKeystore(text, "correct horse")).toBe(key)
  })

  it("a signer's typed-data signature is viem's, byte for byte", async () => {
    const { privateKeyToAccount } = await import("viem/accounts")
    const definition = {
      domain: { name: "T", version: "1", chainId: 1 },
      types: { M: [{ name: "x", type: "uint256" }] },
      primaryType: "M",
      message: { x: 7n }
    } as const
    const { Effect } = await import("effect")
    expect(await Effect.runPromise(signTypedDataWith(localSigner(SPEC_KEY), definition))).toBe(
      await privateKeyToAccount(SPEC_KEY).signTypedData(definition)
    )
  })
})

describe("the key tool", () => {
  it("new writes a keystore, private to its owner, that opens to the address it prints", {
    timeout: SECRETS_TIMEOUT
  }, async () => {
    const passphrase = "a passphrase nobody prints"
    const passphraseFile = file(`${passphrase}\n`)
    const keystore = file()
    // The default cost, as an operator gets it.
    const made = await keys(["new", "--keystore", keystore, "--passphrase-file", passphraseFile])
    expect(made.code, made.stderr).toBe(0)
    const address = made.stdout.trim()
    expect(address).toMatch(/^0x[0-9a-fA-F]{40}$/)
    expect(statSync(keystore).mode & 0o777).toBe(0o600)
    const text = readFileSync(keystore, "utf8")
    expect(JSON.parse(text).crypto.kdfparams.n).toBe(262_144)
    // One trailing newline of the passphrase file is not part of the passphrase.
    const key = openWithNode(text, passphrase)
    expect(privateKeyToAddress(key)).toBe(address)
    expect(made.stdout + made.stderr).not.toContain(key.slice(2))
    const shown = await keys(["address", "--keystore", keystore, "--passphrase-file", passphraseFile])
    expect(shown).toMatchObject({ code: 0, stdout: `${address}\n`, stderr: "" })
    expect((await keys(["address", "--keystore", keystore])).stdout).toBe(`${address}\n`)
    // Never over an existing file.
    const again = await keys(["new", "--keystore", keystore, "--passphrase-file", passphraseFile])
    expect(again.code).toBe(1)
    expect(again.stderr).toMatch(/^keys: --keystore: .* exists; choose another file/)
    expect(readFileSync(keystore, "utf8")).toBe(text)
  })

  it("import reads the key from standard input or a file, never an argument", {
    timeout: SECRETS_TIMEOUT
  }, async () => {
    const key = "0x5de4111afa1a4b94908f83103eb1f1706367c2e68ca870fc3fb9a804cdab365a"
    const passphraseFile = file("import me\n")
    const fromStdin = file()
    const viaStdin = await keys(
      ["import", "--keystore", fromStdin, "--passphrase-file", passphraseFile, "--scrypt-n", "1024"],
      `${key}\n`
    )
    expect(viaStdin).toMatchObject({ code: 0, stdout: `${privateKeyToAddress(key)}\n`, stderr: "" })
    expect(openWithNode(readFileSync(fromStdin, "utf8"), "import me")).toBe(key)
    const fromFile = file()
    const viaFile = await keys([
      "import",
      "--keystore",
      fromFile,
      "--passphrase-file",
      passphraseFile,
      "--key-file",
      file(key.slice(2)),
      "--scrypt-n",
      "1024"
    ])
    expect(viaFile.stdout).toBe(`${privateKeyToAddress(key)}\n`)
    expect(decryptKeystore(readFileSync(fromFile, "utf8"), "import me")).toBe(key)
    // A key given as an argument is refused without being repeated.
    const asArgument = await keys(["import", "--keystore", file(), "--passphrase-file", passphraseFile, key])
    expect(asArgument.code).toBe(1)
    expect(asArgument.stdout + asArgument.stderr).not.toContain(key.slice(2))
    const notAKey = await keys(
      ["import", "--keystore", file(), "--passphrase-file", passphraseFile],
      "0x1234\n"
    )
    expect(notAKey).toMatchObject({ code: 1, stderr: "keys: the key is not 32 bytes of hex\n" })
  })

  it("address opens another writer's keystore, and refuses a wrong passphrase in one line", {
    timeout: SECRETS_TIMEOUT
  }, async () => {
    const spec = file(fixture("pbkdf2"))
    const right = await keys(["address", "--keystore", spec, "--passphrase-file", file("testpassword")])
    expect(right).toMatchObject({ code: 0, stdout: `${SPEC_ADDRESS}\n` })
    const wrong = await keys(["address", "--keystore", spec, "--passphrase-file", file("testpassword!\n")])
    expect(wrong).toMatchObject({
      code: 1,
      stdout: "",
      stderr: "keys: --passphrase-file: the passphrase does not open the keystore\n"
    })
    // The spec's file names no address: without the passphrase there is nothing to print.
    const unnamed = await keys(["address", "--keystore", spec])
    expect(unnamed.stderr).toMatch(/names no address; give --passphrase-file/)
  })
})
