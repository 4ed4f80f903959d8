/**
 * The key tool (docs/operations.md "Keys"): `npm run keys -- <command>`.
 *
 * - `new --keystore FILE --passphrase-file FILE`: a new random key, written encrypted; prints its address.
 * - `import --keystore FILE --passphrase-file FILE [--key-file FILE]`: a hex key read from the
 *   file, or from standard input without one (never an argument, which `ps` and shell histories
 *   show), written encrypted; prints its address.
 * - `address --keystore FILE [--passphrase-file FILE]`: the keystore's address; with the
 *   passphrase, the address of the key it opens to, else the address the file names.
 *
 * `--scrypt-n N` sets the scrypt cost of a new file (default geth's 262144). Nothing prints a key
 * or a passphrase; a refusal is one line on standard error and exit status 1.
 */
import { readFileSync, writeFileSync } from "node:fs"
import { generatePrivateKey, privateKeyToAddress } from "viem/accounts"
import { readSecretFile } from "../config/secrets.js"
import {
  decryptKeystore,
  encryptKeystore,
  KeystoreError,
  keystoreAddress,
  STANDARD_SCRYPT_N
} from "../keys/keystore.js"

const USAGE =
  "usage: keys new --keystore FILE --passphrase-file FILE [--scrypt-n N]\n" +
  "       keys import --keystore FILE --passphrase-file FILE [--key-file FILE] [--scrypt-n N]  (the hex key from the file, else standard input)\n" +
  "       keys address --keystore FILE [--passphrase-file FILE]"

class Refusal extends Error {}

const FLAGS = ["--keystore", "--passphrase-file", "--key-file", "--scrypt-n"] as const
type Flag = (typeof FLAGS)[number]

/** `--name value` pairs; anything else is refused (a key given as an argument above all). */
const parseFlags = (args: ReadonlyArray<string>): Partial<Record<Flag, string>> => {
  const flags: Partial<Record<Flag, string>> = {}
  for (let i = 0; i < args.length; i += 2) {
    const name = args[i] as Flag
    const value = args[i + 1]
    // Never echo an unknown argument: it may be a key pasted in the wrong place.
    if (!FLAGS.includes(name)) throw new Refusal(`unknown argument at position ${i + 2}\n${USAGE}`)
    if (value === undefined || value.startsWith("--")) throw new Refusal(`${name} needs a value`)
    flags[name] = value
  }
  return flags
}

const required = (flags: Partial<Record<Flag, string>>, name: Flag): string => {
  const value = flags[name]
  if (value === undefined) throw new Refusal(`${name} is required\n${USAGE}`)
  return value
}

const passphraseOf = (path: string): string => {
  const read = readSecretFile("--passphrase-file", path)
  if (read._tag === "Left") throw new Refusal(`--passphrase-file: cannot read ${path}`)
  if (read.right.length === 0) throw new Refusal("--passphrase-file: the passphrase is empty")
  return read.right
}

const scryptNOf = (flags: Partial<Record<Flag, string>>): number => {
  const text = flags["--scrypt-n"]
  if (text === undefined) return STANDARD_SCRYPT_N
  const n = Number(text)
  if (!Number.isSafeInteger(n) || n < 1024 || n > 1 << 20 || (n & (n - 1)) !== 0)
    throw new Refusal("--scrypt-n: expected a power of two from 1024 to 1048576")
  return n
}

/** Writes a new keystore file, never over an existing one, readable by its owner only. */
const writeKeystore = (path: string, key: `0x${string}`, passphrase: string, scryptN: number) => {
  const json = JSON.stringify(encryptKeystore(key, passphrase, { scryptN }), null, 2)
  try {
    writeFileSync(path, `${json}\n`, { flag: "wx", mode: 0o600 })
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code
    throw new Refusal(
      code === "EEXIST"
        ? `--keystore: ${path} exists; choose another file (a keystore is never overwritten)`
        : `--keystore: cannot write ${path} (${code ?? "unwritable"})`
    )
  }
}

/** A hex private key from text: one line, 32 bytes, with or without 0x. */
const parseKey = (text: string): `0x${string}` => {
  const trimmed = text.trim()
  const hex = trimmed.startsWith("0x") ? trimmed : `0x${trimmed}`
  if (!/^0x[0-9a-fA-F]{64}$/.test(hex)) throw new Refusal("the key is not 32 bytes of hex")
  const key = hex.toLowerCase() as `0x${string}`
  try {
    privateKeyToAddress(key)
  } catch {
    throw new Refusal("the key is not a valid secp256k1 private key")
  }
  return key
}

const readKeyText = (flags: Partial<Record<Flag, string>>): string => {
  const path = flags["--key-file"]
  try {
    return readFileSync(path ?? 0, "utf8")
  } catch (error) {
    throw new Refusal(
      `${path === undefined ? "standard input" : `--key-file: ${path}`}: cannot read (${(error as NodeJS.ErrnoException).code ?? "unreadable"})`
    )
  }
}

const newKey = (flags: Partial<Record<Flag, string>>): string => {
  const key = generatePrivateKey()
  writeKeystore(
    required(flags, "--keystore"),
    key,
    passphraseOf(required(flags, "--passphrase-file")),
    scryptNOf(flags)
  )
  return privateKeyToAddress(key)
}

const importKey = (flags: Partial<Record<Flag, string>>): string => {
  const keystore = required(flags, "--keystore")
  const passphrase = passphraseOf(required(flags, "--passphrase-file"))
  const key = parseKey(readKeyText(flags))
  writeKeystore(keystore, key, passphrase, scryptNOf(flags))
  return privateKeyToAddress(key)
}

const addressOf = (flags: Partial<Record<Flag, string>>): string => {
  const path = required(flags, "--keystore")
  let text: string
  try {
    text = readFileSync(path, "utf8")
  } catch (error) {
    throw new Refusal(
      `--keystore: cannot read ${path} (${(error as NodeJS.ErrnoException).code ?? "unreadable"})`
    )
  }
  const passphraseFile = flags["--passphrase-file"]
  if (passphraseFile === undefined) {
    const named = keystoreAddress(text)
    if (named === undefined)
      throw new Refusal("--keystore: the file names no address; give --passphrase-file to open it")
    return named
  }
  try {
    return privateKeyToAddress(decryptKeystore(text, passphraseOf(passphraseFile)))
  } catch (error) {
    if (error instanceof KeystoreError)
      throw new Refusal(
        error.reason === "wrong-passphrase"
          ? "--passphrase-file: the passphrase does not open the keystore"
          : `--keystore: ${error.message}`
      )
    throw error
  }
}

/** Runs one command; the line to print on success. */
export const runKeyTool = (argv: ReadonlyArray<string>): string => {
  const [command, ...rest] = argv
  const flags = parseFlags(rest)
  switch (command) {
    case "new":
      return newKey(flags)
    case "import":
      return importKey(flags)
    case "address":
      return addressOf(flags)
    default:
      throw new Refusal(USAGE)
  }
}

try {
  process.stdout.write(`${runKeyTool(process.argv.slice(2))}\n`)
} catch (error) {
  process.stderr.write(`keys: ${error instanceof Refusal ? error.message : "failed"}\n`)
  process.exitCode = 1
}
