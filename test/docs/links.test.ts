/**
 * The documentation is read from a clone of this repository alone: every relative link of
 * README.md and docs/*.md must lead to a file or directory inside it, and no tracked file may
 * name a `shared` directory beside the checkout, which a clone does not have. Anchors are not
 * checked.
 */
import { execFileSync } from "node:child_process"
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs"
import { dirname, isAbsolute, join, relative, resolve } from "node:path"
import { fileURLToPath } from "node:url"
import { describe, expect, it } from "vitest"

const root = resolve(dirname(fileURLToPath(import.meta.url)), "../..")

const documents = [
  "README.md",
  ...readdirSync(join(root, "docs"))
    .filter((name) => name.endsWith(".md"))
    .map((name) => `docs/${name}`)
]

/** Link targets of a Markdown text, code blocks and code spans left out (they show syntax, not links). */
const linkTargets = (markdown: string): Array<string> => {
  const prose = markdown.replace(/^(```|~~~)[^\n]*\n[\s\S]*?^\1[^\n]*$/gm, "").replace(/`[^`\n]*`/g, "")
  const inline = [...prose.matchAll(/\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g)].map((m) => m[1] ?? "")
  const definitions = [...prose.matchAll(/^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s|$)/gm)].map((m) => m[1] ?? "")
  return [...inline, ...definitions]
}

/** A target that leaves the document's own text: a URL with a scheme, or a protocol-relative one. */
const isExternal = (target: string) => /^[a-z][a-z0-9+.-]*:/i.test(target) || target.startsWith("//")

/** The relative link targets of `text` (a document at `document`) that do not resolve inside the repository. */
const brokenLinks = (document: string, text: string): Array<string> => {
  const broken: Array<string> = []
  for (const target of linkTargets(text)) {
    if (isExternal(target)) continue
    const path = decodeURIComponent(target.split("#")[0] ?? "")
    if (path === "") continue // an anchor in the same document
    const resolved = isAbsolute(path) ? join(root, path) : resolve(root, dirname(document), path)
    const inside = relative(root, resolved)
    if (inside.startsWith("..") || isAbsolute(inside) || !existsSync(resolved)) broken.push(target)
  }
  return broken
}

describe("documentation links", () => {
  it.each(documents)("every relative link of %s resolves inside the repository", (document) => {
    expect(brokenLinks(document, readFileSync(join(root, document), "utf8"))).toEqual([])
  })

  it("reports links that leave the repository or lead nowhere, and only those", () => {
    const outside = ["..", "..", "elsewhere", "PROTOCOL.md"].join("/")
    const text = [
      `[a](relayer.md) [b](../README.md#settings) [c](#keys) [d](https://example.org/x.md)`,
      `[e](missing.md) [f](${outside}) [g](../contracts/)`,
      "`[h](not-a-link.md)`",
      "```",
      "[i](inside-a-code-block.md)",
      "```"
    ].join("\n")
    expect(brokenLinks("docs/x.md", text)).toEqual(["missing.md", outside])
  })

  it("finds the links it checks", () => {
    // Guards the extraction itself: the README links to every document.
    const targets = linkTargets(readFileSync(join(root, "README.md"), "utf8"))
    expect(targets).toEqual(
      expect.arrayContaining(["docs/protocol.md", "docs/relayer.md", "docs/attestor.md"])
    )
  })

  it("no tracked file points at the shared directory beside the repository", () => {
    // Spelt in two parts so that this file does not name it itself.
    const needle = ["..", "shared"].join("/")
    const tracked = execFileSync("git", ["ls-files", "-z"], { cwd: root, encoding: "utf8" })
      .split("\0")
      .filter((file) => file !== "")
    const naming = tracked.filter((file) => {
      const path = join(root, file)
      // A tracked file deleted in the working tree has nothing to say.
      if (!existsSync(path) || !statSync(path).isFile()) return false
      return readFileSync(path, "utf8").includes(needle)
    })
    expect(tracked.length).toBeGreaterThan(0)
    expect(naming).toEqual([])
  })
})
