/**
 * `kerncap export` and the names of a capture's files (docs/security.md "Names in generated
 * files"): a name outside the portable set under build.sh/src/ (or data/, or a Triton kernel's
 * name that repro.py would import as a path) is refused, E_UNSAFE_PATH, before anything is written
 * and before any trust prompt; the exported Makefile takes src/'s names into no make syntax, and
 * `make build/kernel.cubin` still rebuilds when src/ changes (a fake build.sh: no nvcc needed).
 */
import { describe, expect, test } from "bun:test";
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { writeDemo } from "../../src/capture/demo.ts";
import { isKerncapError } from "../../src/errors.ts";
import { exportCapture } from "../../src/export/export.ts";
import { RECEIVED_MARK } from "../../src/format/file-names.ts";
import { exportOp } from "../../src/ops/export.ts";
import { tempDir } from "./fixtures.ts";

function demo(): { root: string; cap: string } {
  const root = tempDir("kerncap-export-names-");
  return { root, cap: writeDemo(join(root, "cap"), false).dir };
}

/** What `f` threw: its code, message and hint (a KerncapError), or null when it returned; what it wrote to stderr (the trust gate's listing) left out. */
function refusal(f: () => unknown): { code: string; message: string; hint: string } | null {
  const write = process.stderr.write;
  process.stderr.write = () => true;
  try {
    f();
  } catch (e) {
    if (isKerncapError(e)) return { code: e.code, message: e.message, hint: e.hint ?? "" };
    throw e;
  } finally {
    process.stderr.write = write;
  }
  return null;
}

function sh(cmd: string[], cwd: string): { code: number; out: string; err: string } {
  const p = Bun.spawnSync(cmd, { cwd, stdout: "pipe", stderr: "pipe" });
  return { code: p.exitCode ?? -1, out: p.stdout.toString(), err: p.stderr.toString() };
}

const HOSTILE: [string, string][] = [
  [";", "saxpy.cu;touch PWNED;#"],
  ["$", "k$(touch PWNED).cu"],
  ["backtick", "k`touch PWNED`.cu"],
  ["space", "my kernel.cu"],
  ["newline", "k.cu\ntouch PWNED"],
  ["#", "k#x.cu"],
  [":", "k:x.cu"],
  ["%", "k%.cu"],
];

