/**
 * What a harness reads from the verbs' `--json` documents, on the real demo capture (kerncap demo)
 * and the test fixture, through the CLI as a harness runs it (a child kerncap, stdout and stderr
 * apart): unpack --force's losses, judging `used`/`accept` in judge and inspect, judge --dtype's
 * misfits, inspect --verify's error line, pack/export's warnings, doctor's machine answer.
 */
import { describe, expect, test } from "bun:test";
import { existsSync, openSync, readFileSync, writeFileSync, writeSync, closeSync, appendFileSync } from "node:fs";
import { join } from "node:path";
import * as v from "valibot";
import { DOCUMENTS } from "../../src/format/documents.ts";
import type { Manifest } from "../../src/format/manifest.ts";
import { regionDtypeWarnings } from "../../src/replay/dtype-check.ts";
import { cudaDeclaredRegionTypes, cudaPointee, demangledParams } from "../../src/frontends/cuda/declared-types.ts";
import { makeCapture, tempDir } from "./fixtures.ts";

const MAIN = join(import.meta.dir, "../../src/cli/main.ts");
const HAS_GPU = existsSync("/dev/nvidiactl") || existsSync("/dev/nvidia0");

/** A child kerncap in `cwd` with its own state folder: exit status, the --json document (when stdout holds one), stderr and its WARN lines. */
function kc(cwd: string, ...args: string[]) {
  const p = Bun.spawnSync([process.execPath, MAIN, ...args], {
    cwd,
    stdout: "pipe",
    stderr: "pipe",
    env: { ...process.env, XDG_STATE_HOME: join(cwd, ".state"), NO_COLOR: "1" },
  });
  const out = p.stdout.toString();
  const err = p.stderr.toString();
  let doc: Record<string, any> | undefined;
  try {
    doc = JSON.parse(out);
  } catch {
    doc = undefined;
  }
  return { code: p.exitCode, doc, out, err, warns: err.split("\n").filter((l) => /^\[warn\]|\bWARN\b/.test(l)) };
}

/** `doc` valid against its verb's schema (kerncap schema VERB). */
function valid(name: keyof typeof DOCUMENTS, doc: unknown): void {
  const r = v.safeParse(DOCUMENTS[name], doc);
  expect(r.success ? [] : r.issues.map((i) => `${v.getDotPath(i)}: ${i.message}`)).toEqual([]);
}

/** A fresh demo capture `name` in a new folder; @returns the folder it lies in. */
function demoIn(name = "cap"): string {
  const root = tempDir();
  // by the kerncap the test runs, under its state folder: the demo is then sealed as made here by that user (src/format/made-here.ts)
  expect(kc(root, "demo", name).code).toBe(0);
  return root;
}

describe("unpack over an existing capture (nu10 #8)", () => {
  test("E_EXISTS's hint leads with another name; --force says the src/ edits and the capture made here it loses, in --json's warnings too", () => {
    const root = demoIn();
    expect(kc(root, "pack", "cap", "-o", "cap.zip").code).toBe(0);
    appendFileSync(join(root, "cap/src/saxpy.cu"), "// my precious edit\n");
    const refused = kc(root, "unpack", "cap.zip", "--json");
    expect(refused.code).toBe(2);
    expect(refused.doc!.error.code).toBe("E_EXISTS");
    expect(refused.doc!.error.hint).toStartWith("To keep it and unpack a copy beside it, give another name: kerncap unpack cap.zip -o cap-copy");
    const forced = kc(root, "unpack", "cap.zip", "--force", "--json");
    expect(forced.code).toBe(0);
    valid("unpack", forced.doc);
    const w = forced.doc!.warnings as string[];
    expect(w.some((x) => x.includes("loses your edits") && x.includes("src/saxpy.cu"))).toBe(true);
    expect(w.some((x) => x.includes("was not unpacked from an archive"))).toBe(true);
    expect(w).toHaveLength(forced.warns.length); // every WARN line on stderr, one entry each
    expect(readFileSync(join(root, "cap/src/saxpy.cu"), "utf8")).not.toContain("my precious edit");
    // the copy the hint names: beside the original, nothing lost, nothing warned
    const copy = kc(root, "unpack", "cap.zip", "-o", "cap-copy", "--json");
    expect(copy.code).toBe(0);
    expect(copy.doc!.warnings).toEqual([]);
    // with that copy there, the hint names a free name (nu13: it named cap-copy again, and its command failed too)
    const again = kc(root, "unpack", "cap.zip", "--json");
    expect(again.doc!.error.hint).toStartWith("To keep it and unpack a copy beside it, give another name: kerncap unpack cap.zip -o cap-copy2");
    expect(kc(root, "unpack", "cap.zip", "-o", "cap-copy2", "--json").code).toBe(0);
  });

  test("--force names as lost neither kerncap's build/ outputs nor the slice it generates, and no 'then counts as received' for a folder unpacked already (nu16 #9)", () => {
    const root = demoIn();
    expect(kc(root, "pack", "cap", "-o", "cap.zip").code).toBe(0);
    expect(kc(root, "unpack", "cap.zip", "-o", "theirs").code).toBe(0);
    const src = join(root, "theirs/src/saxpy.cu");
    writeFileSync(src, readFileSync(src, "utf8").replace("p->a * p->x.data[i]", "p->x.data[i] * p->a"));
    // a build: build/ outputs, the slice made again from the edited TU (other bytes than the archive's)
    expect(kc(root, "validate", "theirs", "--build-only", "--trust").code).toBe(0);
    const refused = kc(root, "unpack", "cap.zip", "-o", "theirs", "--json");
    expect(refused.doc!.error.hint).not.toContain("then counts as received");
    const forced = kc(root, "unpack", "cap.zip", "-o", "theirs", "--force", "--json");
    expect(forced.code).toBe(0);
    const w = forced.doc!.warnings as string[];
    expect(w.some((x) => x.includes("loses your edits") && x.includes("src/saxpy.cu"))).toBe(true);
    expect(w.join("\n")).not.toContain("kerncap-slice");
    expect(w.join("\n")).not.toContain("build/");
  });
});

