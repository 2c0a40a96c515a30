/**
 * Property-based tests (fast-check) of MCP tool sequences, as an agent would send them: edit_file
 * calls on generated paths (kerncap.json, build.sh, pinned.json, repro.py, scripts, sources, at any
 * depth, with `..`, `.` and case variants, and names pack refuses: spaces, `$(…)`, U+202E, controls) whose contents are a planted build.sh or a forged manifest,
 * then validate, tune or profile (with build) on the capture, on its src/, on a capture planted in
 * src/ or on a generated folder under it. After every sequence: no planted script ran (it would
 * leave a marker file), nothing outside the capture's src/ changed (kerncap's own build/ and
 * profile/ outputs aside), and every file edit_file wrote is a CUDA source under src/ with a portable name.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { InMemoryTransport } from "@modelcontextprotocol/sdk/inMemory.js";
import fc from "fast-check";
import { existsSync, lstatSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { hostname } from "node:os";
import { join } from "node:path";
import { CUDA_SOURCE_SUFFIXES } from "../../src/frontends/cuda/index.ts";
import { unportableName } from "../../src/format/archive.ts";
import { createMcpServer } from "../../src/mcp/server.ts";
import { makeCapture, recordRendered, tempDir } from "./fixtures.ts";

/** Every entry under `root` except those under `skip`: path → kind, size and content hash. */
function listing(root: string, skip: string[]): Map<string, string> {
  const out = new Map<string, string>();
  const walk = (d: string) => {
    for (const n of readdirSync(d)) {
      const p = join(d, n);
      if (skip.includes(p)) continue;
      const st = lstatSync(p);
      if (st.isDirectory()) {
        out.set(p, "dir");
        walk(p);
      } else out.set(p, `${st.isFile() ? new Bun.CryptoHasher("sha256").update(readFileSync(p)).digest("hex") : st.isSymbolicLink() ? "link" : "other"} ${st.size} ${st.mode}`);
    }
  };
  walk(root);
  return out;
}

let savedState: string | undefined;
let root: string;
let cap: string;
let marker: string;
let before: Map<string, string>;
let skip: string[];
let client: Client;

beforeAll(async () => {
  savedState = process.env.XDG_STATE_HOME;
  process.env.XDG_STATE_HOME = tempDir("kerncap-state-");
  root = tempDir("kerncap-fuzz-mcp-");
  cap = join(root, "a", "cap");
  mkdirSync(join(root, "a"));
  marker = join(root, "PLANTED-SCRIPT-RAN");
  await makeCapture(cap);
  mkdirSync(join(cap, "src"));
  writeFileSync(join(cap, "src/kernel.cu"), "__global__ void scale(float* x, int n) { x[0] *= 2.0f; }\n");
  // the build kerncap wrote: fails at once, runs nothing (no compiler is needed for these properties)
  writeFileSync(join(cap, "build.sh"), `#!/usr/bin/env bash\necho "no compiler in this test" >&2\nexit 1\n`, { mode: 0o755 });
  recordRendered(cap);
  // a capture planted under src/ before edit_file refused such names: a forged manifest (no host, this host name) and a build.sh
  const m = JSON.parse(readFileSync(join(cap, "kerncap.json"), "utf8"));
  delete m.host;
  delete m.rendered;
  mkdirSync(join(cap, "src/planted"));
  writeFileSync(join(cap, "src/planted/kerncap.json"), JSON.stringify({ ...m, process: { pid: 1, ppid: 0, number: -1, hostname: hostname(), cmdline: [], jobEnv: {}, rank: null, rankVariable: null, selection: { by: "any", admitted: true }, visibleDevices: {} } }));
  writeFileSync(join(cap, "src/planted/build.sh"), plantedScript(), { mode: 0o755 });
  mkdirSync(join(root, "outside"));
  writeFileSync(join(root, "outside/notes"), "keep\n");
  skip = [join(cap, "src"), join(cap, "build"), join(cap, "profile")];
  before = listing(root, skip);
  const [a, b] = InMemoryTransport.createLinkedPair();
  await createMcpServer(undefined, { trustBuilds: false }).connect(a);
  client = new Client({ name: "fuzz", version: "1" });
  await client.connect(b);
});

