/** The driver libraries are never taken from the working folder (a fresh-user trial: a libcuda.so.1 there was loaded). */
import { expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describeLibcudaSearch, libcudaCandidates } from "../../../src/native/libcuda.ts";
import { hsaLibraryCandidates } from "../../../src/native/libhsa.ts";

test("a libcuda.so.1 / libhsa-runtime64.so.1 in the working folder removes that bare name from the search", () => {
  const d = mkdtempSync(join(tmpdir(), "kerncap-libs-"));
  try {
    expect(libcudaCandidates(d)).toContain("libcuda.so.1");
    writeFileSync(join(d, "libcuda.so.1"), "not a library");
    const c = libcudaCandidates(d);
    expect(c).not.toContain("libcuda.so.1");
    expect(c).toContain("libcuda.so");
    expect(c).toContain("/usr/lib/x86_64-linux-gnu/libcuda.so.1");
    // and the message of a failed search says which name was left out, and why
    expect(describeLibcudaSearch([{ name: "libcuda.so", reason: "cannot open shared object file" }], d)).toBe(
      "libcuda.so: cannot open shared object file; not tried: libcuda.so.1 (a file of that name in the working folder would be loaded instead: kerncap never loads code from there)",
    );
    const cwd = process.cwd();
    process.chdir(d);
    writeFileSync(join(d, "libhsa-runtime64.so.1"), "x");
    try {
      expect(hsaLibraryCandidates({})).not.toContain("libhsa-runtime64.so.1");
    } finally {
      process.chdir(cwd);
    }
  } finally {
    rmSync(d, { recursive: true, force: true });
  }
});