describe("judging settings in judge and inspect (nu10 #11, #28)", () => {
  test("no settings: used and judgingUsed both false, nothing to accept; a received capture's: the digest and the command that accepts them", () => {
    const root = demoIn();
    const none = kc(root, "judge", "cap", "--json");
    valid("judge", none.doc);
    expect(none.doc!.file).toBeNull();
    expect(none.doc!.used).toBe(false);
    expect(none.doc!.accept).toBeNull();
    const seen = kc(root, "inspect", "cap", "--json");
    valid("inspect", seen.doc);
    expect(seen.doc!.judgingUsed).toBe(false);
    expect(seen.doc!.judgingAccept).toBeNull();

    // settings of one's own: used, nothing awaits acceptance
    const own = kc(root, "judge", "cap", "--rtol", "1e-4", "--json");
    expect(own.doc!.used).toBe(true);
    expect(own.doc!.accept).toBeNull();
    expect(kc(root, "inspect", "cap", "--json").doc!.judgingAccept).toBeNull();

    // received: the digest (stderr's only, before) in both documents, and the command that accepts it
    expect(kc(root, "pack", "cap", "-o", "cap.zip").code).toBe(0);
    expect(kc(root, "unpack", "cap.zip", "-o", "r2").code).toBe(0);
    const got = kc(root, "judge", "r2", "--json");
    valid("judge", got.doc);
    expect(got.doc!.used).toBe(false);
    const digest = got.doc!.accept.digest as string;
    expect(digest).toMatch(/^[0-9a-f]{64}$/);
    expect(got.doc!.accept.command).toBe(`kerncap judge r2 --accept=${digest}`);
    expect(got.doc!.warnings.join("\n")).toContain(digest); // the WARN line that said it, in the document too
    const insp = kc(root, "inspect", "r2", "--json");
    valid("inspect", insp.doc);
    expect(insp.doc!.judgingUsed).toBe(false);
    expect(insp.doc!.judgingAccept).toEqual({ digest, command: `kerncap judge r2 --accept=${digest}` });
    // the command given does what it says
    const accepted = kc(root, ...got.doc!.accept.command.split(" ").slice(1), "--json");
    expect(accepted.code).toBe(0);
    expect(accepted.doc!.used).toBe(true);
    expect(accepted.doc!.accept).toBeNull();
    expect(kc(root, "inspect", "r2", "--json").doc!.judgingUsed).toBe(true);
  });
});

