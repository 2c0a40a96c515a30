/**
 * `kerncap demo`: the embedded sample capture (src/capture/demo.ts) is the committed folder
 * (demo/capture, made by scripts/make-demo.ts) file for file; written anywhere, it reads
 * as a valid, intact capture; its after state is the saxpy kernel's result on its before state
 * (the generator's CPU reference, following the pointers stored in captured memory); it packs and
 * unpacks; validate rebuilds its reproducer with nvcc and then needs a GPU.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { readdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { join, relative } from "node:path";
import * as v from "valibot";
import { runCli } from "../../src/cli/main.ts";
import { DOCUMENTS } from "../../src/format/documents.ts";
import { DEMO_FILES } from "../../src/capture/demo.ts";
import { FileImage } from "../../src/format/file-image.ts";
import { chunkBytesOf, chunkCount, chunkExpectation, chunkLen } from "../../src/format/chunks.ts";
import { readManifest } from "../../src/format/capture-dir.ts";
import { MADE_HERE_SEAL } from "../../src/format/file-names.ts";
import { multisetRegions } from "../../src/replay/tolerance-plan.ts";
import { hostIdentity } from "../../src/format/received.ts";
import { describeTrust } from "../../src/cli/commands/inspect.ts";
import type { Manifest } from "../../src/format/manifest.ts";
import { NVCC } from "../nvcc-fixtures.ts";
import { DEMO_CAPTURE, saxpyReference } from "../../scripts/make-demo.ts";
import { RECEIVED_MARK } from "../../src/format/received.ts";
import { tempDir } from "./fixtures.ts";
import { inspectRegion } from "../../src/cli/commands/inspect-region.ts";
import { toleranceOptions } from "../../src/cli/args.ts";
import { checkSettings } from "../../src/replay/judge-settings.ts";
import type { KerncapError } from "../../src/errors.ts";

const HAS_GPU = require("node:fs").existsSync("/dev/nvidiactl");

let savedState: string | undefined;
beforeAll(() => {
  // the demo's trust record (src/capture/demo.ts) goes to a state folder of this test's own, which validate's child inherits
  savedState = process.env.XDG_STATE_HOME;
  process.env.XDG_STATE_HOME = tempDir();
});
afterAll(() => {
  if (savedState === undefined) delete process.env.XDG_STATE_HOME;
  else process.env.XDG_STATE_HOME = savedState;
});

/** runCli with stdout captured. */
async function cli(argv: string[]): Promise<{ code: number; out: string }> {
  let out = "";
  const orig = process.stdout.write.bind(process.stdout);
  process.stdout.write = ((s: string | Uint8Array) => ((out += typeof s === "string" ? s : new TextDecoder().decode(s)), true)) as typeof process.stdout.write;
  try {
    return { code: await runCli(argv), out };
  } finally {
    process.stdout.write = orig;
  }
}

async function demo(): Promise<string> {
  const dir = join(tempDir(), "demo");
  const r = await cli(["demo", dir, "--json"]);
  expect(r.code).toBe(0);
  const doc = v.parse(DOCUMENTS.demo, JSON.parse(r.out));
  expect(doc.dir).toBe(dir);
  expect(doc.kernel).toBe("saxpy(Saxpy const*)");
  expect(doc.symbol).toBe("_Z5saxpyPK5Saxpy"); // the key every document shares (kernel is a name to read)
  // the next commands: validate and replay need the GPU; --build-only runs anywhere
  expect(doc.next).toContain(`kerncap validate ${dir} --build-only`);
  return dir;
}

/** A region's bytes in state `which`, chunk by chunk as the replay reads them (src/format/chunks.ts). */
function regionBytes(m: Manifest, r: Manifest["regions"][number], which: "before" | "after", before: FileImage, after: FileImage): Uint8Array {
  const e = chunkExpectation(r, m.memory.chunkBytes);
  const out = new Uint8Array(r.size);
  for (let c = 0; c < chunkCount(r.size, m.memory.chunkBytes); c++)
    out.set(chunkBytesOf(e, c, chunkLen(r.size, c, m.memory.chunkBytes), which, before, after), c * m.memory.chunkBytes);
  return out;
}

