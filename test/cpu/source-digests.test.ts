/**
 * The reproducer's sources as kerncap wrote them (src/format/source-digests.ts: manifest.sources,
 * recorded at capture and by `kerncap demo`), and `kerncap inspect`'s reproducer section: the file
 * to edit, the compile flags (assumed or recovered), and which files under src/ differ from what
 * the capture wrote (found by a new user: inspect said nothing of src/, edited or not).
 */
import { describe, expect, test } from "bun:test";
import { mkdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import * as v from "valibot";
import { finalizeCapture } from "../../src/capture/finalize.ts";
import { runCli } from "../../src/cli/main.ts";
import { readManifest } from "../../src/format/capture-dir.ts";
import { DOCUMENTS } from "../../src/format/documents.ts";
import { differingFiles, sourceDigests } from "../../src/format/source-digests.ts";
import { tempDir, thrownBy, writeRawCapture } from "./fixtures.ts";

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

const sha = (t: string) => new Bun.CryptoHasher("sha256").update(t).digest("hex");

describe("the reproducer's sources as written", () => {
  test("finalize records every file under src/ in manifest.sources, sorted, nested folders too", async () => {
    const cap = join(tempDir("kerncap-sources-"), "cap");
    const tmp = `${cap}.tmp-${process.pid}`;
    await finalizeCapture(writeRawCapture(tmp), {
      tmpDir: tmp,
      finalDir: cap,
      force: false,
      command: ["./app"],
      match: "scale",
      beforeRename: (d) => {
        mkdirSync(join(d, "src/inc"), { recursive: true });
        writeFileSync(join(d, "src/k.cu"), "__global__ void k() {}\n");
        writeFileSync(join(d, "src/inc/k.h"), "#pragma once\n");
      },
    });
    expect(readManifest(cap).sources).toEqual([
      { path: "src/inc/k.h", sha256: sha("#pragma once\n") },
      { path: "src/k.cu", sha256: sha("__global__ void k() {}\n") },
    ]);
  });

  test("differingFiles: edited, added, gone; a link in place of a file is edited; ignored files in no list", () => {
    const dir = tempDir("kerncap-sources-");
    mkdirSync(join(dir, "src"));
    for (const f of ["a.cu", "b.h", "c.h", "slice.cu"]) writeFileSync(join(dir, "src", f), f);
    const rec = sourceDigests(dir);
    expect(rec.map((r) => r.path)).toEqual(["src/a.cu", "src/b.h", "src/c.h", "src/slice.cu"]);
    expect(differingFiles(dir, rec)).toEqual({ edited: [], added: [], gone: [] });
    writeFileSync(join(dir, "src/a.cu"), "edited");
    rmSync(join(dir, "src/b.h"));
    rmSync(join(dir, "src/c.h"));
    symlinkSync("/etc/hostname", join(dir, "src/c.h"));
    writeFileSync(join(dir, "src/new.h"), "new");
    writeFileSync(join(dir, "src/slice.cu"), "remade");
    expect(differingFiles(dir, rec, { ignore: (p) => p === "src/slice.cu" })).toEqual({
      edited: ["src/a.cu", "src/c.h"],
      added: ["src/new.h"],
      gone: ["src/b.h"],
    });
    // a recorded path is looked up in the walk of src/, never stat'ed by name (adversary 77: a received record's
    // ../../etc/shadow said whether that file existed): a path under a link counts as edited, one outside as gone
    mkdirSync(join(dir, "real"));
    writeFileSync(join(dir, "real/x.h"), "x");
    symlinkSync(join(dir, "real"), join(dir, "src/linked"));
    const outside = join(dir, "outside.txt");
    writeFileSync(outside, "secret");
    const crafted = [
      { path: "src/linked/x.h", sha256: sha("x") },
      { path: "src/../outside.txt", sha256: sha("secret") },
    ];
    expect(differingFiles(dir, crafted)).toMatchObject({ edited: ["src/linked/x.h"], gone: ["src/../outside.txt"] });
  });

  test("a manifest whose sources[] leave src/ (.., absolute, NUL, control characters, past 4096 bytes) is E_MANIFEST, never an internal error nor a look outside", async () => {
    const d = tempDir("kerncap-sources-");
    const cap = join(d, "cap");
    expect(await runCli(["demo", cap])).toBe(0);
    const mf = join(cap, "kerncap.json");
    const m = JSON.parse(readFileSync(mf, "utf8"));
    for (const bad of [
      "../../../../etc/shadow",
      "src/../../x",
      "/etc/passwd",
      "src/a\u0000b",
      "src/a\nb",
      "src//a",
      "src/./a",
      "kernel/module.cubin",
      `src/${"a".repeat(5000)}`,
    ]) {
      writeFileSync(mf, JSON.stringify({ ...m, sources: [{ path: bad, sha256: sha("x") }] }));
      const e = await thrownBy(() => readManifest(cap));
      expect(e?.code, JSON.stringify(bad)).toBe("E_MANIFEST");
      expect(e!.message).toContain("sources[0].path");
    }
  });
});

describe("kerncap inspect: the reproducer section", () => {
  test("the file to edit, the flags (assumed), src/ as written; then the edited and added files, in text and --json", async () => {
    const dir = join(tempDir("kerncap-sources-"), "demo");
    expect(await cli(["demo", dir])).toMatchObject({ code: 0 });
    const text = (await cli(["inspect", dir])).out;
    expect(text).toContain(
      // the words build.sh passes (its include folder rewritten into src/) beside the captured ones (a new user's finding: -Idemo/app read as broken)
      "reproducer edit src/saxpy.cu (build.sh compiles src/saxpy.kerncap-slice.cu, made from it); nvcc flags -O3 -std=c++17 -I./src in build.sh (captured -O3 -std=c++17 -Idemo/app, assumed: no compile command was found; include folders copied into src/)\n           src/ as the capture wrote it (what built kernel/module.fatbin)\n",
    );
    writeFileSync(join(dir, "src/saxpy.cu"), "// edited\n");
    writeFileSync(join(dir, "src/extra.cuh"), "#pragma once\n");
    // the slice is kerncap's (validate remakes it): never the user's edit
    writeFileSync(join(dir, "src/saxpy.kerncap-slice.cu"), "// remade\n");
    expect((await cli(["inspect", dir])).out).toContain(
      "           src/ differs from what the capture wrote, which built kernel/module.fatbin: src/saxpy.cu (edited), src/extra.cuh (added)\n",
    );
    const j = await cli(["inspect", dir, "--json"]);
    const doc = JSON.parse(j.out);
    expect(v.safeParse(DOCUMENTS.inspect, doc).success).toBe(true);
    expect(doc.reproducer).toEqual({
      present: true,
      edit: ["src/saxpy.cu"],
      generated: ["src/saxpy.kerncap-slice.cu"],
      flags: {
        words: ["-O3", "-std=c++17", "-Idemo/app"],
        assumed: true,
        from: "assumed: no compile command was found",
        buildSh: ["-O3", "-std=c++17", "-I./src"],
      },
      sources: { edited: ["src/saxpy.cu"], added: ["src/extra.cuh"], gone: [] },
    });
    // the "not made" slice (after an agent's build): said as what build.sh then does, not "made from it" (a new user's finding)
    writeFileSync(join(dir, "src/saxpy.kerncap-slice.cu"), "// kerncap slice of src/saxpy.cu sha256=none\n// not made: an agent's build\n");
    expect((await cli(["inspect", dir])).out).toContain(
      "reproducer edit src/saxpy.cu (build.sh compiles it whole: src/saxpy.kerncap-slice.cu is not made, an agent's build); nvcc flags",
    );
    expect(JSON.parse((await cli(["inspect", dir, "--json"])).out).reproducer.generatedNotMade).toBe("an agent's build");
    // a manifest without the record (an older kerncap's capture): said, not guessed
    const mf = join(dir, "kerncap.json");
    const m = JSON.parse(await Bun.file(mf).text());
    delete m.sources;
    writeFileSync(mf, JSON.stringify(m));
    expect((await cli(["inspect", dir])).out).toContain("src/ not comparable: kerncap.json records no digests of it");
  });
});
