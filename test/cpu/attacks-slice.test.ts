/**
 * The attack of the forged CUDA slice (adv20 #1): the slice src/*.kerncap-slice.cu is made from its
 * TU, and its first line's stamps (`sha256=` of the TU, `body=` of the slice) have no key. Whoever
 * writes the slice recomputes them: build.sh then compiles the slice as the TU's, so a broken TU
 * validated as the original kernel (the slice holds the original body), and an unchanged TU as a
 * hidden kernel. A confined build (validate --confine, kerncap mcp's validate, tune, profile,
 * evaluate; every eval candidate) compiles the slice kerncap makes from the TU at that moment,
 * whatever the stamps say; an eval candidate carrying a slice kerncap did not make from its TU is
 * refused (E_CANDIDATE) before any build; the user's own plain build keeps compiling a slice they
 * edited by hand (its body= stamp then differs), and replaces one whose stamps were written over it. A stand-in nvcc (no CUDA toolkit needed) writes the text it compiled as its module and
 * the dependency list a confined build asks for.
 */
import { afterAll, beforeAll, describe, expect, spyOn, test } from "bun:test";
import { cpSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { writeDemo } from "../../src/capture/demo.ts";
import { refreshSlice, remakeStaleSlice, sha256Text, sliceMetaOf } from "../../src/frontends/cuda/slice.ts";
import { log } from "../../src/log.ts";
import { buildReproducer } from "../../src/frontends/build.ts";
import "../../src/frontends/index.ts"; // the registry: a confined build remakes what the capture's frontend generates
import { materialise, parseCandidate } from "../../src/eval/candidates.ts";
import type { Manifest } from "../../src/format/manifest.ts";
import { tempDir } from "./fixtures.ts";
import { connected, doc } from "./mcp-client.ts";

/** nvcc's stand-in: the module is the text of the source it compiled; -MF FILE gets a dependency list. */
const FAKE_NVCC = `#!/usr/bin/env bash
src=""; out=""; mf=""; prev=""
for a in "$@"; do
  case "$a" in *.cu) src="$a";; esac
  [ "$prev" = "-o" ] && out="$a"; [ "$prev" = "-MF" ] && mf="$a"; prev="$a"
done
if [ -n "$mf" ]; then mkdir -p "$(dirname "$mf")"; echo "kernel.o:" >"$mf"; fi
cp "$src" "$out"
`;

const ADD = "p->a * p->x.data[i] + p->y.data[i]";

// the stand-in as NVCC for this file's builds and the MCP tools' children, the caller's NVCC back after
let savedNvcc: string | undefined;
beforeAll(() => {
  savedNvcc = process.env.NVCC;
  const nvcc = join(tempDir(), "nvcc");
  writeFileSync(nvcc, FAKE_NVCC, { mode: 0o755 });
  process.env.NVCC = nvcc;
});
afterAll(() => {
  if (savedNvcc === undefined) delete process.env.NVCC;
  else process.env.NVCC = savedNvcc;
});

/** A demo capture, its manifest and the paths of its TU and slice. */
function demo(): { dir: string; m: Manifest; tu: string; slice: string } {
  const { dir, manifest } = writeDemo(join(tempDir(), "cap"), false);
  const meta = sliceMetaOf(manifest)!;
  return { dir, m: manifest, tu: join(dir, "src", meta.tu), slice: join(dir, "src", meta.slice) };
}

/** The slice `text` with its body replaced by `body` and both stamps recomputed: the first line names `tuText`'s sha256. */
function forged(text: string, body: string, tuText: string): string {
  const first = text.slice(0, text.indexOf("\n"));
  return `${first.replace(/ sha256=[0-9a-f]{64} body=[0-9a-f]{64}$/, ` sha256=${sha256Text(tuText)} body=${sha256Text(body)}`)}\n${body}`;
}
const bodyOf = (text: string) => text.slice(text.indexOf("\n") + 1);

/** The TU broken (a wrong result) with a slice holding the original body, stamped as made from the broken TU. */
function brokenTuOriginalSlice(tu: string, slice: string): void {
  const bad = readFileSync(tu, "utf8").replace(ADD, "p->a * p->x.data[i] - p->y.data[i] /*WRONG*/");
  writeFileSync(slice, forged(readFileSync(slice, "utf8"), bodyOf(readFileSync(slice, "utf8")), bad));
  writeFileSync(tu, bad);
}

/** The TU unchanged with a slice holding a hidden change, its stamps recomputed. */
function hiddenSlice(tu: string, slice: string): void {
  const text = readFileSync(slice, "utf8");
  writeFileSync(slice, forged(text, bodyOf(text).replace(ADD, `${ADD} + 1.0f /*HIDDEN*/`), readFileSync(tu, "utf8")));
}

describe("a confined build compiles the slice kerncap makes from the TU, whatever the stamps", () => {
  test("the TU broken, the slice the original with stamps recomputed: the broken TU's kernel is compiled", async () => {
    const { dir, m, tu, slice } = demo();
    brokenTuOriginalSlice(tu, slice);
    const b = await buildReproducer(dir, { quiet: true, force: false, confine: m });
    expect(readFileSync(b.module, "utf8")).toContain("/*WRONG*/");
  });

  test("the TU unchanged, a hidden change in the slice with stamps recomputed: the TU's kernel is compiled; the user's plain build compiles the slice as it is (their choice)", async () => {
    const { dir, m, tu, slice } = demo();
    hiddenSlice(tu, slice);
    const confined = await buildReproducer(dir, { quiet: true, force: false, confine: m });
    const built = readFileSync(confined.module, "utf8");
    expect(built).not.toContain("HIDDEN");
    expect(built).toContain(ADD);
    const plain = await buildReproducer(dir, { quiet: true, force: false });
    expect(readFileSync(plain.module, "utf8")).toContain("/*HIDDEN*/");
  });

  test("kerncap mcp's validate: the slice written by hand with its stamps recomputed is not what is built", async () => {
    const { dir, tu, slice } = demo();
    hiddenSlice(tu, slice);
    const c = await connected({ name: "attacker" });
    try {
      const r = doc(await c.callTool({ name: "validate", arguments: { dir } }));
      expect(r.error?.message).toContain("is not a readable cubin"); // it built: the stand-in's module is then refused
      const built = readFileSync(join(dir, "build/kernel.cubin"), "utf8");
      expect(built).toContain(ADD);
      expect(built).not.toContain("HIDDEN");
    } finally {
      await c.close();
    }
  }, 60_000);
});

describe("the user's own validate", () => {
  test("the user's plain validate replaces such a slice by kerncap's, and says so (its stamps name the TU, but kerncap makes another text from it: adversary 43, a received archive's)", () => {
    const { dir, m, tu, slice } = demo();
    const meta = sliceMetaOf(m)!;
    const warned: string[] = [];
    const spy = spyOn(log, "warn").mockImplementation(((...a: unknown[]) => void warned.push(a.join(" "))) as never);
    try {
      expect(refreshSlice(dir, meta).action).toBe("fresh");
      expect(warned).toEqual([]); // kerncap's own slice: nothing to say
      const made = readFileSync(slice, "utf8");
      hiddenSlice(tu, slice);
      expect(readFileSync(slice, "utf8")).toContain("HIDDEN");
      expect(refreshSlice(dir, meta).action).toBe("remade");
      expect(readFileSync(slice, "utf8")).toBe(made); // kerncap's slice of the TU again
      expect(warned.join("\n")).toContain(
        "src/saxpy.kerncap-slice.cu is stamped as made from src/saxpy.cu but is not what kerncap makes from it: replaced by the slice kerncap makes from src/saxpy.cu",
      );
    } finally {
      spy.mockRestore();
    }
  });
});

describe("kerncap eval: a candidate carrying a slice kerncap did not make from its TU", () => {
  /** materialise's refusal of candidate `spec` of capture `dir` (its code and message), or "copied". */
  async function outcome(dir: string, spec: string): Promise<string[]> {
    try {
      await materialise(dir, parseCandidate(spec), join(tempDir(), "copy"));
      return ["copied"];
    } catch (e) {
      return [(e as { code?: string }).code ?? "?", (e as Error).message];
    }
  }

  test("refused before any build (E_CANDIDATE, saying to edit the TU): a tree with a broken TU and the original slice stamped for it, a replacement slice with a hidden change, a slice edited by hand", async () => {
    const { dir } = demo();
    const d = tempDir();
    // a tree: the broken TU and the slice of the original stamped as made from it
    cpSync(join(dir, "src"), join(d, "a"), { recursive: true });
    brokenTuOriginalSlice(join(d, "a/saxpy.cu"), join(d, "a/saxpy.kerncap-slice.cu"));
    // a replacement file: the slice with a hidden change, stamped for the capture's TU
    mkdirSync(join(d, "b"));
    cpSync(join(dir, "src/saxpy.kerncap-slice.cu"), join(d, "b/saxpy.kerncap-slice.cu"));
    hiddenSlice(join(dir, "src/saxpy.cu"), join(d, "b/saxpy.kerncap-slice.cu"));
    // a tree whose slice was edited by hand (its body= no longer its text's)
    cpSync(join(dir, "src"), join(d, "c"), { recursive: true });
    const sl = join(d, "c/saxpy.kerncap-slice.cu");
    writeFileSync(sl, readFileSync(sl, "utf8").replace(ADD, `2.0f * ${ADD}`));
    for (const [spec, what] of [
      [join(d, "a"), "is stamped as made from src/saxpy.cu but is not what kerncap makes from it"],
      [join(d, "b/saxpy.kerncap-slice.cu"), "is stamped as made from src/saxpy.cu but is not what kerncap makes from it"],
      [join(d, "c"), "was edited by hand"],
    ] as const) {
      const [code, message] = await outcome(dir, spec);
      expect(code, spec).toBe("E_CANDIDATE");
      expect(message).toContain(`src/saxpy.kerncap-slice.cu ${what}`);
    }
  });

  test("taken: a copy of src/ as it is, and one whose TU was edited since its slice was made (the build makes the slice again, as validate does)", async () => {
    const { dir } = demo();
    const d = tempDir();
    cpSync(join(dir, "src"), join(d, "same"), { recursive: true });
    cpSync(join(dir, "src"), join(d, "edited"), { recursive: true });
    writeFileSync(join(d, "edited/saxpy.cu"), readFileSync(join(d, "edited/saxpy.cu"), "utf8").replace(ADD, `2.0f * ${ADD}`));
    expect(await outcome(dir, join(d, "same"))).toEqual(["copied"]);
    expect(await outcome(dir, join(d, "edited"))).toEqual(["copied"]);
  });

  test("beside a fast build (defer): the check is handed back, the slice left until it runs; run, it replaces such a slice and says a source changed; kerncap's own slice: nothing changed", () => {
    const { dir, m, tu, slice } = demo();
    const made = readFileSync(slice, "utf8");
    hiddenSlice(tu, slice);
    const spy = spyOn(log, "warn").mockImplementation((() => {}) as never);
    try {
      const later = remakeStaleSlice(dir, m, { defer: true });
      expect(typeof later).toBe("function");
      expect(readFileSync(slice, "utf8")).toContain("HIDDEN"); // not checked yet
      expect((later as () => boolean)()).toBe(true);
      expect(readFileSync(slice, "utf8")).toBe(made);
      const again = remakeStaleSlice(dir, m, { defer: true });
      expect((again as () => boolean)()).toBe(false);
    } finally {
      spy.mockRestore();
    }
  });
});
