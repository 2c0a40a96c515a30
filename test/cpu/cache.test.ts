/**
 * The one cache-folder helper (src/cache.ts): content-hashed folders, written once, and the
 * TMPDIR fallback when the cache folder cannot be written (no home, /proc, read-only), said once.
 */
import { describe, expect, test } from "bun:test";
import { chmodSync, chownSync, existsSync, mkdirSync, readFileSync, readdirSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { cachedFolder, privateFolderRisk, contentHash, fallbackCacheDir, preferredCacheDir } from "../../src/cache.ts";
import { KerncapError } from "../../src/errors.ts";
import { tempDir } from "./fixtures.ts";

const ROOT = resolve(import.meta.dir, "../..");
const IS_ROOT = process.getuid?.() === 0;
const files = (text = "hello") => [
  { path: "a.txt", bytes: text, mode: 0o644 },
  { path: "sub/run.sh", bytes: "#!/bin/sh\necho hi\n", mode: 0o755 },
];

/** cachedFolder with stderr captured (the fallback warning goes there through the logger). */
function withStderr<T>(f: () => T): { value: T; err: string } {
  const chunks: string[] = [];
  const write = process.stderr.write.bind(process.stderr);
  (process.stderr as any).write = (c: string) => (chunks.push(String(c)), true);
  try {
    return { value: f(), err: chunks.join("") };
  } finally {
    (process.stderr as any).write = write;
  }
}

describe("cache folder", () => {
  test("where it is: KERNCAP_CACHE, else XDG_CACHE_HOME/kerncap, else ~/.cache/kerncap", () => {
    expect(preferredCacheDir({ KERNCAP_CACHE: "/c", XDG_CACHE_HOME: "/x", HOME: "/h" }).dir).toBe("/c");
    expect(preferredCacheDir({ XDG_CACHE_HOME: "/x", HOME: "/h" }).dir).toBe("/x/kerncap");
    expect(preferredCacheDir({ HOME: "/h" }).dir).toBe("/h/.cache/kerncap");
    // HOME unset or empty: the user's home folder from the password database, and said so (not "from HOME")
    for (const env of [{}, { HOME: "" }]) expect(preferredCacheDir(env).from).toBe("the home folder of the user (HOME is unset)");
    expect(fallbackCacheDir({ TMPDIR: "/t" })).toMatch(/^\/t\/kerncap-cache-/);
  });

  test("a relative KERNCAP_CACHE is refused (doctor says so, and creates nothing in the current folder); a relative XDG_CACHE_HOME is ignored", async () => {
    expect(() => preferredCacheDir({ KERNCAP_CACHE: "relative/dir", HOME: "/h" })).toThrow("KERNCAP_CACHE must be an absolute path");
    expect(preferredCacheDir({ XDG_CACHE_HOME: "rel", HOME: "/h" }).dir).toBe("/h/.cache/kerncap");
    const { checkCache } = await import("../../src/doctor.ts");
    const cwd = process.cwd();
    const d = tempDir();
    process.chdir(d);
    try {
      expect(checkCache({ ...process.env, KERNCAP_CACHE: "relative/dir" })).toMatchObject({ status: "fail", detail: expect.stringContaining("absolute path") });
      expect(existsSync(join(d, "relative"))).toBe(false);
    } finally {
      process.chdir(cwd);
    }
  });

  test("content-hashed, written once with mode bits, reused", () => {
    const d = tempDir();
    const env = { KERNCAP_CACHE: d };
    const p = cachedFolder("thing", files(), env);
    expect(p).toBe(join(d, `thing-${contentHash(files())}`));
    expect(readFileSync(join(p, "a.txt"), "utf8")).toBe("hello");
    expect(statSync(join(p, "sub/run.sh")).mode & 0o777).toBe(0o755);
    const mtime = statSync(join(p, "a.txt")).mtimeMs;
    expect(cachedFolder("thing", files(), env)).toBe(p);
    expect(statSync(join(p, "a.txt")).mtimeMs).toBe(mtime); // not written again
    expect(cachedFolder("thing", files("other"), env)).not.toBe(p); // other content, other folder
    expect(readdirSync(d).filter((n) => n.includes(".tmp-"))).toEqual([]);
  });

  test("a stale temp folder of a killed writer is removed; a live writer's is kept", async () => {
    const d = tempDir();
    const dead = Bun.spawn(["true"]);
    await dead.exited;
    const live = Bun.spawn(["sleep", "30"]);
    try {
      const leaf = `thing-${contentHash(files())}`;
      mkdirSync(join(d, `${leaf}.tmp-${dead.pid}`));
      writeFileSync(join(d, `${leaf}.tmp-${dead.pid}`, ".kerncap-temp"), `${dead.pid}\n`); // what a writer leaves (src/leftovers.ts)
      mkdirSync(join(d, `${leaf}.tmp-${live.pid}`));
      cachedFolder("thing", files(), { KERNCAP_CACHE: d });
      expect(existsSync(join(d, `${leaf}.tmp-${dead.pid}`))).toBe(false);
      expect(existsSync(join(d, `${leaf}.tmp-${live.pid}`))).toBe(true);
    } finally {
      live.kill();
    }
  });

  // each case: the folder cannot be written; the files land in $TMPDIR/kerncap-cache-<uid>, said once
  const unwritable: [string, () => Record<string, string>][] = [
    // (a path that surely does not exist: as root, something may have created /nonexistent)
    ["HOME=/nonexistent (a home folder that does not exist)", () => ({ HOME: join(tempDir(), "nonexistent") })],
    ["XDG_CACHE_HOME=/proc", () => ({ XDG_CACHE_HOME: "/proc", HOME: join(tempDir(), "nonexistent") })],
    ["KERNCAP_CACHE on a file system that refuses writes (/sys)", () => ({ KERNCAP_CACHE: "/sys/kerncap-cache" })],
    [
      "KERNCAP_CACHE under a regular file (ENOTDIR)",
      () => {
        const f = join(tempDir(), "file");
        writeFileSync(f, "x");
        return { KERNCAP_CACHE: join(f, "cache") };
      },
    ],
  ];
  for (const [name, mk] of unwritable) {
    test(`${name}: falls back to TMPDIR, said once`, () => {
      const tmp = tempDir();
      const env = { ...mk(), TMPDIR: tmp };
      const { value: p, err } = withStderr(() => cachedFolder("thing", files(`fallback ${name}`), env));
      expect(p.startsWith(join(tmp, "kerncap-cache-"))).toBe(true);
      expect(readFileSync(join(p, "a.txt"), "utf8")).toBe(`fallback ${name}`);
      expect(err).toContain("cannot be written; using");
      expect(err).toContain("KERNCAP_CACHE");
      expect(statSync(join(tmp, `kerncap-cache-${process.getuid?.()}`)).mode & 0o777).toBe(0o700);
      // once per process: a second set of files for the same cache folder says nothing
      const again = withStderr(() => cachedFolder("other", files("again"), env));
      expect(again.err).toBe("");
    });
  }

  test.skipIf(IS_ROOT)("a read-only cache folder (mode 0555): falls back; one that already holds the files is used", () => {
    const d = tempDir();
    const full = cachedFolder("thing", files(), { KERNCAP_CACHE: d });
    chmodSync(d, 0o555);
    try {
      expect(cachedFolder("thing", files(), { KERNCAP_CACHE: d })).toBe(full);
      const tmp = tempDir();
      const p = withStderr(() => cachedFolder("thing", files("new"), { KERNCAP_CACHE: d, TMPDIR: tmp })).value;
      expect(p.startsWith(tmp)).toBe(true);
    } finally {
      chmodSync(d, 0o755);
    }
  });

  // adversary 34: an attacker made /tmp/kerncap-cache-UID first; kerncap refused it (rightly) and then threw E_CACHE,
  // which left kerncap-confine unwritten and a received capture's build unsandboxed
  test("a TMPDIR fallback planted by another (a link, here): not written into; a private folder of this process's own instead, said once", () => {
    const tmp = tempDir();
    const elsewhere = tempDir();
    symlinkSync(elsewhere, fallbackCacheDir({ TMPDIR: tmp }));
    const { value: p, err } = withStderr(() => cachedFolder("thing", files("planted fallback"), { KERNCAP_CACHE: "/proc/kerncap-a", TMPDIR: tmp }));
    expect(p).toMatch(new RegExp(`^${tmp}/kerncap-private-\\d+-[^/]+/thing-[0-9a-f]{16}$`));
    expect(statSync(dirname(p)).mode & 0o777).toBe(0o700);
    expect(readFileSync(join(p, "a.txt"), "utf8")).toBe("planted fallback");
    expect(readdirSync(elsewhere)).toEqual([]);
    expect(err).toContain("using a private copy in");
  });

  test("neither the cache nor TMPDIR writable: a clear error naming both and the way out", () => {
    let e: unknown;
    try {
      cachedFolder("thing", files(), { KERNCAP_CACHE: "/proc/kerncap-a", TMPDIR: "/proc/kerncap-b" });
    } catch (x) {
      e = x;
    }
    expect(e).toBeInstanceOf(KerncapError);
    expect((e as KerncapError).code).toBe("E_CACHE");
    expect((e as KerncapError).message).toContain("/proc/kerncap-a");
    expect((e as KerncapError).message).toContain("/proc/kerncap-b");
    expect((e as KerncapError).hint).toContain("KERNCAP_CACHE");
  });

  // HOME under /proc: the Bun runtime itself creates $HOME/.bun when it can (as root, even /nonexistent)
  test("the embedded capture library and Triton shim with a home that cannot exist: extracted under TMPDIR, one warning, no internal error", async () => {
    const tmp = tempDir();
    const code = `
      const { cudaCaptureLibrary } = await import(${JSON.stringify(join(ROOT, "src/capture/lib.ts"))});
      const { tritonShimDir } = await import(${JSON.stringify(join(ROOT, "src/frontends/triton/shim.ts"))});
      console.log(await cudaCaptureLibrary());
      console.log(await tritonShimDir());`;
    const { KERNCAP_CACHE: _, XDG_CACHE_HOME: __, KERNCAP_CUDA_LIB: ___, KERNCAP_TRITON_SHIM: ____, ...env } = process.env;
    const p = Bun.spawnSync([process.execPath, "-e", code], { env: { ...env, HOME: "/proc/nonexistent", TMPDIR: tmp }, stdout: "pipe", stderr: "pipe" });
    const err = p.stderr.toString();
    expect(p.exitCode, err).toBe(0);
    const [lib, shim] = p.stdout.toString().trim().split("\n");
    expect(lib).toMatch(new RegExp(`^${tmp}/kerncap-cache-\\d+/cuda-lib-[0-9a-f]{16}/libkerncap_cuda\\.so$`));
    expect(existsSync(join(shim!, "sitecustomize.py"))).toBe(true);
    expect(err.match(/cannot be written; using/g)?.length).toBe(1);
  });
});

// another local user may write a shared cache: a planted library must never be loaded (src/cache.ts privateFolderRisk)
describe("cache trust", () => {
  const planted = "planted by another user";
  /** A cache folder at `d` holding the leaf of files() with its first file replaced by `planted`. */
  const plant = (d: string) => {
    const leaf = join(d, `thing-${contentHash(files())}`);
    mkdirSync(join(leaf, "sub"), { recursive: true });
    writeFileSync(join(leaf, "a.txt"), planted, { mode: 0o644 });
    writeFileSync(join(leaf, "sub/run.sh"), "#!/bin/sh\necho hi\n", { mode: 0o755 });
    return leaf;
  };

  for (const mode of [0o777, 0o1777]) {
    test(`a cache folder of mode ${mode.toString(8)} holding a planted copy: not used, the copy comes from a folder of the user's, a warning names the folder; doctor says so with the fix`, async () => {
      const d = tempDir();
      const leaf = plant(d);
      chmodSync(d, mode);
      const tmp = tempDir();
      const { value: p, err } = withStderr(() => cachedFolder("thing", files(), { KERNCAP_CACHE: d, TMPDIR: tmp }));
      expect(p.startsWith(d)).toBe(false);
      expect(p.startsWith(tmp)).toBe(true);
      expect(readFileSync(join(p, "a.txt"), "utf8")).toBe("hello");
      expect(readFileSync(join(leaf, "a.txt"), "utf8")).toBe(planted); // left alone: not ours to remove
      expect(err).toContain(`${d} is writable by other users (mode ${mode.toString(8).padStart(4, "0")})`);
      const { checkCache } = await import("../../src/doctor.ts");
      const c = checkCache({ KERNCAP_CACHE: d, TMPDIR: tmp });
      expect(c.status).toBe("warn");
      expect(c.detail).toContain(`${d} (from KERNCAP_CACHE) is not used: ${d} is writable by other users`);
      expect(c.fix).toContain("chmod go-w");
    });
  }

  test("a copy whose bytes differ from the embedded ones (a wrong hash) in the user's own cache: written again, said so", () => {
    const d = tempDir();
    chmodSync(d, 0o700);
    const leaf = plant(d);
    const { value: p, err } = withStderr(() => cachedFolder("thing", files(), { KERNCAP_CACHE: d }));
    expect(p).toBe(leaf);
    expect(readFileSync(join(p, "a.txt"), "utf8")).toBe("hello");
    expect(err).toContain(`${join(leaf, "a.txt")} differs from the copy embedded in kerncap; writing it again`);
  });

  test("a sticky, world-writable parent (a 1777 /tmp) above the user's own 0700 cache folder is fine", () => {
    const parent = tempDir();
    chmodSync(parent, 0o1777);
    const d = join(parent, "cache");
    const p = cachedFolder("thing", files(), { KERNCAP_CACHE: d });
    expect(p.startsWith(d)).toBe(true);
    expect(statSync(d).mode & 0o777).toBe(0o700);
    expect(privateFolderRisk(d)).toBeUndefined();
    // the same parent without its sticky bit: anyone could rename the cache folder away and put their own
    chmodSync(parent, 0o777);
    expect(privateFolderRisk(d)).toBe(`${parent} is writable by other users (mode 0777)`);
  });

  test.skipIf(!IS_ROOT)("a cache folder owned by another user (or inside one) is not used", () => {
    const d = tempDir();
    plant(d);
    chownSync(d, 65534, 65534);
    expect(privateFolderRisk(d)).toBe(`${d} belongs to another user (uid 65534)`);
    expect(privateFolderRisk(join(d, "sub"))).toBe(`${d} belongs to another user (uid 65534)`);
    const tmp = tempDir();
    const { value: p } = withStderr(() => cachedFolder("thing", files(), { KERNCAP_CACHE: d, TMPDIR: tmp }));
    expect(p.startsWith(tmp)).toBe(true);
    expect(readFileSync(join(p, "a.txt"), "utf8")).toBe("hello");
  });
});
