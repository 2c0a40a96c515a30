/**
 * Property-based tests (fast-check) of MCP tool sequences, as an agent would send them: edit_file
 * calls on generated paths (kerncap.json, build.sh, pinned.json, repro.py, scripts, sources, at any
 * depth, with `..`, `.` and case variants, and names pack refuses: spaces, `$(…)`, U+202E, controls) whose contents are a planted build.sh or a forged manifest,
 * or a source that asks whether a file outside exists (`__has_include`, a macro naming the path,
 * `<…>`, a path stringized from tokens, `#pragma GCC dependency`), then validate, tune, profile
 * (with build) or evaluate (candidates on generated paths with the same contents) on the capture,
 * on its src/, on a capture planted in src/ or on a generated folder under it. After every
 * sequence: no planted script ran (it would leave a marker file), nothing outside the capture's
 * src/ changed (kerncap's own build/ and profile/ outputs aside), every file edit_file wrote is a
 * CUDA source under src/ with a portable name, and a source that asks about a file outside never
 * reaches the build (E_CONFINED, where the build would otherwise fail as its build.sh does).
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import fc from "fast-check";
import { existsSync, lstatSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { hostname } from "node:os";
import { join } from "node:path";
import { CANDIDATE_FAULT_CODES } from "../../src/eval/candidates.ts";
import { CUDA_SOURCE_SUFFIXES } from "../../src/frontends/cuda/index.ts";
import { unportableName } from "../../src/format/archive.ts";
/** A build.sh line that writes the dependency list a confined build asks for in EXTRA_FLAGS (-MF FILE), as nvcc -MD would before a compile error: such a build fails as E_BUILD (a build with no list is E_CONFINED). */
const DEPS_LIST =
  'd=$(sed -n "s/.*-MF \\([^ ]*\\).*/\\1/p" <<<"${EXTRA_FLAGS:-}"); if [ -n "$d" ]; then mkdir -p "$(dirname "$d")"; echo "kernel.o:" >"$d"; fi\n';
import { makeCapture, recordRendered, tempDir } from "./fixtures.ts";
import { connected } from "./mcp-client.ts";

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
      } else
        out.set(
          p,
          `${st.isFile() ? new Bun.CryptoHasher("sha256").update(readFileSync(p)).digest("hex") : st.isSymbolicLink() ? "link" : "other"} ${st.size} ${st.mode}`,
        );
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
const KERNEL = "__global__ void scale(float* x, int n) { x[0] *= 2.0f; }\n";

beforeAll(async () => {
  savedState = process.env.XDG_STATE_HOME;
  process.env.XDG_STATE_HOME = tempDir("kerncap-state-");
  root = tempDir("kerncap-fuzz-mcp-");
  cap = join(root, "a", "cap");
  mkdirSync(join(root, "a"));
  marker = join(root, "PLANTED-SCRIPT-RAN");
  await makeCapture(cap);
  mkdirSync(join(cap, "src"));
  writeFileSync(join(cap, "src/kernel.cu"), KERNEL);
  // the build kerncap wrote: fails at once, runs nothing (no compiler is needed for these properties)
  writeFileSync(join(cap, "build.sh"), `#!/usr/bin/env bash\n${DEPS_LIST}echo "no compiler in this test" >&2\nexit 1\n`, { mode: 0o755 });
  recordRendered(cap);
  // a capture planted under src/ before edit_file refused such names: a forged manifest (no host, this host name) and a build.sh
  const m = JSON.parse(readFileSync(join(cap, "kerncap.json"), "utf8"));
  delete m.host;
  delete m.rendered;
  mkdirSync(join(cap, "src/planted"));
  writeFileSync(
    join(cap, "src/planted/kerncap.json"),
    JSON.stringify({
      ...m,
      process: {
        pid: 1,
        ppid: 0,
        number: -1,
        hostname: hostname(),
        cmdline: [],
        jobEnv: {},
        rank: null,
        rankVariable: null,
        selection: { by: "any", admitted: true },
        visibleDevices: {},
      },
    }),
  );
  writeFileSync(join(cap, "src/planted/build.sh"), plantedScript(), { mode: 0o755 });
  mkdirSync(join(root, "outside"));
  writeFileSync(join(root, "outside/notes"), "keep\n");
  skip = [join(cap, "src"), join(cap, "build"), join(cap, "profile")];
  before = listing(root, skip);
  client = await connected({ trust: { trustBuilds: false }, name: "fuzz" });
});

