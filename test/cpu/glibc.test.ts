/**
 * Every binary a release ships needs glibc 2.17 at most, the wheel's manylinux2014 tag
 * (scripts/build-wheel.py): the capture libraries (c/common/kc_glibc.h pins their dl*, pthread_* and
 * memcpy versions; fstat goes through the system call) and the executable's runtime (the Bun that
 * `bun build --compile` copies: this process's own executable, and dist/kerncap where it was
 * built). The versions come from the ELF files' version-need sections (test/cpu/elf-needs.ts),
 * cross-checked against `objdump -T` where binutils is installed. A library that asks for a
 * pinned symbol from libdl/libpthread must also name them in DT_NEEDED: before glibc 2.34 those
 * symbols live there, and a library that does not load them fails in an application that does not.
 */
import { describe, expect, test } from "bun:test";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { elfNeeds, newestGlibcMinor } from "./elf-needs.ts";

const ROOT = resolve(import.meta.dir, "../..");
/** manylinux2014 = manylinux_2_17 (PEP 599, PEP 600). */
const TAG_GLIBC = 17;
const LIBS = ["c/build/libkerncap_cuda.so", "c/build/libkerncap_hsa.so"].map((p) => join(ROOT, p)).filter(existsSync);
const EXES = [process.execPath, join(ROOT, "dist/kerncap")].filter(existsSync);

function objdumpGlibc(path: string): number | undefined {
  if (!Bun.which("objdump")) return undefined;
  const r = Bun.spawnSync(["objdump", "-T", path], { stdout: "pipe", stderr: "ignore" });
  if (r.exitCode !== 0) return undefined;
  const minors = [...r.stdout.toString().matchAll(/GLIBC_2\.(\d+)/g)].map((m) => Number(m[1]));
  return Math.max(0, ...minors);
}

describe("glibc needs of the shipped binaries", () => {
  test.skipIf(LIBS.length === 0)("the capture libraries need GLIBC_2.17 at most, and load libdl and libpthread themselves", () => {
    for (const lib of LIBS) {
      const needs = elfNeeds(readFileSync(lib));
      const newest = newestGlibcMinor(needs);
      expect(newest, `${lib}: ${JSON.stringify([...needs.versions])}`).toBeLessThanOrEqual(TAG_GLIBC);
      expect(newest).toBeGreaterThan(0); // it does ask libc for versions: the reader read something
      expect(needs.versions.get("libc.so.6")).toBeDefined();
      const od = objdumpGlibc(lib);
      if (od !== undefined) expect(od).toBe(newest);
      expect(needs.needed).toContain("libdl.so.2");
      expect(needs.needed).toContain("libpthread.so.0");
      expect(needs.needed.filter((n) => /libcuda|libcupti|libhsa/.test(n))).toEqual([]);
    }
  });

  test.skipIf(EXES.length === 0)("the executable's runtime needs GLIBC_2.17 at most", () => {
    for (const exe of EXES) {
      const needs = elfNeeds(readFileSync(exe));
      const newest = newestGlibcMinor(needs);
      expect(newest, exe).toBeGreaterThan(0);
      expect(newest, `${exe}: ${JSON.stringify([...needs.versions])}`).toBeLessThanOrEqual(TAG_GLIBC);
      const od = objdumpGlibc(exe);
      if (od !== undefined) expect(od).toBe(newest);
    }
  });

  test.skipIf(!Bun.which("gcc"))("the reader finds what a library built without the pins needs (GLIBC_2.34 on a new glibc)", () => {
    // the same unit built twice, with and without c/common/kc_glibc.h: the pins are what lowers the need
    const dir = mkdtempSync(join(tmpdir(), "kerncap-glibc-"));
    const src = join(dir, "u.c");
    writeFileSync(
      src,
      '#define _GNU_SOURCE\n#include <dlfcn.h>\n#include <pthread.h>\n#include <sys/stat.h>\nstatic void* run(void* a) { return dlsym(a, "x"); }\nint f(int fd) { pthread_t t; struct stat st; pthread_create(&t, 0, run, dlopen("x", RTLD_NOW)); return fstat(fd, &st); }\n',
    );
    const build = (out: string, extra: string[]) =>
      Bun.spawnSync(["gcc", "-O2", "-fPIC", "-shared", ...extra, "-o", out, src, "-Wl,--no-as-needed", "-l:libdl.so.2", "-l:libpthread.so.0"], {
        stderr: "pipe",
      });
    const plain = build(join(dir, "plain.so"), []);
    const pinned = build(join(dir, "pinned.so"), ["-include", join(ROOT, "c/common/kc_glibc.h")]);
    expect(plain.exitCode, plain.stderr.toString()).toBe(0);
    expect(pinned.exitCode, pinned.stderr.toString()).toBe(0);
    const gnu = (Bun.spawnSync(["ldd", "--version"], { stdout: "pipe" })
      .stdout.toString()
      .match(/2\.(\d+)/) ?? [])[1];
    if (gnu && Number(gnu) >= 34) expect(newestGlibcMinor(elfNeeds(readFileSync(join(dir, "plain.so"))))).toBeGreaterThanOrEqual(34);
    expect(newestGlibcMinor(elfNeeds(readFileSync(join(dir, "pinned.so"))))).toBeLessThanOrEqual(TAG_GLIBC);
    rmSync(dir, { recursive: true, force: true });
  });
});
