/**
 * --json documents (src/format/documents.ts): every one names its schema, validates against its
 * valibot schema, and `kerncap schema` prints JSON Schemas generated from them. doctor on a
 * machine without a GPU.
 */
import { describe, expect, test } from "bun:test";
import { chmodSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import * as v from "valibot";
import { runCli } from "../../src/cli/main.ts";
import { DOCUMENTS, DOCUMENT_VERSIONS, jsonSchemaOf, SCHEMA_NAMES } from "../../src/format/documents.ts";
import { checkAslr, checkCache, checkNcu } from "../../src/doctor.ts";
import { NO_GPU_HINT, noDriverError, WITHOUT_GPU } from "../../src/native/libcuda-search.ts";
import { makeCapture, tempDir } from "./fixtures.ts";
import { JUDGE_SCHEMA, JudgeFile } from "../../src/format/judge-file.ts";
import { writeJudging } from "../../src/replay/judge-settings.ts";

const HAS_GPU = require("node:fs").existsSync("/dev/nvidiactl");

/** runCli with stdout captured: { code, out }. */
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

async function fresh(): Promise<string> {
  const dir = join(tempDir(), "cap");
  await makeCapture(dir);
  return dir;
}

describe("--json documents", () => {
  test("inspect --json: schema id, the manifest and the integrity verdict; valid against its schema", async () => {
    const dir = await fresh();
    const r = await cli(["inspect", dir, "--verify", "--json"]);
    expect(r.code).toBe(0);
    const doc = JSON.parse(r.out);
    expect(doc.schema).toBe("kerncap.inspect/1");
    expect(doc.integrity).toEqual({ checked: "files+regions", verdict: "ok" });
    expect(v.safeParse(DOCUMENTS.inspect, doc).success).toBe(true);
  });
  test("inspect --json of a damaged capture: verdict damaged naming the file, exit 2, one document", async () => {
    const dir = await fresh();
    const p = join(dir, "memory/before.bin");
    const b = readFileSync(p);
    b[65536 + 3] ^= 1;
    writeFileSync(p, b);
    const r = await cli(["inspect", dir, "--verify", "--json"]);
    expect(r.code).toBe(2);
    const doc = JSON.parse(r.out); // one document: parses as a whole
    expect(doc.integrity.verdict).toBe("damaged");
    expect(doc.integrity.message).toContain("region 0x7f0000010000");
    expect(v.safeParse(DOCUMENTS.inspect, doc).success).toBe(true);
  });
  test("pack and unpack documents; the error document", async () => {
    const dir = await fresh();
    const p = await cli(["pack", dir, "--json"]);
    const pd = JSON.parse(p.out);
    expect(pd.schema).toBe("kerncap.pack/1");
    expect(v.safeParse(DOCUMENTS.pack, pd).success).toBe(true);
    const u = await cli(["unpack", pd.archive, "-o", join(dir, "../back"), "--json"]);
    expect(v.safeParse(DOCUMENTS.unpack, JSON.parse(u.out)).success).toBe(true);
    const e = await cli(["unpack", pd.archive, "-o", join(dir, "../back"), "--json"]);
    expect(e.code).toBe(2);
    const ed = JSON.parse(e.out);
    expect(ed.schema).toBe("kerncap.error/1");
    expect(ed.error.code).toBe("E_EXISTS");
    expect(v.safeParse(DOCUMENTS.error, ed).success).toBe(true);
  });
  test("kerncap schema: the manifest by default, every document by name, an unknown name refused", async () => {
    const m = await cli(["schema"]);
    const s = JSON.parse(m.out);
    expect(s.$schema).toContain("draft-07");
    expect(s.required).toContain("kernel");
    expect(s.properties.regions.items.properties.va.pattern).toBeDefined(); // regex pipes carried over
    for (const n of Object.keys(DOCUMENT_VERSIONS)) {
      const js = jsonSchemaOf(n)!;
      expect((js.properties as any).schema.const, n).toBe(`kerncap.${n}/1`);
    }
    expect(SCHEMA_NAMES).toContain("manifest");
    // the MCP tools' documents are titled as tools, not as verbs that do not exist
    expect(jsonSchemaOf("file")!.title).toBe("kerncap mcp tool read_file");
    expect(jsonSchemaOf("edit")!.title).toBe("kerncap mcp tool edit_file");
    expect(jsonSchemaOf("validate-watch")!.title).toBe("kerncap validate --watch --json (one document per line)");
    expect(jsonSchemaOf("pack")!.title).toBe("kerncap pack --json");
    expect((await cli(["schema", "nope"])).code).toBe(2);
  });

  test("numerics.regions[].kernelNoise (a region judged against the kernel's own noise) is in the replay, validate and eval-record schemas", () => {
    for (const name of ["replay", "validate", "eval-record"] as const)
      expect(JSON.stringify(jsonSchemaOf(name)), name).toContain('"kernelNoise":{"type":"object","properties":{"region"');
  });
  test("kerncap schema judge-settings: the judging settings file's schema, by the name its schema id gives; a file judge writes is valid against it", async () => {
    // found by a new user: kerncap-judge.json names kerncap.judge-settings/1, and `kerncap schema judge-settings` said no such schema
    const r = await cli(["schema", "judge-settings"]);
    expect(r.code).toBe(0);
    const js = JSON.parse(r.out);
    expect(js.$id).toBe(JUDGE_SCHEMA);
    expect(js.properties.schema.const).toBe(JUDGE_SCHEMA);
    expect(js.properties.settings.properties.rtol).toBeDefined();
    expect(SCHEMA_NAMES).toContain(JUDGE_SCHEMA.replace(/^kerncap\.|\/\d+$/g, ""));
    const dir = join(tempDir(), "cap");
    await makeCapture(dir);
    const file = writeJudging(dir, { rtol: 1e-3, multiset: ["0"] })!;
    expect(v.safeParse(JudgeFile, JSON.parse(readFileSync(file, "utf8"))).success).toBe(true);
  });
});

describe("kerncap doctor", () => {
  test.skipIf(HAS_GPU)("without a GPU: libcuda fails with its fix, GPU checks skipped, exit 2, valid document", async () => {
    const r = await cli(["doctor", "--json"]);
    expect(r.code).toBe(2);
    const doc = JSON.parse(r.out);
    expect(v.safeParse(DOCUMENTS.doctor, doc).success).toBe(true);
    const by = Object.fromEntries(doc.checks.map((c: any) => [c.id, c]));
    expect(by.libcuda.status).toBe("fail");
    expect(by.libcuda.fix).toContain("KERNCAP_LIBCUDA");
    // what one can still do without a GPU: the demo first, to try the rest on
    expect(by.libcuda.fix).toContain(`; ${WITHOUT_GPU}.`);
    expect(WITHOUT_GPU).toStartWith("kerncap demo (a sample capture to try the verbs on), inspect, pack, unpack, export, judge, clean, schema");
    expect(by["va-reservation"].status).toBe("skip");
    expect(by["capture-replay"].status).toBe("skip");
    for (const id of ["cupti", "nvcc", "ncu", "python", "cache", "tmpdir", "aslr", "confined-build"]) expect(by[id], id).toBeDefined();
  });
  test("tmpdir: ok where a private folder can be made; a TMPDIR others can write (not sticky) fails with E_TMPDIR's words and fix (trial 11: doctor said ok, every build failed E_TMPDIR)", async () => {
    const { checkTmpdir } = await import("../../src/doctor.ts");
    expect(checkTmpdir().status).toBe("ok");
    const shared = tempDir();
    chmodSync(shared, 0o777);
    const saved = process.env.TMPDIR;
    process.env.TMPDIR = shared;
    try {
      const c = checkTmpdir();
      expect(c.status).toBe("fail");
      expect(c.detail).toContain(`TMPDIR ${shared} is not safe`);
      expect(c.fix).toContain("Set TMPDIR to a folder of your own");
    } finally {
      if (saved === undefined) delete process.env.TMPDIR;
      else process.env.TMPDIR = saved;
    }
  });
  test("doctor's fix gives the one list of what works without a GPU; the E_NO_GPU hint is short and points at doctor and the builds (nu12 #14: ~110 words in every record)", () => {
    expect(noDriverError([]).hint).toBe(NO_GPU_HINT);
    expect(NO_GPU_HINT.split(/\s+/).length).toBeLessThan(45);
    expect(NO_GPU_HINT).toContain("kerncap doctor lists what works here");
    expect(NO_GPU_HINT).toContain("eval --build-only");
    expect(WITHOUT_GPU).toContain("validate still rebuilds the edited source");
  });
  test("ncu: found on PATH (its version said), missing a warning that only profile needs it", () => {
    const d = tempDir();
    writeFileSync(join(d, "ncu"), "#!/bin/sh\necho 'Version 2025.3.1.0 (build 1)'\n");
    chmodSync(join(d, "ncu"), 0o755);
    expect(checkNcu({ PATH: d, CUDA_HOME: join(d, "none") })).toEqual({ id: "ncu", status: "ok", detail: `${join(d, "ncu")}: Nsight Compute 2025.3.1.0` });
    const miss = checkNcu({ PATH: join(d, "none"), CUDA_HOME: join(d, "none") });
    expect(miss.status).toBe("warn");
    expect(miss.fix).toContain("Only kerncap profile needs it");
  });
  test("cache folder: ok, the TMPDIR fallback a warning, neither writable a fail with the fix; ASLR read from /proc", () => {
    // the preferred folder unwritable, the TMPDIR fallback too: fail with the fix
    const c = checkCache({ ...process.env, KERNCAP_CACHE: "/proc/kerncap-cache", TMPDIR: "/proc/kerncap-tmp" });
    expect(c.status).toBe("fail");
    expect(c.fix).toContain("KERNCAP_CACHE");
    expect(c.detail).toContain("/proc/kerncap-tmp/kerncap-cache-");
    // the preferred folder unwritable, the fallback writable (src/cache.ts uses it): warn, naming it
    const tmp = tempDir();
    const w = checkCache({ ...process.env, KERNCAP_CACHE: "/proc/kerncap-cache", TMPDIR: tmp });
    expect(w.status).toBe("warn");
    expect(w.detail).toContain(join(tmp, "kerncap-cache-"));
    expect(w.fix).toContain("KERNCAP_CACHE");
    // a writable KERNCAP_CACHE: ok
    const own = tempDir();
    expect(checkCache({ ...process.env, KERNCAP_CACHE: own })).toMatchObject({ status: "ok" });
    expect(checkCache({ ...process.env, KERNCAP_CACHE: own }).detail).toContain(`${own} (from KERNCAP_CACHE)`);
    const d = tempDir();
    writeFileSync(join(d, "r"), "0\n");
    expect(checkAslr(join(d, "r")).detail).toContain("off");
    writeFileSync(join(d, "r"), "2\n");
    expect(checkAslr(join(d, "r")).detail).toContain("= 2");
    expect(checkAslr(join(d, "none")).status).toBe("skip");
  });
});
