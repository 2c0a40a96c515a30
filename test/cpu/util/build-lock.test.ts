/**
 * The capture's build lock (src/util/build-lock.ts): one kerncap process at a time builds a
 * capture; the kernel lets the lock go when its holder ends, however it ends.
 */
import { describe, expect, test } from "bun:test";
import { existsSync, lstatSync, mkdirSync, symlinkSync } from "node:fs";
import { join } from "node:path";
import { BUILD_LOCK, buildLock, tryBuildLock } from "../../../src/util/build-lock.ts";
import { tempDir } from "../fixtures.ts";

describe("the build lock of a capture", () => {
  test("held: a second taker is refused, naming the holder's pid; released: it takes it; release is idempotent", () => {
    const dir = tempDir();
    const a = tryBuildLock(dir);
    expect(a.lock).toBeDefined();
    expect(lstatSync(join(dir, "build", BUILD_LOCK)).mode & 0o777).toBe(0o600);
    const b = tryBuildLock(dir);
    expect(b.lock).toBeUndefined();
    expect(b.holder).toBe(process.pid);
    a.lock!.release();
    a.lock!.release();
    const c = tryBuildLock(dir);
    expect(c.lock).toBeDefined();
    c.lock!.release();
  });

  test("a process that holds it and is killed (SIGKILL) lets it go at once; a waiter then takes it", async () => {
    const dir = tempDir();
    const code = `const { tryBuildLock } = await import(${JSON.stringify(join(import.meta.dir, "../../../src/util/build-lock.ts"))});
      if (!tryBuildLock(${JSON.stringify(dir)}).lock) process.exit(3); console.log("held"); await Bun.sleep(60000);`;
    const child = Bun.spawn([process.execPath, "-e", code], { stdout: "pipe", stderr: "pipe" });
    const reader = child.stdout.getReader();
    const first = new TextDecoder().decode((await reader.read()).value);
    expect(first).toContain("held");
    expect(tryBuildLock(dir).holder).toBe(child.pid);
    const waiting = buildLock(dir, undefined, 10);
    child.kill("SIGKILL");
    const lock = await waiting;
    lock.release();
    await child.exited;
  }, 30_000);

  test("a build/ that is a link: no lock file is made through it (no-op lock; the build refuses the link itself)", () => {
    const dir = tempDir();
    const elsewhere = tempDir();
    symlinkSync(elsewhere, join(dir, "build"));
    const got = tryBuildLock(dir);
    expect(got.lock).toBeDefined();
    expect(existsSync(join(elsewhere, BUILD_LOCK))).toBe(false);
    got.lock!.release();
  });

  test("a waiter stops when its signal aborts (E_INTERRUPTED)", async () => {
    const dir = tempDir();
    mkdirSync(join(dir, "build"));
    const held = tryBuildLock(dir).lock!;
    const ac = new AbortController();
    const waiting = buildLock(dir, ac.signal, 10);
    ac.abort();
    await expect(waiting).rejects.toMatchObject({ code: "E_INTERRUPTED" });
    held.release();
  });
});

describe("a lock file that is not the user's alone", () => {
  test("one others may read or write (mode 0644, 0666: planted in a shared build/) is not taken: a no-op lock, never a wait", () => {
    const dir = tempDir();
    mkdirSync(join(dir, "build"));
    const { writeFileSync, chmodSync } = require("node:fs") as typeof import("node:fs");
    writeFileSync(join(dir, "build", BUILD_LOCK), "1\n");
    chmodSync(join(dir, "build", BUILD_LOCK), 0o666);
    const a = tryBuildLock(dir);
    const b = tryBuildLock(dir);
    expect(a.lock).toBeDefined();
    expect(b.lock).toBeDefined(); // not serialized, and never waiting on whoever holds that file
    a.lock!.release();
    b.lock!.release();
  });
});

// adversary 36: a folder, FIFO or link at the lock's name let validate build without the lock, and clean remove a build under way
describe("something else at the lock's name", () => {
  test("a folder, a FIFO, a link (dangling or not): E_UNSAFE_PATH naming it, nothing followed; clean's lenient look takes it as no lock", () => {
    for (const kind of ["dir", "fifo", "link", "dangling"] as const) {
      const dir = tempDir();
      mkdirSync(join(dir, "build"));
      const at = join(dir, "build", BUILD_LOCK);
      const target = join(tempDir(), "t");
      if (kind === "dir") mkdirSync(at);
      if (kind === "fifo") Bun.spawnSync(["mkfifo", at]);
      if (kind === "link") (require("node:fs") as typeof import("node:fs")).writeFileSync(target, "x"), symlinkSync(target, at);
      if (kind === "dangling") symlinkSync(target, at);
      let err: unknown;
      try {
        tryBuildLock(dir);
      } catch (e) {
        err = e;
      }
      expect((err as { code?: string })?.code, kind).toBe("E_UNSAFE_PATH");
      expect((err as Error).message).toContain(`${at} is not a regular file`);
      const lenient = tryBuildLock(dir, { create: false, lenient: true });
      expect(lenient.lock, kind).toBeDefined();
      lenient.lock!.release();
    }
  });
});
