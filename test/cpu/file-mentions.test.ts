/**
 * Comments and docs that name a file of the repository name one that exists: a path from the
 * repository's root (`src/…`, `c/…`, `test/…`, `scripts/…`, `docs/…`, `templates/…`) in a comment
 * of a source or a script, or anywhere in a document, and a relative link of a document
 * (`[x](security.md)`), and in a comment a path from its own folder (`./progress.ts`). A file moved or removed without its mentions fails here, naming each.
 *
 * Not checked: a path with a placeholder or a glob (`src/<function>.py`, `c/kc_*.c`, `$OUT/…`), a
 * `..` in it, build outputs git ignores (c/build/, dist/), a file recorded on the GPU node and
 * committed from there (RECORDED_ON_GPU), and, under `src/`, a path that is not
 * one of kerncap's own (a capture's reproducer has its own src/: `src/kernel.cu`, `src/x/build.sh`),
 * told apart by being neither a `.ts` file nor under an existing folder of src/.
 */
import { expect, test } from "bun:test";
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join } from "node:path";

const ROOT = join(import.meta.dir, "../..");

/** Build outputs (git ignores them): named by scripts and docs, absent from a fresh checkout. */
const BUILT = ["c/build/", "dist/"];

/** Files a script writes on the GPU node, to be committed from there: named before they exist. */
const RECORDED_ON_GPU = new Set(["docs/walkthrough.md"]); // scripts/walkthrough.sh

/** The files scanned, as [path from the root, what counts as a mention]. */
function scanned(): [string, "doc" | "comment" | "hash-comment"][] {
  const git = Bun.spawnSync(["git", "ls-files", "--cached", "--others", "--exclude-standard"], { cwd: ROOT });
  const files = git.stdout
    .toString()
    .trim()
    .split("\n")
    .filter((f) => f && existsSync(join(ROOT, f)));
  const out: [string, "doc" | "comment" | "hash-comment"][] = [];
  for (const f of files) {
    if (f.endsWith(".md") && !f.startsWith("demo/") && !f.startsWith("templates/") && !f.startsWith("test/fixtures/")) out.push([f, "doc"]);
    else if (/^(src|test|scripts|c)\/.*\.(ts|c|h|cu|cpp)$/.test(f) && !f.startsWith("test/fixtures/")) out.push([f, "comment"]);
    else if (/^(scripts\/.*\.(sh|py)|\.ci\/run)$/.test(f)) out.push([f, "hash-comment"]);
  }
  return out;
}

/** The comment text of one line of C-family source (a `//` or block-comment line, or a trailing `// …`). */
function commentOf(line: string, kind: "doc" | "comment" | "hash-comment"): string {
  if (kind === "doc") return line;
  if (kind === "hash-comment") {
    const k = line.search(/(^|\s)#/);
    return k >= 0 ? line.slice(k) : "";
  }
  const t = line.trimStart();
  if (t.startsWith("*") || t.startsWith("/*") || t.startsWith("//")) return t;
  const k = line.indexOf(" // ");
  return k >= 0 ? line.slice(k) : "";
}

const SRC_FOLDERS = new Set(readdirSync(join(ROOT, "src")).filter((d) => statSync(join(ROOT, "src", d)).isDirectory()));

/** A path from the root at a word's start (not inside a longer path or a URL), up to a character a path does not hold. */
const ROOTED = /(?<![\w./$~@-])((?:src|c|test|scripts|docs|templates)\/[\w.+/-]*)(.?)/g;

/** A path from the commenting file's folder, with the extension of a file of this repository (not one in backticks: a value, such as an attack's path). */
const RELATIVE = /(?<![\w./`-])(\.\.?\/[\w./+-]*\.(?:ts|c|h|cu|md|sh|py|json|hbs))(?![\w/])/g;

/** Whether a matched path is one this test holds to the repository (see the file's comment). */
function checked(path: string, next: string): boolean {
  if (/[*<{$…]/.test(next) || path.includes("..")) return false;
  if (BUILT.some((b) => path.startsWith(b)) || RECORDED_ON_GPU.has(path)) return false;
  if (path.startsWith("src/")) {
    const first = path.slice(4).split("/")[0]!;
    return /\.ts$/.test(path) || (path.slice(4).includes("/") && SRC_FOLDERS.has(first));
  }
  return /\/[\w.+-]/.test(path); // a bare `test/` or `docs/` is the folder itself
}

function missing(): string[] {
  const bad: string[] = [];
  for (const [file, kind] of scanned()) {
    if (file === "test/cpu/file-mentions.test.ts") continue; // its own examples of what is and is not checked
    const lines = readFileSync(join(ROOT, file), "utf8").split("\n");
    lines.forEach((line, i) => {
      const text = commentOf(line, kind);
      for (const m of text.matchAll(ROOTED)) {
        const path = m[1]!.replace(/[.,:;]+$/, "");
        if (!checked(path, m[2]!)) continue;
        if (!existsSync(join(ROOT, path))) bad.push(`${file}:${i + 1}: ${path}`);
      }
      // a path from the file's own folder (`./progress.ts`, `../errors.ts`)
      if (kind !== "doc") {
        for (const m of text.matchAll(RELATIVE)) {
          if (!existsSync(join(ROOT, dirname(file), m[1]!))) bad.push(`${file}:${i + 1}: ${m[1]}`);
        }
        return;
      }
      // a document's relative link, from its own folder
      for (const m of text.matchAll(/\]\(([^)\s#]+)(#[^)\s]*)?\)/g)) {
        const target = m[1]!;
        if (/^[a-z]+:/i.test(target)) continue; // https:, mailto:
        if (!existsSync(join(ROOT, dirname(file), target))) bad.push(`${file}:${i + 1}: (${target})`);
      }
    });
  }
  return bad;
}

test("every file a comment or a document names exists (a moved file takes its mentions along)", () => {
  expect(missing()).toEqual([]);
});

test("the scan finds the mentions it is meant to check", () => {
  // the scan itself: a wrong pattern would find nothing and pass
  const text = readFileSync(join(ROOT, "docs/layout.md"), "utf8");
  expect([...text.matchAll(ROOTED)].filter((m) => checked(m[1]!.replace(/[.,:;]+$/, ""), m[2]!)).length).toBeGreaterThan(3);
  expect(checked("src/replay/engine.ts", "")).toBe(true);
  expect(checked("src/cli/", " ")).toBe(true);
  expect(checked("src/kernels/", " ")).toBe(false);
  expect(checked("src/kernel.cu", " ")).toBe(false);
  expect(checked("src/x/build.sh", " ")).toBe(false);
  expect(checked("c/kc_", "*")).toBe(false);
  expect(checked("c/common/kc_match.c", ")")).toBe(true);
  expect(checked("c/build/libkerncap_cuda.so", " ")).toBe(false);
  expect(commentOf('  const p = "src/a.ts"; // see src/b.ts', "comment")).toBe(" // see src/b.ts");
  expect(commentOf("echo src/a.sh # from scripts/b.sh", "hash-comment")).toBe(" # from scripts/b.sh");
});
