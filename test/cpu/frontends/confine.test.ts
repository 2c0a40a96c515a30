/**
 * src/frontends/confine.ts and the dependency list it reads (src/frontends/cuda/nvcc.ts parseDeps):
 * a confined build (kerncap eval's, validate/tune/profile --confine, what kerncap mcp runs) in a
 * folder whose path holds a space, `$`, `#`, `:` or `(` builds as an unconfined one does (a trial's
 * `kerncap eval "my cap" …` was refused for reading "/tmp/…/my": the list was split at the space);
 * a build that did read outside is refused in the caller's words, its hint pointing at an
 * `#include` under src/ only when one names the file.
 */
import { afterEach, describe, expect, test } from "bun:test";
import { mkdirSync, readFileSync, realpathSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { writeDemo } from "../../../src/capture/demo.ts";
import { buildCandidate } from "../../../src/eval/build.ts";
import { parseCandidate } from "../../../src/eval/candidates.ts";
import { readManifest } from "../../../src/format/capture-dir.ts";
import { buildReproducer } from "../../../src/frontends/build.ts";
import { outsideReads, recordedSources } from "../../../src/frontends/confine.ts";
import { parseDeps } from "../../../src/frontends/cuda/nvcc.ts";
import { toolchainHeader } from "../../../src/frontends/cuda/repro.ts";
import { overrideSandboxSupport } from "../../../src/frontends/sandbox.ts";
import { NVCC } from "../../nvcc-fixtures.ts";
import { makeCapture, recordRendered, tempDir, kerncapErrorOf } from "../fixtures.ts";

const GXX = Bun.which("g++");

/** Folder names that a make-style list must escape, or that it writes as they are. */
const ODD = ["my cap", "d$ollar", "ha#sh", "co:lon", "pa(ren)"];

const thrown = kerncapErrorOf;

describe("parseDeps: make's escapes, as gcc and nvcc write them", () => {
  test("gcc: `\\ ` a space, 2N+1 backslashes before a space N and the space, `$$` one $, `\\#` a #; continuation lines; targets left out", () => {
    // gcc 12's -M of a file including headers in "a b$c#d:e(f)g\h\ i" and "x$$y" (two dollars)
    const gcc = "k.o: k.c /usr/include/stdc-predef.h \\\n /t/a\\ b$$c\\#d:e(f)g\\h\\\\\\ i/h.h /t/x$$$$y/h2.h\n";
    expect(parseDeps(gcc)).toEqual(["k.c", "/usr/include/stdc-predef.h", "/t/a b$c#d:e(f)g\\h\\ i/h.h", "/t/x$$y/h2.h"]);
    // a target with an escaped space; -MP's phony rules; CRLF; a tab escaped; two backslashes then a separating space
    expect(parseDeps("my\\ cap/k.o: my\\ cap/k.cu \\\r\n  inc/a\\\tb.h c\\\\ d.h\r\ninc/a\\\tb.h:\r\n")).toEqual(["my cap/k.cu", "inc/a\tb.h", "c\\", "d.h"]);
  });

  test("nvcc: `\\ ` a space; $ and # as they are, `$$` two dollars (its rule's colon has a space before it)", () => {
    // nvcc 13.0's -M of the same file (it writes the backslashes of a path as /)
    const nvcc = "k.o : k.c \\\n    /usr/include/stdc-predef.h \\\n    /t/a\\ b$c#d:e(f)g/h/\\ i/h.h \\\n    /t/x$$y/h2.h\n";
    expect(parseDeps(nvcc)).toEqual(["k.c", "/usr/include/stdc-predef.h", "/t/a b$c#d:e(f)g/h/ i/h.h", "/t/x$$y/h2.h"]);
  });

  for (const [name, cc] of [
    ["gcc", GXX],
    ["nvcc", NVCC],
  ] as const) {
    test.skipIf(!cc)(`${name} -M of headers in folders named ${ODD.join(" ")} x$$y: every path read back names the file`, () => {
      const root = tempDir();
      const dirs = [...ODD, "x$$y"].map((n) => join(root, n));
      for (const [i, d] of dirs.entries()) {
        mkdirSync(d);
        writeFileSync(join(d, `h${i}.h`), `int v${i};\n`);
      }
      writeFileSync(join(root, "k.cu"), dirs.map((_, i) => `#include "h${i}.h"\n`).join(""));
      const p = Bun.spawnSync([cc!, "-M", "-x", name === "gcc" ? "c++" : "cu", ...dirs.map((d) => `-I${d}`), "k.cu"], { cwd: root });
      expect(p.exitCode, p.stderr.toString()).toBe(0);
      const deps = parseDeps(p.stdout.toString());
      for (const [i, d] of dirs.entries()) expect(deps).toContain(join(d, `h${i}.h`));
    });
  }
});

test("outsideReads: the build's private folder and TMPDIR count as the capture; a path through the TMPDIR with .. does not (after a link it climbs elsewhere)", async () => {
  const root = tempDir();
  const dir = join(root, "my cap");
  await makeCapture(dir);
  const ran = { cwd: join(root, "run"), tmp: join(root, "t m p") };
  const m = readManifest(dir);
  const list = (...paths: string[]) => `k.cubin : \\\n${paths.map((p) => `    ${p.replaceAll(" ", "\\ ")}`).join(" \\\n")}\n`;
  expect(outsideReads(dir, m, list("src/k.cu", join(ran.cwd, "src/k.cu"), join(ran.tmp, "tmp.x/src/k.cu"), join(dir, "src/k.cu")), ran)).toEqual([]);
  expect(outsideReads(dir, m, list(`${ran.tmp}/tmp.x/src/../../secret.h`, join(root, "secret.h"), "../secret.h"), ran)).toEqual([
    `${ran.tmp}/tmp.x/src/../../secret.h`,
    join(root, "secret.h"),
    "../secret.h",
  ]);
});

describe("toolchainHeader: what counts as the toolchain's (read by a confined build without the sandbox)", () => {
  const saved = process.env.HOME;
  afterEach(() => {
    if (saved === undefined) delete process.env.HOME;
    else process.env.HOME = saved;
  });
  test("a toolkit root kerncap found, matched as the root and a /; not a folder named cuda*/include elsewhere, nor a root that is $HOME (an nvcc wrapper at ~/bin)", () => {
    const t = tempDir();
    for (const f of ["tk/bin/nvcc", "tk/include/cuda.h", "tk-private/include/a.h", "home/bin/nvcc", "home/secret.h", "home/cuda-keys/include/tok.h"]) {
      mkdirSync(join(t, f, ".."), { recursive: true });
      writeFileSync(join(t, f), "");
    }
    const tk = toolchainHeader(join(t, "tk/bin/nvcc"));
    expect(tk(join(t, "tk/include/cuda.h"))).toBe(true);
    expect(tk("/usr/include/stdio.h")).toBe(true);
    expect(tk(join(t, "tk-private/include/a.h"))).toBe(false);
    expect(tk(join(t, "home/cuda-keys/include/tok.h"))).toBe(false);
    expect(tk(join(t, "home/cuda-keys/targets/x86_64-linux/include/tok.h"))).toBe(false);
    process.env.HOME = join(t, "home");
    const wrapper = toolchainHeader(join(t, "home/bin/nvcc"));
    expect(wrapper(join(t, "home/secret.h"))).toBe(false);
    expect(wrapper(join(t, "home/cuda-keys/include/tok.h"))).toBe(false);
  });
});

/**
 * A capture at `dir` whose build.sh compiles src/kernel.cu with g++ (the dependency list a
 * confined build asks for through EXTRA_FLAGS), its include folders `-I` each of `includes`, and
 * `project` recorded as its source root, an overlay capture whose build reads `inPlace` from there.
 */
async function gxxCapture(dir: string, o: { includes?: string[]; project?: string; inPlace?: string[] } = {}): Promise<void> {
  await makeCapture(dir);
  mkdirSync(join(dir, "src"));
  writeFileSync(join(dir, "src/kernel.cu"), '#include "util.h"\nint k() { return TWO; }\n');
  writeFileSync(join(dir, "src/util.h"), "#define TWO 2\n");
  const inc = (o.includes ?? []).map((d) => `-I'${d}' `).join("");
  writeFileSync(
    join(dir, "build.sh"),
    `#!/usr/bin/env bash\nset -euo pipefail\nhere="$(cd "$(dirname "\${BASH_SOURCE[0]}")" && pwd)"\nmkdir -p "$here/build"\n# shellcheck disable=SC2086\ng++ -c -x c++ \${EXTRA_FLAGS:-} ${inc}"$here/src/kernel.cu" -o "$here/build/kernel.o" >&2\necho "$here/build/kernel.o"\n`,
    { mode: 0o755 },
  );
  if (o.project) {
    const m = JSON.parse(readFileSync(join(dir, "kerncap.json"), "utf8"));
    m.source = { cuda: { method: "source-root", mode: "overlay", projectRoot: o.project, readInPlace: o.inPlace ?? [] } };
    writeFileSync(join(dir, "kerncap.json"), JSON.stringify(m));
  }
  recordRendered(dir); // stands for the build.sh kerncap wrote: a confined build runs no other
}

describe.skipIf(!GXX)("a confined build whose paths hold a space, $, #, : or (", () => {
  afterEach(() => overrideSandboxSupport(undefined));
  test("the capture's folder and a folder above it: it builds, confined as unconfined", async () => {
    for (const n of ODD) {
      const parent = join(tempDir(), n);
      mkdirSync(parent);
      for (const dir of [join(parent, "cap"), join(tempDir(), n)]) {
        await gxxCapture(dir);
        const b = await buildReproducer(dir, { quiet: true, force: false, confine: readManifest(dir), confinedBy: "kerncap eval" });
        expect(b.module, dir).toBe(join(dir, "build/kernel.o"));
      }
    }
  }, 60_000);

  test("the recorded source root's headers (gcc writes its $ as $$ and its # as \\#) are read; a header elsewhere is refused", async () => {
    const root = tempDir();
    const project = join(root, "pro $ject #1: (x)");
    mkdirSync(join(project, "inc"), { recursive: true });
    writeFileSync(join(project, "inc/util.h"), "#define TWO 2\n");
    const dir = join(project, "my cap");
    await gxxCapture(dir, { includes: [join(project, "inc")], project, inPlace: [join(project, "inc/util.h")] });
    // the header comes from the source root: src/'s own util.h is gone
    writeFileSync(join(dir, "src/kernel.cu"), "#include <util.h>\nint k() { return TWO; }\n");
    const m = readManifest(dir);
    await buildReproducer(dir, { quiet: true, force: false, confine: m }); // in the sandbox where there is one: the source root is in its tree
    overrideSandboxSupport(null); // the dependency list's judgement (in the sandbox the header elsewhere is not there at all: ./sandbox.test.ts)
    const other = join(root, "other place");
    mkdirSync(other);
    writeFileSync(join(other, "util.h"), "#define TWO 2 // SECRET_LINE\n");
    const dir2 = join(project, "my cap 2");
    await gxxCapture(dir2, { includes: [other], project });
    writeFileSync(join(dir2, "src/kernel.cu"), "#include <util.h>\nint k() { return TWO; }\n");
    const e = await thrown(() => buildReproducer(dir2, { quiet: true, force: false, confine: readManifest(dir2), confinedBy: "validate --confine" }));
    expect(e.code).toBe("E_CONFINED");
    expect(e.message).toContain(`(${join(other, "util.h")}), which validate --confine does not allow`);
    expect(e.message).not.toContain("SECRET_LINE");
    expect(e.message).not.toContain("kerncap mcp");
    expect(e.hint).toBe(
      'Remove the #include at src/kernel.cu:1 ("util.h"): include only files under src/, the toolchain\'s headers and, of the captured project, only the headers its capture recorded as read (not the rest of its source root).',
    );
  }, 60_000);

  test("the recorded source root is the user's home: of it only the recorded headers are read, a secret beside them is refused (in the sandbox and by the list)", async () => {
    const home = tempDir(); // stands for ~: a TU in ~/proj and a header in ~/include record ~ as projectRoot
    mkdirSync(join(home, "include"));
    writeFileSync(join(home, "include/util.h"), "#define TWO 2\n");
    writeFileSync(join(home, ".cloudtoken.h"), "#define TWO 2 // SECRET_LINE\n");
    const dir = join(home, "proj/cap");
    mkdirSync(join(home, "proj"));
    await gxxCapture(dir, { includes: [join(home, "include")], project: home, inPlace: [join(home, "include/util.h")] });
    writeFileSync(join(dir, "src/kernel.cu"), "#include <util.h>\nint k() { return TWO; }\n");
    await buildReproducer(dir, { quiet: true, force: false, confine: readManifest(dir) }); // the recorded header: built
    writeFileSync(join(dir, "src/kernel.cu"), `#include "${join(home, ".cloudtoken.h")}"\nint k() { return TWO; }\n`);
    for (const s of [undefined, null] as const) {
      overrideSandboxSupport(s); // this machine's sandbox, then the scan and the list alone
      const e = await thrown(() => buildReproducer(dir, { quiet: true, force: false, confine: readManifest(dir) }));
      expect(e.code).toBe("E_CONFINED");
      expect(`${e.message} ${e.hint}`).not.toContain("SECRET_LINE");
    }
    expect(recordedSources(dir, readManifest(dir)).files).toEqual([realpathSync(join(home, "include/util.h"))]);
  }, 60_000);

  test("a file outside that no #include under src/ names (a source root's header includes it): the hint says so, not to remove an #include", async () => {
    overrideSandboxSupport(null); // the dependency list's judgement, as above
    const root = tempDir();
    const project = join(root, "proj");
    mkdirSync(join(project, "inc"), { recursive: true });
    const secret = join(root, "elsewhere/secret.h");
    mkdirSync(join(root, "elsewhere"));
    writeFileSync(secret, "#define TWO 2\n");
    writeFileSync(join(project, "inc/util.h"), `#include "${secret}"\n`);
    const dir = join(project, "cap");
    await gxxCapture(dir, { includes: [join(project, "inc")], project, inPlace: [join(project, "inc/util.h")] });
    writeFileSync(join(dir, "src/kernel.cu"), "#include <util.h>\nint k() { return TWO; }\n");
    const e = await thrown(() => buildReproducer(dir, { quiet: true, force: false, confine: readManifest(dir) }));
    expect(e.code).toBe("E_CONFINED");
    expect(e.message).toContain(`(${secret}), which a confined build does not allow`);
    expect(e.hint).toStartWith("No #include under src/ names it: the build reached it another way");
    expect(e.hint).not.toContain("Remove");
  }, 60_000);
});

describe.skipIf(!NVCC)('the demo in a folder named with a space (kerncap demo "my cap")', () => {
  test("eval's candidate (a one-line edit) builds, as validate --confine builds the capture; TMPDIR with a space too", async () => {
    const cap = join(tempDir(), "sp ace", "my cap");
    mkdirSync(join(cap, ".."), { recursive: true });
    writeDemo(cap, false);
    await buildReproducer(cap, { quiet: true, force: false, confine: readManifest(cap), confinedBy: "validate --confine" });
    const d = tempDir();
    const tu = readFileSync(join(cap, "src/saxpy.cu"), "utf8");
    writeFileSync(join(d, "saxpy.cu"), `// an edit\n${tu}`);
    const b = await buildCandidate(cap, readManifest(cap), parseCandidate(join(d, "saxpy.cu")), join(d, "copy"), { force: false });
    expect("failed" in b ? b.failed : "built").toBe("built");
    // build.sh works from a folder of links when its own path holds a space: the list then names the private copy through them
    const saved = process.env.TMPDIR;
    process.env.TMPDIR = join(tempDir(), "t m p");
    mkdirSync(process.env.TMPDIR, { mode: 0o700 });
    try {
      await buildReproducer(cap, { quiet: true, force: false, confine: readManifest(cap) });
    } finally {
      if (saved === undefined) delete process.env.TMPDIR;
      else process.env.TMPDIR = saved;
    }
  }, 120_000);
});
