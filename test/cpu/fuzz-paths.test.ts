/**
 * Property-based tests (fast-check) of the capture path rule (src/format/paths.ts) on untrusted
 * input, in-process: mutated manifests (path fields and slice meta with `..`, absolute paths, NULs,
 * control characters, names of links, a hard link and a FIFO planted in the folder) read, checked
 * and acted on by the readers (readManifest, verifyFiles, verifyRegions, the slice refresh), and
 * MCP read_file/edit_file calls with arbitrary paths. Every failure must be a user error with a
 * message (never E_INTERNAL, never a non-kerncap throw), and nothing outside the capture folder may
 * change: the temp root is listed (names, kinds, sizes, contents' SHA-256) before and after.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { InMemoryTransport } from "@modelcontextprotocol/sdk/inMemory.js";
import fc from "fast-check";
import { linkSync, lstatSync, mkdirSync, readdirSync, readFileSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { isKerncapError } from "../../src/errors.ts";
import { readManifest, verifyFiles, verifyRegions } from "../../src/format/capture-dir.ts";
import { capturePath, readInCapture } from "../../src/format/paths.ts";
import { log } from "../../src/log.ts";
import { createMcpServer } from "../../src/mcp/server.ts";
import { remakeStaleSlice } from "../../src/frontends/cuda/slice.ts";
import { makeCapture, tempDir } from "./fixtures.ts";

/** Every entry under `root` except those under `skip`: path → kind, size and content hash. */
function listing(root: string, skip: string): Map<string, string> {
  const out = new Map<string, string>();
  const walk = (d: string) => {
    for (const n of readdirSync(d)) {
      const p = join(d, n);
      if (p === skip) continue;
      const st = lstatSync(p);
      if (st.isDirectory()) {
        out.set(p, "dir");
        walk(p);
      } else
        out.set(p, `${st.isFile() ? new Bun.CryptoHasher("sha256").update(readFileSync(p)).digest("hex") : st.isSymbolicLink() ? "link" : "other"} ${st.size}`);
    }
  };
  walk(root);
  return out;
}

/** The outcome of untrusted input: fine, or a KerncapError with a message that is not an internal error. */
function userError(e: unknown): void {
  if (!isKerncapError(e)) throw new Error(`not a KerncapError: ${(e as Error)?.stack ?? String(e)}`);
  expect(e.code).not.toBe("E_INTERNAL");
  expect(e.exitCode).toBe(2);
  expect(e.message.length).toBeGreaterThan(10);
}

let root: string;
let dir: string;
let manifest: Record<string, any>;
let before: Map<string, string>;

beforeAll(async () => {
  log.level = 1; // the slice refresh's notes, a thousand times over, say nothing here
  root = tempDir("kerncap-fuzz-");
  // deep enough that a few `..` from src/ still land inside the listed root
  dir = join(root, "a", "b", "c", "cap");
  mkdirSync(join(root, "a", "b", "c"), { recursive: true });
  await makeCapture(dir);
  mkdirSync(join(root, "outside"));
  writeFileSync(join(root, "outside/secret"), "SECRET\n");
  writeFileSync(join(root, "outside/victim.cu"), "keep\n");
  mkdirSync(join(dir, "src"));
  writeFileSync(join(dir, "src/main.cu"), "__global__ void scale(float* x, int n) { x[0] *= 2.0f; }\n");
  // what a received folder may hold: links out and in, a dangling link, a hard link, a FIFO
  symlinkSync(join(root, "outside"), join(dir, "src/out"));
  symlinkSync(join(root, "outside/secret"), join(dir, "src/secret.h"));
  symlinkSync(join(root, "outside/missing.cu"), join(dir, "src/dangling.cu"));
  symlinkSync("main.cu", join(dir, "src/alias.cu"));
  linkSync(join(root, "outside/victim.cu"), join(dir, "src/hard.cu"));
  expect(Bun.spawnSync(["mkfifo", join(dir, "src/fifo.cu")]).exitCode).toBe(0);
  manifest = JSON.parse(readFileSync(join(dir, "kerncap.json"), "utf8"));
  before = listing(root, dir);
});

afterAll(() => {
  log.level = 3;
  // nothing outside the capture folder changed, and nothing new appeared beside it
  expect(listing(root, dir)).toEqual(before);
  // no temporary file of a write left in the folder
  const left = [...listing(dir, "")].map(([p]) => p).filter((p) => /\.tmp-\d+-/.test(p));
  expect(left).toEqual([]);
});