describe("judge --dtype REGION=T that does not fit its region (nu10 #12)", () => {
  test("the signature's type contradicted: a warning on stderr and in --json, the type stored as given; a fitting one says nothing", async () => {
    const root = tempDir();
    await makeCapture(join(root, "cap")); // scale(float*, int): parameter 0 points into region 0
    const wrong = kc(root, "judge", "cap", "--dtype", "0=fp16", "--json");
    expect(wrong.code).toBe(0);
    valid("judge", wrong.doc);
    expect(wrong.doc!.settings.dtypes).toEqual({ "0": "fp16" });
    expect(wrong.doc!.warnings).toEqual([
      "--dtype 0=fp16: the kernel's signature gives region [0] fp32 elements (parameter 0, float*, points into it); its elements are read as fp16, which changes what the tolerance allows",
    ]);
    expect(wrong.warns).toHaveLength(1);
    const right = kc(root, "judge", "cap", "--dtype", "param:0=fp32", "--dtype", "1=fp16", "--json");
    expect(right.doc!.warnings).toEqual([]); // region 1: no parameter of the signature points into it
  });

  test("a size that is no whole number of elements; the CUDA signature read from the demangled name", () => {
    const params = new Uint8Array(8);
    new DataView(params.buffer).setBigUint64(0, 0x1000n, true);
    const m = {
      kernel: { frontend: "cuda", demangled: "void k<float, 4>(unsigned int const* __restrict__, int)" },
      params: { layout: [{ index: 0, offset: 0, size: 8 }] },
      regions: [{ va: "0x1000", size: 10 }],
    } as unknown as Manifest;
    const declared = (mm: Manifest) => (p: Uint8Array) => cudaDeclaredRegionTypes(mm, p);
    // the layout has one parameter, the name two: the signature says nothing; the size does
    expect(regionDtypeWarnings(m, params, { "0": "fp32" }, declared(m))).toEqual([
      "--dtype 0=fp32: region [0] is 10 bytes, not a whole number of fp32 elements (4 bytes each): is fp32 its element type?",
    ]);
    expect(regionDtypeWarnings(m, params, { "0": "u16" }, declared(m))).toEqual([]);
    expect(demangledParams("void k<float, 4>(unsigned int const* __restrict__, int)")).toEqual(["unsigned int const* __restrict__", "int"]);
    expect(demangledParams("saxpy(Saxpy const*)")).toEqual(["Saxpy const*"]);
    expect(cudaPointee("unsigned int const* __restrict__")).toBe("u32");
    expect(cudaPointee("Saxpy const*")).toBeUndefined();
    expect(cudaPointee("float**")).toBeUndefined();
    const two = { ...m, params: { layout: [...m.params.layout, { index: 1, offset: 8, size: 4 }] } } as unknown as Manifest;
    expect(regionDtypeWarnings(two, new Uint8Array([...params, 0, 0, 0, 0]), { "0": "u16" }, declared(two))).toEqual([
      "--dtype 0=u16: the kernel's signature gives region [0] u32 elements (parameter 0, unsigned int const* __restrict__, points into it); its elements are read as u16, which changes what the tolerance allows",
    ]);
  });
});

describe("inspect --verify of a damaged capture (nu10 #20)", () => {
  test("exit 2 with its kerncap.inspect/1 document; stderr's ERROR line leads with the code, as every error's", () => {
    const root = demoIn();
    const fd = openSync(join(root, "cap/memory/before.bin"), "r+");
    const b = new Uint8Array(1);
    b[0] = 0xa5;
    writeSync(fd, b, 0, 1, 5000);
    closeSync(fd);
    const r = kc(root, "inspect", "cap", "--verify", "--json");
    expect(r.code).toBe(2);
    expect(r.doc!.schema).toBe("kerncap.inspect/1");
    expect(r.doc!.integrity.code).toBe("E_CHECKSUM");
    expect(r.err).toMatch(/(ERROR|\[error\]) +(\[kerncap\] +)?E_CHECKSUM: checksum mismatch in memory\/before.bin/);
    // the text report ends with its integrity line, the damage said there too (nu16 #10: it ended at judging)
    const text = kc(root, "inspect", "cap", "--verify");
    expect(text.code).toBe(2);
    expect(text.out).toMatch(/\nintegrity  DAMAGED: checksum mismatch in memory\/before.bin/);
  });
});

describe("pack and export --json: every WARN in warnings (nu10 #22)", () => {
  test("pack's private-fields warning and export's changed sources are in warnings; changedSources are {path, change}", () => {
    const root = demoIn();
    const p = kc(root, "pack", "cap", "--json");
    expect(p.code).toBe(0);
    valid("pack", p.doc);
    expect(p.warns.length).toBeGreaterThan(0);
    expect(p.doc!.warnings).toHaveLength(p.warns.length);
    expect(p.doc!.warnings.some((w: string) => w.includes("kerncap pack --redact leaves them out"))).toBe(true);
    writeFileSync(join(root, "cap/src/extra.cuh"), "// more\n");
    const e = kc(root, "export", "cap", "-o", "repro", "--json");
    expect(e.code).toBe(0);
    valid("export", e.doc);
    expect(e.doc!.changedSources).toEqual([{ path: "src/extra.cuh", change: "added" }]);
    expect(e.doc!.warnings.some((w: string) => w.includes("src/ differs from the source the captured module was built from: src/extra.cuh (added)"))).toBe(
      true,
    );
    expect(e.doc!.warnings).toHaveLength(e.warns.length);
  });
});

describe("doctor --json's machine answer (nu10 #25)", () => {
  test.skipIf(HAS_GPU)("no GPU here: gpus [], canReplay and canCapture false", () => {
    const r = kc(tempDir(), "doctor", "--json", "--no-capture");
    valid("doctor", r.doc);
    expect(r.doc!.gpus).toEqual([]);
    expect(r.doc!.canReplay).toBe(false);
    expect(r.doc!.canCapture).toBe(false);
  });
});
