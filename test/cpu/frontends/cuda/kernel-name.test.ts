/** src/frontends/cuda/kernel-name.ts demangledNames: a hint's kernel symbols as C++ names, through the demangler on PATH's absolute entries. */
import { expect, test } from "bun:test";
import { chmodSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { demangledNames } from "../../../../src/frontends/cuda/kernel-name.ts";
import { tempDir } from "../../fixtures.ts";

const FILT = Bun.which("c++filt") ?? Bun.which("cu++filt");

test.skipIf(!FILT)("mangled names demangled, others as given, in order (found by a new user: E_KERNEL_NOT_FOUND listed _Z5saxpyPK5Saxpyi)", () => {
  expect(demangledNames(["_Z5saxpyPfi", "plain_c_kernel", "_Z5scalePfi"])).toEqual(["saxpy(float*, int)", "plain_c_kernel", "scale(float*, int)"]);
});

test("no demangler from the working folder or a relative PATH entry: names as given", () => {
  const d = tempDir();
  writeFileSync(join(d, "c++filt"), "#!/bin/sh\necho pwned\n");
  chmodSync(join(d, "c++filt"), 0o755);
  const saved = process.env.PATH;
  const cwd = process.cwd();
  process.env.PATH = `.:${d.replace(/^\//, "")}`; // relative entries only
  process.chdir(d);
  try {
    expect(demangledNames(["_Z5saxpyPfi"])).toEqual(["_Z5saxpyPfi"]);
  } finally {
    process.chdir(cwd);
    process.env.PATH = saved;
  }
});