const PART = fc.oneof(
  fc.constantFrom(
    "..",
    ".",
    "",
    "src",
    "kernel",
    "memory",
    "out",
    "secret",
    "secret.h",
    "dangling.cu",
    "alias.cu",
    "hard.cu",
    "fifo.cu",
    "main.cu",
    "params.bin",
    "module.cubin",
    "before.bin",
    "\0",
    "a\nb",
    "\\",
    "kerncap.json",
  ),
  fc.string({ maxLength: 6 }),
);
/** A path as an attacker would write it: parts joined by /, sometimes absolute. */
const PATH = fc.tuple(fc.boolean(), fc.array(PART, { minLength: 0, maxLength: 6 })).map(([abs, parts]) => (abs ? "/" : "") + parts.join("/"));
const TEXT = fc.oneof(
  fc.string({ maxLength: 40 }),
  PATH,
  fc.constantFrom('scale<int>;\n#include "/etc/passwd"', "#include <x.h>", "scale", "ns::scale<(K)2, 4>"),
);

/** One mutation of the manifest: a path field, or a slice meta field, set to an attacker's value. */
const MUTATION = fc.oneof(
  fc.tuple(fc.constantFrom("params.file", "module.file", "memory.before", "memory.after", "files.0.path", "files.1.path"), PATH),
  fc.tuple(fc.constantFrom("slice.tu", "slice.slice", "slice.odrUse", "slice.cutInclude", "slice.definitionName", "slice.base", "slice.kind"), TEXT),
);

function mutated([field, value]: [string, string]): Record<string, any> {
  const m = structuredClone(manifest);
  m.source = {
    cuda: { slice: { used: true, meta: { kind: "prefix", tu: "main.cu", slice: "main.kerncap-slice.cu", base: "scale", definitionName: "main.cu" } } },
  };
  const [head, ...rest] = field.split(".");
  if (head === "slice") m.source.cuda.slice.meta[rest[0]!] = value;
  else {
    let o = m;
    const keys = [head!, ...rest];
    for (const k of keys.slice(0, -1)) o = o[k];
    o[keys.at(-1)!] = value;
  }
  return m;
}

describe("fuzz: untrusted paths", () => {
  test("mutated manifests: a user error or a result, never an internal error, never a write outside the folder", () => {
    fc.assert(
      fc.property(MUTATION, fc.boolean(), (mut, editTu) => {
        writeFileSync(join(dir, "kerncap.json"), JSON.stringify(mutated(mut)));
        // an edited TU makes the slice stale, so the refresh writes
        if (editTu) writeFileSync(join(dir, "src/main.cu"), `// ${Math.random()}\n__global__ void scale(float* x, int n) {}\n`);
        try {
          const m = readManifest(dir);
          for (const p of [m.params.file, m.module.file, m.memory.before, m.memory.after]) capturePath(dir, p);
          verifyFiles(dir, m);
          verifyRegions(dir, m);
          remakeStaleSlice(dir, m);
        } catch (e) {
          userError(e);
        }
      }),
      { numRuns: 1500, seed: 23 },
    );
    writeFileSync(join(dir, "kerncap.json"), JSON.stringify(manifest));
  });

  test("MCP read_file / edit_file with arbitrary paths and folders: a tool error with a code (never E_INTERNAL), writes only under src/", async () => {
    const [a, b] = InMemoryTransport.createLinkedPair();
    await createMcpServer().connect(a);
    const c = new Client({ name: "fuzz", version: "1" });
    await c.connect(b);
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom("read_file", "edit_file"),
        fc.oneof(
          PATH,
          PATH.map((p) => `src/${p}`),
        ),
        fc.oneof(fc.constant(dir), fc.constant(`${dir}/src`), PATH),
        fc.boolean(),
        async (tool, path, d, replace) => {
          const args =
            tool === "read_file" ? { dir: d, path } : replace ? { dir: d, path, oldText: "x[0]", newText: "x[0]" } : { dir: d, path, content: "// fuzz\n" };
          const r = await c.callTool({ name: tool, arguments: args });
          const docu = r.structuredContent as Record<string, any>;
          if (r.isError) {
            expect(docu.error.code).not.toBe("E_INTERNAL");
            expect(docu.error.message.length).toBeGreaterThan(5);
          } else if (tool === "edit_file") {
            // what was written is a regular file with one name under the capture's src/
            expect(docu.path.startsWith("src/")).toBe(true);
            expect(readInCapture(dir, docu.path, 1 << 20)?.toString()).toBeDefined();
          }
        },
      ),
      { numRuns: 1000, seed: 23 },
    );
    await c.close();
  }, 60_000);
});