afterAll(async () => {
  await client?.close();
  if (savedState === undefined) delete process.env.XDG_STATE_HOME;
  else process.env.XDG_STATE_HOME = savedState;
});

function plantedScript(): string {
  // the marker's path not written as one (a confined build reads every file under src/ and refuses one naming a path
  // outside: the capture planted in src/ would then refuse every build, and the fuzz would no longer tell a probe's refusal)
  return `#!/usr/bin/env bash\ntouch "$(printf %s /)"${JSON.stringify(marker.slice(1))}\necho "$0"\n`;
}

const NAME = fc.oneof(
  fc.constantFrom(
    "kerncap.json",
    "build.sh",
    "BUILD.SH",
    "Build.sh",
    "pinned.json",
    "repro.py",
    "run.sh",
    "x.sh",
    "sitecustomize.py",
    "kerncap-received.json",
    "kerncap-captures.json",
    "kernel.cu",
    "k.cuh",
    "k.h",
    "k.py",
    "notes.txt",
    "planted",
    "x",
    ".",
    "..",
    "",
  ),
  fc.stringMatching(/^[a-z]{1,4}(\.(cu|h|sh|json|py))?$/),
  // names pack and unpack refuse (src/format/archive.ts unportableName): a space, shell syntax, a bidi override, a control, a leading -
  fc.constantFrom(" a.cu", "a b.cu", "$(id).cu", "`id`.cu", "a;b.cu", "a\u202eb.cu", "a\nb.cu", "a\x1bb.cu", "-x.cu", "\u00e9.cu", "a*.cu"),
);
/** A path under src/ as an agent would write it (sometimes not under src/ at all). */
const PATH = fc.tuple(fc.boolean(), fc.array(NAME, { minLength: 1, maxLength: 4 })).map(([under, parts]) => (under ? "src/" : "") + parts.join("/"));
/** Sources that ask whether a file outside exists, in the spellings an agent would try. */
const PROBES = (secret: string) => [
  `#if __has_include("${secret}")\n#error exists\n#endif\n`,
  `#define P "${secret}"\n#if __has_include(P)\nint yes;\n#endif\n`,
  `#if __has_include_next(<${secret}>)\n#endif\n`,
  `#define S(x) #x\n#define X(x) S(x)\n#if __has_include(X(${secret}))\n#endif\n`,
  `#pragma GCC dependency "${secret}"\n`,
  `#include "../../../../../../../../..${secret}"\n`,
];
const CONTENT = fc.oneof(
  { arbitrary: fc.constantFrom("planted", "manifest", "// source\n"), weight: 1 },
  { arbitrary: fc.tuple(fc.nat(PROBES("").length - 1), fc.boolean()).map(([i, there]) => `probe:${i}:${there}`), weight: 2 },
);
/** The folder given to the verb, relative to the capture: most often the capture itself (its build then runs, confined). */
const DIR = fc.oneof(
  { arbitrary: fc.constantFrom("", "src/.."), weight: 4 },
  { arbitrary: fc.constantFrom("src", "src/planted", "src/planted/.", "src/x", "src/x/y"), weight: 3 },
  { arbitrary: fc.array(NAME, { minLength: 1, maxLength: 3 }).map((p) => `src/${p.join("/")}`), weight: 2 },
);

