#!/usr/bin/env node
// Adds lockfile entries for platform-specific optional packages that a registry mirror without
// other platforms' binaries leaves out (e.g. rollup's darwin build). Without them `npm ci`
// refuses the lockfile everywhere. Each entry carries the os/cpu/libc its name declares, so npm
// skips it on other platforms and fetches it by name and version on its own.
// Usage: node scripts/complete-lockfile.mjs   (after `npm install`)
import { readFileSync, writeFileSync } from "node:fs"

const path = new URL("../package-lock.json", import.meta.url)
const lock = JSON.parse(readFileSync(path, "utf8"))
const packages = lock.packages

const osNames = ["android", "darwin", "linux", "win32", "freebsd", "openbsd", "openharmony", "sunos", "aix"]
const cpuNames = {
  arm64: "arm64",
  x64: "x64",
  amd64: "x64",
  ia32: "ia32",
  loong64: "loong64",
  ppc64: "ppc64",
  riscv64: "riscv64",
  s390x: "s390x",
  arm: "arm"
}

const platformOf = (name) => {
  const tokens = name.split("/").pop().split("-")
  const os = tokens.find((t) => osNames.includes(t))
  let cpu
  for (const t of tokens) {
    if (cpuNames[t]) {
      cpu = cpuNames[t]
      break
    }
  }
  if (!cpu && tokens.some((t) => t.startsWith("arm"))) cpu = "arm"
  const libc =
    os === "linux"
      ? tokens.some((t) => t.includes("musl"))
        ? "musl"
        : tokens.some((t) => t.startsWith("gnu"))
          ? "glibc"
          : undefined
      : undefined
  return { os, cpu, libc }
}

let added = 0
for (const [key, entry] of Object.entries(packages)) {
  const optional = entry.optionalDependencies ?? {}
  for (const [name, range] of Object.entries(optional)) {
    const prefix = key === "" ? "" : `${key}/`
    const candidates = [`${prefix}node_modules/${name}`, `node_modules/${name}`]
    if (candidates.some((c) => packages[c])) continue
    const { os, cpu, libc } = platformOf(name)
    if (!os || !cpu) continue
    packages[`node_modules/${name}`] = {
      version: range.replace(/^[\^~=]/, ""),
      ...(entry.dev ? { dev: true } : {}),
      optional: true,
      os: [os],
      cpu: [cpu],
      ...(libc ? { libc: [libc] } : {})
    }
    added++
  }
}
lock.packages = Object.fromEntries(
  Object.entries(packages).sort(([a], [b]) => (a === "" ? -1 : b === "" ? 1 : a.localeCompare(b)))
)
writeFileSync(path, `${JSON.stringify(lock, null, 2)}\n`)
console.log(`added ${added} platform entries`)