const files = (dir: string) =>
  readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile())
    .map((e) => relative(dir, join(e.parentPath, e.name)))
    .sort();

describe("kerncap demo", () => {
  test("embeds every file of demo/capture, byte for byte (the manifest with this machine's host and its sources' digests added), with build.sh executable", async () => {
    expect(DEMO_FILES.map((f) => f.path).sort()).toEqual(files(DEMO_CAPTURE));
    const dir = await demo();
    // and kerncap's seal of a capture made here by this user (src/format/made-here.ts), mode 0600
    expect(files(dir)).toEqual([...files(DEMO_CAPTURE), MADE_HERE_SEAL].sort());
    expect(statSync(join(dir, MADE_HERE_SEAL)).mode & 0o777).toBe(0o600);
    for (const f of DEMO_FILES.filter((f) => f.path !== "kerncap.json"))
      expect(readFileSync(join(dir, f.path)).equals(readFileSync(join(DEMO_CAPTURE, f.path))), f.path).toBe(true);
    // the manifest: the embedded one with this machine's host and its sources' digests added (as a real capture records them)
    const sha = (p: string) => new Bun.CryptoHasher("sha256").update(readFileSync(join(DEMO_CAPTURE, p))).digest("hex");
    expect(JSON.parse(readFileSync(join(dir, "kerncap.json"), "utf8"))).toEqual({
      ...JSON.parse(readFileSync(join(DEMO_CAPTURE, "kerncap.json"), "utf8")),
      host: hostIdentity(),
      sources: ["src/saxpy.cu", "src/saxpy.kerncap-slice.cu"].map((path) => ({ path, sha256: sha(path) })),
    });
    expect(statSync(join(dir, "build.sh")).mode & 0o111).toBe(0o111);
  });

  test("the digests it records as rendered (build.sh) are those of its files: a confined build of the demo is never E_NOT_RENDERED", () => {
    const m = JSON.parse(readFileSync(join(DEMO_CAPTURE, "kerncap.json"), "utf8")) as { rendered?: { path: string; sha256: string }[] };
    expect(m.rendered?.length ?? 0).toBeGreaterThan(0);
    for (const r of m.rendered ?? []) {
      const actual = new Bun.CryptoHasher("sha256").update(readFileSync(join(DEMO_CAPTURE, r.path))).digest("hex");
      expect(actual, `${r.path}: remake the demo with scripts/make-demo.ts`).toBe(r.sha256);
    }
  });
  test("a valid, intact capture whose device says it was generated, not captured; inspect --verify --json validates", async () => {
    const dir = await demo();
    const r = await cli(["inspect", dir, "--verify", "--json"]);
    expect(r.code).toBe(0);
    const doc = v.parse(DOCUMENTS.inspect, JSON.parse(r.out));
    expect(doc.integrity).toMatchObject({ verdict: "ok", checked: "files+regions" });
    expect(doc.manifest.device.name).toContain("not captured on a GPU");
    expect((await cli(["inspect", dir])).out).toContain(
      "\ndevice     no GPU: the demo, generated on the CPU by scripts/make-demo.ts, not captured on a GPU; for sm_90\n",
    ); // no "driver 0"
    expect(doc.manifest.tool.library).toContain("CPU reference");
    expect(doc.manifest.device.arch).toBe("sm_90");
    const text = await cli(["inspect", dir]);
    expect(text.out.match(/hashed/g)?.length).toBe(1); // once, not "hashed on the CPU: … hashed by kerncap on the CPU"
    // made without a GPU, it has no capture timings: said so, not as "?" for each
    expect(text.out).toContain("\ncapture    timings not measured (made without a GPU: kerncap demo)\n");
    expect(text.out).not.toContain("?");
    // each region line starts with the index judge and replay take (--multiset N, --dtype N=T)
    const m = readManifest(dir);
    const params = new Uint8Array(readFileSync(join(dir, m.params.file)));
    m.regions.forEach((r, i) => {
      expect(text.out).toMatch(new RegExp(`\\n  \\[${i}\\] ${r.changed ? "\\*" : " "} ${r.va} `));
      expect(multisetRegions(m, params, [String(i)])).toEqual([i]);
      expect(multisetRegions(m, params, [r.va])).toEqual([i]);
    });
  });

  test("its after state is the kernel's result on its before state (the CPU reference follows the pointers in memory)", async () => {
    const dir = await demo();
    const m = readManifest(dir);
    const [b, a] = [new FileImage(join(dir, m.memory.before)), new FileImage(join(dir, m.memory.after))];
    const before = m.regions.map((r) => ({ va: BigInt(r.va), bytes: regionBytes(m, r, "before", b, a) }));
    const after = m.regions.map((r) => ({ va: BigInt(r.va), bytes: regionBytes(m, r, "after", b, a) }));
    const params = new DataView(readFileSync(join(dir, m.params.file)).buffer.slice(0));
    const threads = m.launch.grid[0] * m.launch.block[0];
    const want = saxpyReference(before, params.getBigUint64(0, true), threads);
    for (let i = 0; i < m.regions.length; i++) expect(Buffer.from(after[i]!.bytes).equals(Buffer.from(want[i]!.bytes)), m.regions[i]!.va).toBe(true);
    // y changed, x and the parameter block did not; y[1] = 1.5·x[1] + y[1] = 1.5·(-13/8) + 11/4
    expect(m.regions.map((r) => r.changed)).toEqual([false, false, true]);
    expect(new Float32Array(after[2]!.bytes.slice(0).buffer)[1]).toBe(1.5 * (-13 / 8) + 11 / 4);
  });

  test("inspect --region: a region's values before and after, read from the memory images; y after = a·x + y before, element for element; by index or by an address inside it", async () => {
    const dir = await demo();
    const dump = async (...a: string[]) => {
      const r = await cli(["inspect", dir, "--json", ...a]);
      expect(r.code).toBe(0);
      const doc = JSON.parse(r.out);
      expect(v.safeParse(DOCUMENTS.region, doc).success).toBe(true);
      return doc;
    };
    const params = await dump("--region", "0", "--count", "1"); // the Saxpy struct: a first
    expect(params).toMatchObject({ region: 0, changed: false, dtype: "fp32", dtypeFrom: "default", count: 1 });
    const a = params.before[0] as number;
    const x = await dump("--region", "1", "--count", "4000");
    const y = await dump("--region", "2", "--count", "4000");
    expect([x.count, y.count, y.changed]).toEqual([4000, 4000, true]);
    expect(x.after).toEqual(x.before); // not written by the launch
    for (let i = 0; i < 4000; i++) expect(y.after[i]).toBe(Math.fround(Math.fround(a * x.before[i]) + y.before[i]));
    expect(y.differing.length).toBe(y.before.filter((b: number, i: number) => b !== y.after[i]).length);
    // an address inside region 2 (as inspect shows a pointer's value): that region, from that byte
    const at = await dump("--region", "0x600000400010", "--count", "2", "--dtype", "u32");
    expect(at).toMatchObject({ region: 2, offset: 16, dtype: "u32", dtypeFrom: "option", count: 2 });
    expect(at.before[0]).toBe(new Uint32Array(new Float32Array([y.before[4]]).buffer)[0]);
    // the text: a row per element, * where the launch changed it
    const t = await cli(["inspect", dir, "--region", "2", "--count", "3"]);
    expect(t.out).toContain(
      "region [2] 0x600000400000, 15.6 KiB, written by the launch; fp32 (the default: --dtype sets it; --dtype u64 shows device pointers); elements 0–2 of 4000",
    );
    expect(t.out.split("\n")[2]).toMatch(new RegExp(`^\\s+0\\s+${y.before[0]}\\s+${y.after[0]}(\\s+\\*)?$`));
    // u64 in the text: hex, a pointer into a region said as the params line says it (nu12 #9: decimals); --json keeps decimals
    const ptrs = await cli(["inspect", dir, "--region", "0", "--dtype", "u64"]);
    expect(ptrs.out).toMatch(/^\s+1\s+0x600000200000 → \[1\] \+ 0 B\s+0x600000200000 → \[1\] \+ 0 B$/m);
    expect((await dump("--region", "0", "--dtype", "u64")).before[1]).toBe(String(0x600000200000));
    // param:N, as judge and --multiset name a region (nu15): where the kernel's one parameter points, the Saxpy struct
    expect(await dump("--region", "param:0", "--count", "1")).toMatchObject({ region: 0, offset: 0 });
    // what does not fit is a usage error
    for (const bad of [
      ["--region", "param:1"],
      ["--region", "3"],
      ["--region", "0x1"],
      ["--region", "2", "--count", "0"],
      ["--region", "2", "--dtype", "fp17"],
      ["--region", "2", "--offset", "16000"],
      ["--count", "4"],
    ])
      expect((await cli(["inspect", dir, ...bad])).code, bad.join(" ")).toBe(2);
  });

  test("inspect --region: an offset inside an element is said (text and --json), not rounded silently; element types named as replay and judge name them, with one error", async () => {
    const dir = await demo();
    const t = await cli(["inspect", dir, "--region", "2", "--offset", "3", "--count", "1"]);
    expect(t.code).toBe(0);
    expect(t.out.split("\n")[0]).toBe("note: byte 3 lies inside element 0 (fp32, 4 bytes): shown from its first byte, 0");
    const j = await cli(["inspect", dir, "--json", "--region", "0x600000400006", "--count", "1"]);
    expect(JSON.parse(j.out)).toMatchObject({ offset: 4, offsetAsked: 6 });
    // dir absolute, as every document gives it, whatever was typed (found by a new user: "dir": "cap")
    const cwd = process.cwd();
    process.chdir(join(dir, ".."));
    try {
      expect(JSON.parse((await cli(["inspect", "demo", "--json", "--region", "2", "--count", "1"])).out).dir).toBe(dir);
    } finally {
      process.chdir(cwd);
    }
    expect((await cli(["inspect", dir, "--region", "2", "--offset", "8", "--count", "1"])).out).not.toContain("note:");
    // fp8 (e4m3, e5m2) is read as u8, as judging reads it
    expect(JSON.parse((await cli(["inspect", dir, "--json", "--region", "2", "--dtype", "e4m3", "--count", "1"])).out).dtype).toBe("u8");
    // the same unknown type: one message and hint from inspect, replay/validate/export's options and judge's settings
    const m = readManifest(dir);
    const errs = [
      () => inspectRegion(dir, m, { region: "2", dtype: "fp17" }, true),
      () => toleranceOptions({ dtype: "fp17" }),
      () => checkSettings({ dtype: "fp17" }),
    ].map((f) => {
      try {
        f();
      } catch (e) {
        return e as KerncapError;
      }
      throw new Error("no error");
    });
    for (const e of errs) {
      expect([e.code, e.message]).toEqual(["E_USAGE", '--dtype fp17: "fp17" is not a known element type']);
      expect(e.hint!.startsWith(errs[0]!.hint!.slice(0, -1))).toBe(true); // replay's adds the REGION=T form
    }
    expect(errs[0]!.hint).toContain("e4m3/e5m2");
  });

  test("refuses to overwrite without --force; --force replaces a previous capture, never another folder", async () => {
    const dir = await demo();
    writeFileSync(join(dir, "src/saxpy.cu"), "// edited\n");
    expect((await cli(["demo", dir])).code).toBe(2);
    expect(readFileSync(join(dir, "src/saxpy.cu"), "utf8")).toBe("// edited\n");
    // --force says what it loses (a new user's edits went without a word)
    writeFileSync(join(dir, "kerncap-judge.json"), "{}");
    // the slice is kerncap's, remade from the TU by validate: not a file of the user's (found by a new user: "loses … src/saxpy.kerncap-slice.cu (edited)")
    writeFileSync(join(dir, "src/saxpy.kerncap-slice.cu"), "// remade from an edited TU\n");
    let err = "";
    const orig = process.stderr.write.bind(process.stderr);
    process.stderr.write = ((c: string | Uint8Array) => (
      (err += typeof c === "string" ? c : new TextDecoder().decode(c)), true
    )) as typeof process.stderr.write;
    try {
      expect((await cli(["demo", dir, "-f"])).code).toBe(0);
    } finally {
      process.stderr.write = orig;
    }
    expect(err).toContain("loses 2 files of yours: src/saxpy.cu (edited), kerncap-judge.json");
    expect(err).not.toContain("kerncap-slice");
    expect(readFileSync(join(dir, "src/saxpy.cu"), "utf8")).toContain("__global__ void saxpy");
    const other = tempDir();
    writeFileSync(join(other, "notes.txt"), "mine");
    const r = await cli(["demo", other, "--force", "--json"]);
    expect(r.code).toBe(2);
    expect(JSON.parse(r.out).error.code).toBe("E_EXISTS");
    expect(readFileSync(join(other, "notes.txt"), "utf8")).toBe("mine");
  });

  test("inspect of a fresh demo: one coherent trust line (its build is trusted, so a rebuild runs it without --trust), text and --json alike", async () => {
    const dir = await demo();
    const doc = JSON.parse((await cli(["inspect", dir, "--json"])).out);
    const text = (await cli(["inspect", dir])).out;
    const trust = text.slice(text.indexOf("\ntrust ") + 1).split(/\n(?! )/)[0]!;
    // the demo records this machine's host, as a real capture does: made here wherever there is a machine-id
    expect(readManifest(dir).host).toEqual(hostIdentity());
    expect(doc.received.received).toBe(!hostIdentity().machineId);
    if (doc.received.received) {
      expect(doc.received.trusted).toBe(true);
      expect(trust).not.toContain("only after --trust"); // it runs without --trust: the line must not say both
      expect(trust).not.toContain("you trusted"); // kerncap recorded it when it wrote the demo
      expect(trust).toMatch(
        /^trust +received \(not shown to be made here by you\), its build trusted as it is now: a rebuild runs its build\.sh without --trust until build\.sh changes/,
      );
      for (const r of doc.received.reasons) expect(trust).toContain(`  - ${r}`);
    } else {
      expect(trust).toMatch(/^trust +made here/);
    }
    // on a machine without a machine-id: received, and trusted by kerncap (it wrote the demo's build.sh)
    expect(describeTrust(["this machine has no machine-id"], true)).toContain("without --trust until build.sh changes");
  });
  test("pack and unpack round trip: the same files (and unpack's mark of a received capture), intact", async () => {
    const dir = await demo();
    const zip = join(tempDir(), "demo.zip");
    expect((await cli(["pack", dir, "-o", zip])).code).toBe(0);
    const back = join(tempDir(), "back");
    expect((await cli(["unpack", zip, "-o", back])).code).toBe(0);
    expect(files(back)).toEqual([...files(dir).filter((f) => f !== MADE_HERE_SEAL), RECEIVED_MARK].sort()); // the seal is the packer's: never shipped
    expect((await cli(["inspect", back, "--verify"])).code).toBe(0);
  });

  test.skipIf(!NVCC)(
    "validate rebuilds the reproducer with nvcc (no --trust: its build.sh is kerncap's own); without a GPU it then says the replay needs one",
    async () => {
      const dir = await demo();
      // a child process: validate --json sets fd 1 aside for its document (src/cli/args.ts keepStdoutForData)
      const p = Bun.spawnSync([process.execPath, join(import.meta.dir, "../../src/cli/main.ts"), "validate", dir, "--json", "--iters", "1"], {
        stdout: "pipe",
        stderr: "pipe",
        env: process.env,
      }); // env: Bun's default is the one it started with
      const r = { code: p.exitCode };
      const doc = JSON.parse(p.stdout.toString());
      if (HAS_GPU) {
        expect(r.code).toBe(0);
        expect(doc.verdict).toBe("match");
      } else {
        expect(r.code).toBe(2);
        expect(doc.error.code).toBe("E_NO_GPU");
        expect(doc.error.message).toContain("the rebuild succeeded");
        expect(doc.error.hint).toContain(
          "builds run without one (validate --build-only, tune --build-only, eval --build-only, check --rebuild --build-only), and kerncap doctor lists what works here",
        );
      }
    },
    60_000,
  );
});