describe("fuzz: MCP tool sequences", () => {
  test("edit_file on generated paths, then validate / tune / profile / evaluate: no planted script runs, nothing outside src/ changes, only CUDA sources are written, no probe of a file outside is built", async () => {
    const manifestCopy = readFileSync(join(cap, "src/planted/kerncap.json"), "utf8");
    const seen = { evaluated: 0, refusedProbe: 0 }; // the property is not vacuous: candidates were built, probes refused
    const contentOf = (kind: string) => {
      if (kind === "planted") return plantedScript();
      if (kind === "manifest") return manifestCopy;
      const probe = /^probe:(\d+):(true|false)$/.exec(kind);
      // a file that exists outside the capture, or one that does not: the answer must never show
      return probe ? PROBES(probe[2] === "true" ? join(root, "outside/notes") : join(root, "outside/none"))[Number(probe[1])]! : kind;
    };
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.tuple(PATH, CONTENT), { minLength: 1, maxLength: 3 }),
        fc.constantFrom("validate", "tune", "profile", "evaluate"),
        DIR,
        fc.boolean(),
        async (edits, verb, sub, generated) => {
          // each sequence starts from the capture's own sources (an earlier sequence's probe would decide this one's outcome)
          for (const n of readdirSync(join(cap, "src")))
            if (n !== "kernel.cu" && n !== "planted") rmSync(join(cap, "src", n), { recursive: true, force: true });
          writeFileSync(join(cap, "src/kernel.cu"), KERNEL);
          let probed = false;
          let pathy = false; // a planted script or a manifest written as a source: it holds paths outside, which a confined build may refuse too
          if (verb === "evaluate") {
            // the candidate's files at the generated paths, or its whole new text of the kernel's source
            const files = generated ? Object.fromEntries(edits.map(([path, kind]) => [path, contentOf(kind)])) : { "src/kernel.cu": contentOf(edits[0]![1]) };
            const r = await client.callTool({
              name: "evaluate",
              arguments: { dir: sub && generated ? join(cap, sub) : cap, candidates: [{ name: "c", files }] },
            });
            const d = r.structuredContent as Record<string, any>;
            // the evaluation's document, isError when a candidate could not be judged (a refused build is an error, eval's exit 2), or an error's
            if (d.schema !== "kerncap.eval/1") {
              expect(r.isError).toBe(true);
              expect(d.error?.code).not.toBe("E_INTERNAL");
            } else {
              // a candidate that was built: no compiler here, so every build fails, as build.sh does, or is refused before it runs
              const probe = (generated ? edits : edits.slice(0, 1)).some(([, kind]) => kind.startsWith("probe:"));
              // (or, never written, a candidate that does not fit src/)
              for (const rec of d.records)
                expect(
                  rec.code === "E_CONFINED" || (!probe && rec.code === "E_BUILD") || (CANDIDATE_FAULT_CODES as readonly string[]).includes(rec.code),
                  JSON.stringify(rec),
                ).toBe(true);
              expect(r.isError).toBe(d.records.some((rec: { verdict: string }) => rec.verdict === "error"));
              seen.evaluated += 1;
              if (probe && d.records.some((rec: { code?: string }) => rec.code === "E_CONFINED")) seen.refusedProbe += 1;
            }
            expect(existsSync(marker)).toBe(false);
            expect(listing(root, skip)).toEqual(before);
            return;
          }
          for (const [path, kind] of edits) {
            const content = contentOf(kind);
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
            if (kind.startsWith("probe:")) probed = true;
            else if (kind === "planted" || kind === "manifest") pathy = true;
          }
          const dir = sub ? join(cap, sub) : cap;
          const args = verb === "tune" ? { dir, maxrregcount: [32] } : verb === "profile" ? { dir, build: true } : { dir };
          const r = await client.callTool({ name: verb, arguments: args });
          const d = r.structuredContent as Record<string, any>;
          expect(r.isError).toBe(true); // no compiler here, no GPU: every call ends in an error document
          expect(d.error?.code).not.toBe("E_INTERNAL");
          if (sub.startsWith("src/planted")) expect(d.error.code).toBe("E_NESTED_CAPTURE");
          // the capture's own build ran confined and failed as its build.sh does (or the verb needed what this machine lacks)
          if (probed && d.error.code === "E_CONFINED") seen.refusedProbe += 1;
          if (sub === "" || sub === "src/..")
            expect(probed ? ["E_CONFINED", "E_NO_NCU"] : ["E_BUILD", "E_NO_NCU", "E_NO_GPU", "E_NO_NVCC", ...(pathy ? ["E_CONFINED"] : [])]).toContain(
              d.error.code,
            );
          expect(existsSync(marker)).toBe(false);
          expect(listing(root, skip)).toEqual(before);
        },
      ),
      { numRuns: 40, seed: 32 },
    );
    expect(seen.evaluated).toBeGreaterThan(0);
    expect(seen.refusedProbe).toBeGreaterThan(1);
  }, 180_000);
});
