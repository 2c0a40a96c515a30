/** The driver libraries are never taken from the working folder (a fresh-user trial: a libcuda.so.1 there was loaded). */
import { expect, test } from "bun:test";
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
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
      "libcuda.so: cannot open shared object file; not tried: libcuda.so.1 (a file of that name in the working folder, or in a folder LD_LIBRARY_PATH names relative to it, would be loaded instead: kerncap never loads code from there)",
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

test("a folder LD_LIBRARY_PATH names relative to the working folder (or by an empty entry) removes the bare names it holds (adversary round 70)", () => {
  const d = mkdtempSync(join(tmpdir(), "kerncap-libs-"));
  try {
    mkdirSync(join(d, "lib"));
    writeFileSync(join(d, "lib", "libcuda.so.1"), "planted");
    writeFileSync(join(d, "lib", "libhsa-runtime64.so.1"), "planted");
    for (const LD_LIBRARY_PATH of ["./lib", "lib", "/usr/lib:lib", "lib;/usr/lib"]) {
      const c = libcudaCandidates(d, { LD_LIBRARY_PATH });
      expect(c, LD_LIBRARY_PATH).not.toContain("libcuda.so.1");
      expect(c, LD_LIBRARY_PATH).toContain("libcuda.so");
    }
    // the same folder named absolutely is the user's own statement: the bare name stays
    expect(libcudaCandidates(d, { LD_LIBRARY_PATH: join(d, "lib") })).toContain("libcuda.so.1");
    // an empty entry is the working folder itself
    writeFileSync(join(d, "libcuda.so"), "planted");
    expect(libcudaCandidates(d, { LD_LIBRARY_PATH: "/usr/lib:" })).not.toContain("libcuda.so");
    const cwd = process.cwd();
    process.chdir(d);
    try {
      expect(hsaLibraryCandidates({ LD_LIBRARY_PATH: "lib" })).not.toContain("libhsa-runtime64.so.1");
      expect(hsaLibraryCandidates({})).toContain("libhsa-runtime64.so.1");
    } finally {
      process.chdir(cwd);
    }
  } finally {
    rmSync(d, { recursive: true, force: true });
  }
});

test("driverLikelyPresent: by files alone (KERNCAP_LIBCUDA, usual paths, absolute LD_LIBRARY_PATH folders, the loader's cache); kerncap mcp's instructions say so where none is seen", async () => {
  const { driverLikelyPresent } = await import("../../../src/native/libcuda-search.ts");
  const { NO_DRIVER_NOTE } = await import("../../../src/mcp/server.ts");
  const d = mkdtempSync(join(tmpdir(), "kerncap-libs-"));
  try {
    const none = join(d, "no-cache");
    const cache = join(d, "ld.so.cache");
    writeFileSync(cache, "glibc-ld.so.cache1.1\0libcuda.so.1\0/usr/lib/x86_64-linux-gnu/libcuda.so.1\0");
    const usual = ["/usr/lib/x86_64-linux-gnu/libcuda.so.1", "/usr/local/nvidia/lib64/libcuda.so.1"].some((p) => existsSync(p));
    expect(driverLikelyPresent({}, none)).toBe(usual);
    expect(driverLikelyPresent({}, cache)).toBe(true);
    mkdirSync(join(d, "lib"));
    writeFileSync(join(d, "lib", "libcuda.so.1"), "");
    expect(driverLikelyPresent({ LD_LIBRARY_PATH: join(d, "lib") }, none)).toBe(true);
    expect(driverLikelyPresent({ LD_LIBRARY_PATH: "lib" }, none)).toBe(usual); // a relative entry is never read (the working folder's)
    expect(driverLikelyPresent({ KERNCAP_LIBCUDA: join(d, "lib", "libcuda.so.1") }, none)).toBe(true);
    expect(driverLikelyPresent({ KERNCAP_LIBCUDA: join(d, "nowhere.so") }, none)).toBe(false);
    // the server's instructions carry the note exactly where no driver is seen on this machine
    const { createMcpServer } = await import("../../../src/mcp/server.ts");
    const said = (createMcpServer() as unknown as { _instructions?: string })._instructions ?? "";
    expect(said.includes(NO_DRIVER_NOTE)).toBe(!driverLikelyPresent());
  } finally {
    rmSync(d, { recursive: true, force: true });
  }
});