describe("kerncap export: names outside the portable set", () => {
  for (const [what, name] of HOSTILE) {
    test(`a file under src/ named with ${what} is refused (E_UNSAFE_PATH, the name escaped), nothing written`, () => {
      const { root, cap } = demo();
      writeFileSync(join(cap, "src", name), "");
      const out = join(root, "out");
      const r = refusal(() => exportCapture(cap, out));
      expect(r?.code).toBe("E_UNSAFE_PATH");
      expect(r?.message).toContain(JSON.stringify(`src/${name}`).replace(/\n/g, "\\n"));
      expect(r?.message).not.toContain("\n");
      expect(r?.hint).toContain("Rename it");
      expect(existsSync(out)).toBe(false);
      expect(existsSync(join(root, "PWNED"))).toBe(false);
    });
  }

  test("a folder under src/ with such a name is refused too; a tool's own file there (.gitattributes: git runs what it names), hidden, is left out, never shipped", () => {
    const { root, cap } = demo();
    mkdirSync(join(cap, "src", "inc;x"));
    writeFileSync(join(cap, "src", "inc;x", "a.h"), "");
    expect(refusal(() => exportCapture(cap, join(root, "out")))?.message).toContain('"src/inc;x"');
    rmSync(join(cap, "src", "inc;x"), { recursive: true });
    expect(existsSync(join(root, "out"))).toBe(false);
    // a tool's own file (git's) under src/ is a hidden name: left out as pack leaves it out (src/format/file-names.ts isLeftOutOfSources)
    writeFileSync(join(cap, "src", ".gitattributes"), "* filter=x\n");
    const r = exportCapture(cap, join(root, "out"));
    expect(r.leftOut).toEqual(["src/.gitattributes"]);
    expect(existsSync(join(root, "out", "src", ".gitattributes"))).toBe(false);
  });

  test("a received capture's hostile name is refused before the trust prompt (not E_UNTRUSTED, no digest to trust)", () => {
    const { root, cap } = demo();
    // a state folder of its own, without the demo's record of its own build
    const saved = process.env.XDG_STATE_HOME;
    process.env.XDG_STATE_HOME = tempDir("kerncap-state-");
    try {
      writeFileSync(join(cap, RECEIVED_MARK), "{}\n");
      // untouched, the received capture meets the gate
      expect(refusal(() => exportOp(cap, join(root, "out"), { trust: false }))?.code).toBe("E_UNTRUSTED");
      writeFileSync(join(cap, "src", "saxpy.cu;id -un >kc-injected;#"), "");
      for (const trust of [false, true]) {
        const r = refusal(() => exportOp(cap, join(root, "out"), { trust }));
        expect(r?.code).toBe("E_UNSAFE_PATH");
        expect(r?.message).toContain('"src/saxpy.cu;id -un >kc-injected;#"');
      }
      expect(existsSync(join(root, "out"))).toBe(false);
    } finally {
      if (saved === undefined) delete process.env.XDG_STATE_HOME;
      else process.env.XDG_STATE_HOME = saved;
    }
  });

  test("a Triton kernel name that is not a Python identifier (repro.py would import src/<it>.py: ../../ leaves the folder) is refused", () => {
    const { root, cap } = demo();
    const manifest = join(cap, "kerncap.json");
    const m = JSON.parse(readFileSync(manifest, "utf8"));
    m.source = { frontend: "triton", fnName: "../../../../tmp/evil" };
    writeFileSync(manifest, JSON.stringify(m));
    const r = refusal(() => exportCapture(cap, join(root, "out")));
    expect(r?.code).toBe("E_UNSAFE_PATH");
    expect(r?.message).toContain("not a Python identifier");
    expect(existsSync(join(root, "out"))).toBe(false);
  });
});

describe.skipIf(!Bun.which("make"))("kerncap export: the Makefile's rebuild of src/", () => {
  test("make build/kernel.cubin rebuilds when a source is edited, added or removed, not otherwise; a name made later in src/ stays inert", () => {
    const { root, cap } = demo();
    const out = join(root, "out");
    exportCapture(cap, out);
    // a stand-in build.sh (no nvcc here): counts its runs, writes the module
    writeFileSync(join(out, "build.sh"), 'echo run >> runs.log; mkdir -p "$(dirname "$1")"; cat src/*.cu > "$1"\n');
    const runs = () => (existsSync(join(out, "runs.log")) ? readFileSync(join(out, "runs.log"), "utf8").split("\n").length - 1 : 0);
    const make = () => {
      // file times are coarse (a clock tick): the change before a build, the build, and the change after it each in a tick of their own
      Bun.sleepSync(30);
      const r = sh(["make", "build/kernel.cubin"], out);
      expect(r.err).toBe("");
      expect(r.code).toBe(0);
      Bun.sleepSync(30);
    };
    make();
    expect(runs()).toBe(1);
    make();
    expect(runs()).toBe(1); // nothing changed
    const src = join(out, "src/saxpy.cu");
    writeFileSync(src, readFileSync(src, "utf8") + "\n// edited\n");
    make();
    expect(runs()).toBe(2);
    expect(readFileSync(join(out, "build/kernel.cubin"), "utf8")).toContain("// edited");
    make();
    expect(runs()).toBe(2);
    mkdirSync(join(out, "src/include"));
    writeFileSync(join(out, "src/include/util.h"), "");
    make();
    expect(runs()).toBe(3); // a new file in a new folder
    rmSync(join(out, "src/include/util.h"));
    make();
    expect(runs()).toBe(4); // a file removed: its folder changed
    // a name the user's own tools made after the export: make reads no name of src/, so it is no command
    const hostile = join(out, "src", "x.cu;touch PWNED;#");
    writeFileSync(hostile, "");
    make();
    expect(runs()).toBe(5);
    expect(existsSync(join(out, "PWNED"))).toBe(false);
  });
});