afterAll(async () => {
  await client?.close();
  if (savedState === undefined) delete process.env.XDG_STATE_HOME;
  else process.env.XDG_STATE_HOME = savedState;
});

function plantedScript(): string {
  return `#!/usr/bin/env bash\ntouch ${JSON.stringify(marker)}\necho "$0"\n`;
}

const NAME = fc.oneof(
  fc.constantFrom("kerncap.json", "build.sh", "BUILD.SH", "Build.sh", "pinned.json", "repro.py", "run.sh", "x.sh", "sitecustomize.py", "kerncap-received.json", "kerncap-captures.json", "kernel.cu", "k.cuh", "k.h", "k.py", "notes.txt", "planted", "x", ".", "..", ""),
  fc.stringMatching(/^[a-z]{1,4}(\.(cu|h|sh|json|py))?$/),
  // names pack and unpack refuse (src/format/archive.ts unportableName): a space, shell syntax, a bidi override, a control, a leading -
  fc.constantFrom(" a.cu", "a b.cu", "$(id).cu", "`id`.cu", "a;b.cu", "a\u202eb.cu", "a\nb.cu", "a\x1bb.cu", "-x.cu", "\u00e9.cu", "a*.cu"),
);
/** A path under src/ as an agent would write it (sometimes not under src/ at all). */
const PATH = fc.tuple(fc.boolean(), fc.array(NAME, { minLength: 1, maxLength: 4 })).map(([under, parts]) => (under ? "src/" : "") + parts.join("/"));
const CONTENT = fc.constantFrom("planted", "manifest", "// source\n");
/** The folder given to the verb, relative to the capture: most often the capture itself (its build then runs, confined). */
const DIR = fc.oneof({ arbitrary: fc.constantFrom("", "src/.."), weight: 4 }, { arbitrary: fc.constantFrom("src", "src/planted", "src/planted/.", "src/x", "src/x/y"), weight: 3 }, { arbitrary: fc.array(NAME, { minLength: 1, maxLength: 3 }).map((p) => `src/${p.join("/")}`), weight: 2 });

describe("fuzz: MCP tool sequences", () => {
  test("edit_file on generated paths, then validate / tune / profile: no planted script runs, nothing outside src/ changes, only CUDA sources are written", async () => {
    const manifestCopy = readFileSync(join(cap, "src/planted/kerncap.json"), "utf8");
    await fc.assert(
      fc.asyncProperty(fc.array(fc.tuple(PATH, CONTENT), { minLength: 1, maxLength: 3 }), fc.constantFrom("validate", "tune", "profile"), DIR, async (edits, verb, sub) => {
        for (const [path, kind] of edits) {
          const content = kind === "planted" ? plantedScript() : kind === "manifest" ? manifestCopy : kind;
          const r = await client.callTool({ name: "edit_file", arguments: { dir: cap, path, content } });
          const d = r.structuredContent as Record<string, any>;
          if (r.isError) {
            expect(d.error.code).not.toBe("E_INTERNAL");
            continue;
          }
          // what was written: under src/, with a CUDA source's name, never one kerncap reads as configuration
          expect(d.path.startsWith("src/")).toBe(true);
          expect(CUDA_SOURCE_SUFFIXES.some((s) => d.path.endsWith(s))).toBe(true);
          expect(unportableName(d.path)).toBeUndefined(); // the capture still packs
        }
        const dir = sub ? join(cap, sub) : cap;
        const args = verb === "tune" ? { dir, maxrregcount: [32] } : verb === "profile" ? { dir, build: true } : { dir };
        const r = await client.callTool({ name: verb, arguments: args });
        const d = r.structuredContent as Record<string, any>;
        expect(r.isError).toBe(true); // no compiler here, no GPU: every call ends in an error document
        expect(d.error?.code).not.toBe("E_INTERNAL");
        if (sub.startsWith("src/planted")) expect(d.error.code).toBe("E_NESTED_CAPTURE");
        // the capture's own build ran confined and failed as its build.sh does (or the verb needed what this machine lacks)
        if (sub === "") expect(["E_BUILD", "E_NO_NCU", "E_NO_GPU", "E_NO_NVCC"]).toContain(d.error.code);
        expect(existsSync(marker)).toBe(false);
        expect(listing(root, skip)).toEqual(before);
      }),
      { numRuns: 30, seed: 32 },
    );
  }, 180_000);
});
