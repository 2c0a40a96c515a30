/**
 * templates/triton/repro.py loads the kernel file from its own bytes as UTF-8: never from a bytecode
 * cache beside it, never under another encoding its coding line names (adversary 58: both ran code
 * the trust prompt never showed).
 */
import { expect, test } from "bun:test";
import { existsSync, mkdirSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { fakeTritonSite, tempDir } from "../../fixtures.ts";

const REPRO = resolve(import.meta.dir, "../../../../templates/triton/repro.py");
const python = Bun.which("python3");

/** A Triton stand-in (repro.py imports these before the kernel file) and a reproducer folder whose src/k.py is `kernel`. */
function reproducer(kernel: string | Uint8Array): { dir: string; site: string } {
  const site = fakeTritonSite();
  const dir = tempDir();
  mkdirSync(join(dir, "src"));
  writeFileSync(join(dir, "src/k.py"), kernel);
  writeFileSync(
    join(dir, "pinned.json"),
    JSON.stringify({ fnName: "k", python: "python3", tritonVersion: "3.0.0", kernelFile: "k.py", constexprs: [], signature: {}, kernelName: "k" }),
  );
  return { dir, site };
}

const runRepro = (dir: string, site: string) =>
  Bun.spawnSync([python!, REPRO, "--dir", dir], { env: { ...process.env, PYTHONPATH: site }, stdout: "pipe", stderr: "pipe" });

test.skipIf(!python)("an unchecked-hash .pyc in src/__pycache__ compiled from other code: the source shown runs, the bytecode never", () => {
  const root = tempDir();
  const clean = join(root, "clean-ran");
  const planted = join(root, "planted-ran");
  const { dir, site } = reproducer(`open(${JSON.stringify(clean)}, "w").close()\n`);
  // the attacker's bytecode, at the name Python looks for beside src/k.py, checked against nothing (PEP 552)
  const compile = Bun.spawnSync(
    [
      python!,
      "-c",
      `import py_compile, importlib.util, sys
src = sys.argv[1] + "/evil.py"
open(src, "w").write("open(" + repr(sys.argv[2]) + ", 'w').close()\\n")
py_compile.compile(src, cfile=importlib.util.cache_from_source(sys.argv[1] + "/src/k.py"), invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH)`,
      dir,
      planted,
    ],
    { stderr: "pipe" },
  );
  expect(compile.stderr.toString()).toBe("");
  expect(existsSync(join(dir, "src/__pycache__"))).toBe(true);
  runRepro(dir, site);
  expect(existsSync(planted)).toBe(false);
  expect(existsSync(clean)).toBe(true);
});

test.skipIf(!python)(
  "a coding line naming UTF-7 (a comment as UTF-8 shows it, code as Python would decode it): refused before the file runs, exit 2 naming it",
  () => {
    const root = tempDir();
    const planted = join(root, "utf7-ran");
    // "+AAo-" is a newline in UTF-7: the rest of the comment becomes a statement
    const hidden = `open(${JSON.stringify(planted)}, 'w').close()`;
    const utf7 = Buffer.from(`\n${hidden}`, "utf16le").swap16().toString("base64").replace(/=+$/, "");
    const { dir, site } = reproducer(`# -*- coding: utf-7 -*-\n# record +${utf7}-\n`);
    const r = runRepro(dir, site);
    expect(existsSync(planted)).toBe(false);
    expect(r.exitCode).toBe(2);
    expect(r.stderr.toString()).toContain("its coding line names utf-7: kerncap runs a kernel file as UTF-8 only");
  },
);

test.skipIf(!python)("a kernel file that is not UTF-8: refused, exit 2", () => {
  const { dir, site } = reproducer(new Uint8Array([0x78, 0x20, 0x3d, 0x20, 0x27, 0xff, 0x27, 0x0a]));
  const r = runRepro(dir, site);
  expect(r.exitCode).toBe(2);
  expect(r.stderr.toString()).toContain("not UTF-8");
});
