/**
 * The system headers' facts a CUDA slice's check found, kept between processes in the user's
 * cache folder (src/frontends/cuda/system-facts.ts): the next process takes them (no header read
 * again) while every path they were found by is as it was and the toolchain's environment is the
 * same; otherwise it reads the headers again. Each step runs in a process of its own
 * (test/fixtures/slice-facts-child.ts): the facts are per process.
 */
import { describe, expect, test } from "bun:test";
import { spawnSync } from "node:child_process";
import { chmodSync, existsSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { writeDemo } from "../../../../src/capture/demo.ts";
import { tempDir } from "../../fixtures.ts";

const CHILD = join(import.meta.dir, "../../../fixtures/slice-facts-child.ts");

describe.skipIf(!existsSync("/usr/include/stdio.h"))("the system headers' facts between processes", () => {
  const cache = tempDir("kerncap-facts-cache-");
  const { dir } = writeDemo(join(tempDir(), "cap"), false);
  const child = (mode: string, env: Record<string, string> = {}) => {
    const p = Bun.spawnSync([process.execPath, CHILD, dir, mode], { env: { ...process.env, KERNCAP_CACHE: cache, ...env }, stdout: "pipe", stderr: "pipe" });
    expect(p.exitCode, p.stderr.toString()).toBe(0);
    return JSON.parse(p.stdout.toString()) as { action?: string; defines?: string[]; read: number };
  };
  const factsFiles = () => readdirSync(cache).filter((n) => n.startsWith("cuda-system-headers-"));
  let defaultFile = ""; // the facts file of the tests' own environment

  test("found by one check, kept (private); taken by the next process: no system header read again", () => {
    const first = child("look");
    expect(first.action).toBe("fresh");
    expect(first.read).toBeGreaterThan(0); // <stdio.h> read
    const [file] = factsFiles();
    expect(file).toBeDefined();
    defaultFile = file!;
    expect(statSync(join(cache, file!)).mode & 0o077).toBe(0);
    expect(JSON.parse(readFileSync(join(cache, file!), "utf8")).probed.some(([p]: [string]) => p.endsWith("/stdio.h"))).toBe(true);
    expect(child("refresh")).toEqual({ action: "fresh", read: 0 });
  });

  test("another toolchain environment keeps its own; a path asked about that changed: read again", () => {
    expect(child("refresh", { CUDA_HOME: "/nonexistent-toolkit" }).read).toBeGreaterThan(0); // not the other environment's facts
    expect(child("look", { CUDA_HOME: "/nonexistent-toolkit" }).read).toBeGreaterThan(0);
    expect(factsFiles().length).toBe(2);
    // a file the lookups asked about and found absent appears: the facts are not taken
    const file = defaultFile;
    const doc = JSON.parse(readFileSync(join(cache, file), "utf8"));
    const own = join(tempDir(), "stdio.h");
    writeFileSync(own, "/* planted */\n");
    doc.probed.push([own, "absent"]); // as if looked up where nothing was
    writeFileSync(join(cache, file), JSON.stringify(doc));
    expect(child("refresh").read).toBeGreaterThan(0);
  });

  test("a file another user may write, or not a file (a FIFO), is not taken and never waited on; a file others may write is replaced by a private one", () => {
    const file = join(cache, defaultFile);
    child("look"); // the facts kept afresh
    expect(child("refresh").read).toBe(0);
    chmodSync(file, 0o666);
    expect(child("refresh").read).toBeGreaterThan(0);
    child("look");
    expect(statSync(file).mode & 0o777).toBe(0o600);
    rmSync(file);
    spawnSync("mkfifo", [file]);
    const t0 = performance.now();
    expect(child("refresh").read).toBeGreaterThan(0);
    expect(performance.now() - t0).toBeLessThan(10_000);
    rmSync(file);
  });

  test("a header changed while a process ran: what it read is not kept; the toolkit behind the same NVCC link changed: read again", () => {
    const root = tempDir("kerncap-toolkits-");
    for (const t of ["a", "b"]) {
      mkdirSync(join(root, t, "bin"), { recursive: true });
      mkdirSync(join(root, t, "include"));
      writeFileSync(join(root, t, "bin", "nvcc"), "#!/bin/sh\n", { mode: 0o755 });
      writeFileSync(join(root, t, "include", "kc.h"), `#define KC_${t.toUpperCase()} 1\n`);
    }
    symlinkSync(join(root, "a"), join(root, "cur"));
    const env = { NVCC: join(root, "cur", "bin", "nvcc") };
    expect(child("kc", env).defines).toEqual(["KC_A"]);
    expect(child("kc", env)).toEqual({ defines: ["KC_A"], read: 0 }); // taken
    rmSync(join(root, "cur"));
    symlinkSync(join(root, "b"), join(root, "cur"));
    expect(child("kc", env)).toMatchObject({ defines: ["KC_B"] }); // another toolkit: read again
    const kc = join(root, "b", "include", "kc.h");
    expect(child("stale", { ...env, KC_FILE: kc, KC_TEXT: "#define KC_NEW 1\n" }).defines).toEqual(["KC_B"]);
    expect(child("kc", env)).toMatchObject({ defines: ["KC_NEW"] }); // not the facts read before the change
  });
});
