/**
 * `kerncap clean` (src/ops/clean.ts): what it removes of a capture (build/, build/eval/ with
 * --eval, profile/ with --profile) and what it never touches; --dry-run; links not followed; a
 * running eval's lock refuses the whole command; a capture set's members; the --json document.
 */
import { expect, test } from "bun:test";
import { chmodSync, existsSync, mkdirSync, readdirSync, readFileSync, symlinkSync, writeFileSync } from "node:fs";
import { basename, dirname, join } from "node:path";
import * as v from "valibot";
import { DOCUMENTS } from "../../src/format/documents.ts";
import { cleanCaptures, cleanTargets, cleanTargetsUnder } from "../../src/ops/clean.ts";
import { KerncapError } from "../../src/errors.ts";
import { makeCapture, tempDir } from "./fixtures.ts";

const MAIN = join(import.meta.dir, "../../src/cli/main.ts");
const cli = (args: string[]) => {
  const p = Bun.spawnSync([process.execPath, MAIN, "clean", ...args], { stdout: "pipe", stderr: "pipe" });
  return { code: p.exitCode, out: p.stdout.toString(), err: p.stderr.toString() };
};

/** A capture with what validate, eval and profile leave: build/kernel.cubin (1000 B), build/eval/<copy>/module (3000 B), profile/report.ncu-rep (500 B). */
async function built(): Promise<string> {
  const dir = join(tempDir(), "cap");
  await makeCapture(dir);
  mkdirSync(join(dir, "build/eval/0123456789abcdef"), { recursive: true });
  writeFileSync(join(dir, "build/kernel.cubin"), Buffer.alloc(1000));
  writeFileSync(join(dir, "build/eval/0123456789abcdef/module"), Buffer.alloc(3000));
  mkdirSync(join(dir, "profile"));
  writeFileSync(join(dir, "profile/report.ncu-rep"), Buffer.alloc(500));
  return dir;
}

/** The capture's own entries (all but build/ and profile/), with their content's digest. */
function own(dir: string): string[] {
  return readdirSync(dir, { recursive: true })
    .map(String)
    .filter((n) => !/^(build|profile)(\/|$)/.test(n))
    .sort()
    .map((n) => {
      const p = join(dir, n);
      let body = "";
      try {
        body = String(Bun.hash(readFileSync(p)));
      } catch {
        /* a folder */
      }
      return `${n} ${body}`;
    });
}

test("clean removes build/ and nothing the capture holds; --dry-run says the same sizes and removes nothing; --json is a kerncap.clean/1 document", async () => {
  const dir = await built();
  const before = own(dir);
  const dry = cli([dir, "--dry-run", "--json"]);
  expect(dry.code, dry.err).toBe(0);
  const d = JSON.parse(dry.out);
  expect(v.safeParse(DOCUMENTS.clean, d).success).toBe(true);
  expect(d).toMatchObject({ schema: "kerncap.clean/1", dryRun: true, bytes: 4000, captures: [{ removed: [{ path: "build", bytes: 4000, files: 2 }] }] });
  expect(existsSync(join(dir, "build/kernel.cubin"))).toBe(true);
  // a folder given relative is the absolute one in the document, as every verb's
  const rel = Bun.spawnSync([process.execPath, MAIN, "clean", basename(dir), "--dry-run", "--json"], { cwd: dirname(dir), stdout: "pipe", stderr: "pipe" });
  expect(JSON.parse(rel.stdout.toString()).captures[0].dir).toBe(dir);
  const r = cli([dir]);
  expect(r.code, r.err).toBe(0);
  expect(r.out).toContain("removed build/ (3.9 KiB, 2 files)");
  expect(r.out).toContain("1 capture: 3.9 KiB freed");
  expect(existsSync(join(dir, "build"))).toBe(false);
  expect(existsSync(join(dir, "profile/report.ncu-rep"))).toBe(true); // only with --profile
  expect(own(dir)).toEqual(before);
  expect(readdirSync(dir).filter((n) => n.includes(".tmp-"))).toEqual([]); // nothing left aside
  // again: nothing to remove, said
  const again = cli([dir]);
  expect(again.out).toContain("nothing to remove");
  // --profile
  const p = cli([dir, "--profile", "--json"]);
  expect(JSON.parse(p.out).captures[0].removed).toEqual([{ path: "profile", bytes: 500, files: 1 }]);
  expect(existsSync(join(dir, "profile"))).toBe(false);
  expect(own(dir)).toEqual(before);
});

test("--eval removes build/eval/ only (the pruned build's cache stays)", async () => {
  const dir = await built();
  const [c] = cleanCaptures(cleanTargets([dir]), { eval: true });
  expect(c!.removed).toEqual([{ path: "build/eval", bytes: 3000, files: 1 }]);
  expect(existsSync(join(dir, "build/kernel.cubin"))).toBe(true);
  expect(existsSync(join(dir, "build/eval"))).toBe(false);
});

test("no link is followed: a link inside build/ and a build/ that is a link are removed as links, what they point at stays (and is not counted)", async () => {
  const outside = tempDir();
  writeFileSync(join(outside, "precious"), Buffer.alloc(7777));
  const dir = await built();
  symlinkSync(outside, join(dir, "build/eval/0123456789abcdef/src"));
  const [c] = cleanCaptures(cleanTargets([dir]));
  expect(c!.bytes).toBe(4000);
  expect(readFileSync(join(outside, "precious")).length).toBe(7777);
  const dir2 = await built();
  const { rmSync } = await import("node:fs");
  rmSync(join(dir2, "build"), { recursive: true });
  symlinkSync(outside, join(dir2, "build"));
  // --eval where build is that link: build/eval is the outside folder's eval/, never the capture's: left, nothing removed
  mkdirSync(join(outside, "eval"));
  writeFileSync(join(outside, "eval/kept"), "x");
  expect(cleanCaptures(cleanTargets([dir2]), { eval: true })[0]!.removed).toEqual([]);
  expect(cleanCaptures(cleanTargets([dir2]), { eval: true, dryRun: true })[0]!.removed).toEqual([]);
  expect(readFileSync(join(outside, "eval/kept"), "utf8")).toBe("x");
  const [c2] = cleanCaptures(cleanTargets([dir2]));
  expect(c2!.removed).toEqual([{ path: "build", bytes: 0, files: 0 }]);
  expect(existsSync(join(dir2, "build"))).toBe(false);
  expect(readFileSync(join(outside, "precious")).length).toBe(7777);
});

test("a running eval's lock in build/eval refuses the whole command (E_BUSY), nothing removed; a lock whose process is gone is none", async () => {
  const a = await built();
  const b = await built();
  writeFileSync(join(b, "build/eval", `.kerncap-eval-${process.pid}-abcdef012345.lock`), `${process.pid}\n0123456789abcdef\n`);
  let err: unknown;
  try {
    cleanCaptures(cleanTargets([a, b]));
  } catch (e) {
    err = e;
  }
  expect(err).toBeInstanceOf(KerncapError);
  expect((err as KerncapError).code).toBe("E_BUSY");
  expect((err as KerncapError).message).toContain(`pid ${process.pid}`);
  expect(existsSync(join(a, "build/kernel.cubin"))).toBe(true); // the first capture too: checked before anything is removed
  const r = cli([a, b]);
  expect(r.code).toBe(2);
  expect(r.err).toContain("an eval is running on");
  // a dead pid: not a lock
  const { rmSync } = await import("node:fs");
  rmSync(join(b, "build/eval", `.kerncap-eval-${process.pid}-abcdef012345.lock`));
  writeFileSync(join(b, "build/eval", ".kerncap-eval-999999999-abcdef012345.lock"), "999999999\n");
  expect(cleanCaptures(cleanTargets([a, b])).map((c) => c.removed.length)).toEqual([1, 1]);
});

test("a capture set's folder: each member cleaned; a folder inside a capture is refused as no capture of its own", async () => {
  const set = tempDir();
  const m1 = join(set, "m1");
  const m2 = join(set, "m2");
  await makeCapture(m1);
  await makeCapture(m2);
  for (const m of [m1, m2]) {
    mkdirSync(join(m, "build"));
    writeFileSync(join(m, "build/kernel.cubin"), Buffer.alloc(10));
  }
  writeFileSync(
    join(set, "kerncap-captures.json"),
    JSON.stringify({
      format: "kerncap-capture-set",
      version: 1,
      command: ["app"],
      captures: [
        { dir: "m1", kernel: "k", launchIndex: 0 },
        { dir: "m2", kernel: "k", launchIndex: 1 },
      ],
    }),
  );
  const r = cli([set, "--json"]);
  expect(r.code, r.err).toBe(0);
  expect(JSON.parse(r.out).captures.map((c: { bytes: number }) => c.bytes)).toEqual([10, 10]);
  const inner = cli([join(m1, "src")]);
  expect(inner.code).toBe(2);
});

test("a link at build/ leads the lock check nowhere (adversary 33 #1: a lock in its target made clean refuse); a lock another user wrote blocks nothing (#2)", async () => {
  const outside = tempDir();
  mkdirSync(join(outside, "eval"), { recursive: true });
  writeFileSync(join(outside, "eval", `.kerncap-eval-${process.pid}-abcdef012345.lock`), `${process.pid}\n`);
  const dir = await built();
  const { rmSync, chownSync } = await import("node:fs");
  rmSync(join(dir, "build"), { recursive: true });
  symlinkSync(outside, join(dir, "build"));
  expect(cleanCaptures(cleanTargets([dir]))[0]!.removed).toEqual([{ path: "build", bytes: 0, files: 0 }]);
  expect(existsSync(join(outside, "eval"))).toBe(true);
  if (process.geteuid?.() === 0) {
    const other = await built();
    const lock = join(other, "build/eval", ".kerncap-eval-1-abcdef012345.lock"); // pid 1 is always alive
    writeFileSync(lock, "1\n");
    chownSync(lock, 1002, 1002);
    expect(cleanCaptures(cleanTargets([other]))[0]!.removed.map((r) => r.path)).toEqual(["build"]);
  }
});

test("a build/ nested past PATH_MAX is counted to a depth and removed whole, exit 0 (adversary 33 #3: E_IO after removing it)", async () => {
  const dir = await built();
  // 300 folders of 16 letters below build/ (past 4096 bytes of path), made by python3 a step at a time
  const py = Bun.spawnSync(
    [
      "python3",
      "-c",
      "import os,sys\nos.chdir(sys.argv[1])\nfor _ in range(300):\n  os.mkdir('a'*16); os.chdir('a'*16)\nopen('deep','w').write('x')",
      join(dir, "build"),
    ],
    { stderr: "pipe" },
  );
  expect(py.exitCode, py.stderr.toString()).toBe(0);
  const r = cli([dir, "--json"]);
  expect(r.code, r.err).toBe(0);
  expect(JSON.parse(r.out).captures[0].removed[0].path).toBe("build");
  expect(existsSync(join(dir, "build"))).toBe(false);
});

// adversary 35: a clean killed mid-way left build.tmp-<pid>-<hex>/ in the capture; the next clean said nothing to remove and pack refused the capture
test("what a killed clean left (build.tmp-<dead pid>-<hex>, 0700; pid 4194303, the largest Linux gives, none here): the next clean counts and removes it, --dry-run says it; pack leaves it out", async () => {
  const a = await built();
  const { packCapture } = await import("../../src/format/archive.ts");
  const { chmodSync, statSync } = await import("node:fs");
  const left = join(a, "build.tmp-4194303-0123456789ab");
  mkdirSync(join(left, "old"), { recursive: true });
  writeFileSync(join(left, "old/kernel.cubin"), "x".repeat(1000));
  chmodSync(left, 0o700);
  // a look-alike of the user's (group-readable) or a live process's: left alone
  const mine = join(a, "build.tmp-4194302-0123456789ab");
  mkdirSync(mine, { mode: 0o755 });
  chmodSync(mine, 0o755);
  // numbered as no pid kerncap writes (0, a leading zero, past PID_MAX): the user's, however private (adversary 36)
  const odd = ["build.tmp-0-abcdefabcdef", "build.tmp-0099993-abcdefabcdef", "build.tmp-99999999999999999999-abcdefabcdef"].map((n) => join(a, n));
  for (const o of odd) {
    mkdirSync(o);
    chmodSync(o, 0o700);
  }
  // a live process's 0755 one holding the user's notes: pack takes it as any other folder (refused), never "left out"
  const live = join(a, `profile.tmp-${process.pid}-abcdefabcdef`);
  mkdirSync(live);
  writeFileSync(join(live, "notes.txt"), "mine");
  const packLive = await packCapture(a, join(tempDir(), "live.zip")).then(
    () => "packed",
    (e: KerncapError) => e.code,
  );
  expect(packLive).toBe("E_PACK_NAME");
  (await import("node:fs")).rmSync(live, { recursive: true });
  const packed = await packCapture(a, join(tempDir(), "a.zip"));
  expect(JSON.stringify(packed)).toContain("left by a kerncap clean that was stopped");
  const dry = cleanCaptures(cleanTargets([a]), { dryRun: true })[0]!;
  expect(dry.removed[0]!.path).toBe("build");
  expect(dry.bytes).toBeGreaterThanOrEqual(1000 + statSync(join(a, "build/kernel.cubin")).size);
  expect(existsSync(left)).toBe(true);
  const done = cleanCaptures(cleanTargets([a]))[0]!;
  expect(done.bytes).toBe(dry.bytes);
  expect(existsSync(left)).toBe(false);
  expect(existsSync(join(a, "build"))).toBe(false);
  expect(existsSync(mine)).toBe(true);
  for (const o of odd) expect(existsSync(o), o).toBe(true);
  // and with only the leftover there (no build/): still removed and said
  mkdirSync(join(left, "old"), { recursive: true });
  chmodSync(left, 0o700);
  expect(cleanCaptures(cleanTargets([a]))[0]!.removed.map((r) => r.path)).toEqual(["build"]);
  expect(existsSync(left)).toBe(false);
});

test("a kerncap build of the capture under way (its build lock held): E_BUSY naming the pid, nothing removed", async () => {
  const a = await built();
  const { tryBuildLock } = await import("../../src/util/build-lock.ts");
  const code = `const { tryBuildLock } = await import(${JSON.stringify(join(import.meta.dir, "../../src/util/build-lock.ts"))});
    if (!tryBuildLock(${JSON.stringify(a)}).lock) process.exit(3); console.log("held"); await Bun.sleep(60000);`;
  const child = Bun.spawn([process.execPath, "-e", code], { stdout: "pipe" });
  try {
    expect(new TextDecoder().decode((await child.stdout.getReader().read()).value)).toContain("held");
    let err: unknown;
    try {
      cleanCaptures(cleanTargets([a]));
    } catch (e) {
      err = e;
    }
    expect((err as KerncapError).code).toBe("E_BUSY");
    expect((err as KerncapError).message).toContain(`a kerncap build of ${a} is running (pid ${child.pid})`);
    expect(existsSync(join(a, "build/kernel.cubin"))).toBe(true);
  } finally {
    child.kill("SIGKILL");
    await child.exited;
  }
  const after = tryBuildLock(a).lock; // the kernel let it go with its holder
  expect(after).toBeDefined();
  after!.release();
  expect(cleanCaptures(cleanTargets([a]))[0]!.removed.length).toBe(1);
});

test("a folder that holds captures (check's corpus): each one found at any depth is cleaned; one that holds none is E_NOT_CAPTURE (a new user's finding: E_NOT_CAPTURE)", async () => {
  const corpus = join(tempDir(), "corpus");
  mkdirSync(join(corpus, "deep/er"), { recursive: true });
  const [a, b] = [join(corpus, "a"), join(corpus, "deep/er/b")];
  for (const d of [a, b]) {
    await makeCapture(d);
    mkdirSync(join(d, "build"));
    writeFileSync(join(d, "build/kernel.cubin"), Buffer.alloc(100));
  }
  const targets = await cleanTargetsUnder([corpus]);
  expect(targets.sort()).toEqual([a, b].sort());
  const r = cli([corpus, "--json"]);
  expect(r.code, r.err).toBe(0);
  const doc = JSON.parse(r.out);
  expect(doc.captures.map((c: { dir: string }) => c.dir).sort()).toEqual([a, b].sort());
  expect([existsSync(join(a, "build")), existsSync(join(b, "build"))]).toEqual([false, false]);
  const empty = join(tempDir(), "empty");
  mkdirSync(empty);
  const none = cli([empty]);
  expect(none.code).toBe(2);
  expect(none.err).toContain("E_NOT_CAPTURE");
  expect(none.err).toContain("is no capture and holds none");
});

test("a shared corpus: another user's capture, a damaged manifest or a manifest that is a link is passed over with a warning, the user's own cleaned (adversary 85 #03)", async () => {
  const corpus = join(tempDir(), "team");
  mkdirSync(corpus);
  const mine = join(corpus, "zz-mine"); // sorts last: a refusal before it would stop it
  await makeCapture(mine);
  mkdirSync(join(mine, "build"));
  writeFileSync(join(mine, "build/kernel.cubin"), Buffer.alloc(100));
  const broken = join(corpus, "a-broken");
  mkdirSync(broken);
  writeFileSync(join(broken, "kerncap.json"), "{");
  const linked = join(corpus, "b-linked");
  mkdirSync(linked);
  symlinkSync(join(mine, "kerncap.json"), join(linked, "kerncap.json"));
  if (process.getuid?.() === 0) {
    const theirs = join(corpus, "c-theirs");
    await makeCapture(theirs);
    mkdirSync(join(theirs, "build"));
    Bun.spawnSync(["chown", "-R", "65534:65534", theirs]);
  }
  for (const dry of [true, false]) {
    const r = cli([corpus, ...(dry ? ["--dry-run"] : [])]);
    expect(r.code, r.err).toBe(0);
    expect(r.err).toContain("a-broken: passed over: E_MANIFEST");
    if (process.getuid?.() === 0) expect(r.err).toContain("c-theirs: passed over: the folder belongs to another user (uid 65534");
    expect(existsSync(join(mine, "build")), `dry ${dry}`).toBe(dry);
  }
  if (process.getuid?.() === 0) expect(existsSync(join(corpus, "c-theirs/build"))).toBe(true);
  // named directly, a damaged capture keeps its hard error
  expect(cli([broken]).code).toBe(2);
});

test("a kerncap.json (or a capture set's file) another user dropped at the top of a shared corpus does not make the corpus one capture: the user's captures named build/ and profile/ there are not removed (adversary 86 #01)", async () => {
  const corpus = join(tempDir(), "team");
  mkdirSync(corpus);
  chmodSync(corpus, 0o1777);
  for (const n of ["mine", "build", "profile"]) {
    await makeCapture(join(corpus, n));
    mkdirSync(join(corpus, n, "build"));
  }
  writeFileSync(join(corpus, "build/src-note.txt"), "precious");
  // the planted file: a real manifest, as another user's (root runs the tests: chown shows the owner; else the 1777 folder does)
  writeFileSync(join(corpus, "kerncap.json"), readFileSync(join(corpus, "mine/kerncap.json")));
  if (process.getuid?.() === 0) Bun.spawnSync(["chown", "65534:65534", join(corpus, "kerncap.json")]);
  const r = cli([corpus, "--profile"]);
  expect(r.code, r.err).toBe(0);
  expect(readFileSync(join(corpus, "build/src-note.txt"), "utf8")).toBe("precious");
  expect(existsSync(join(corpus, "profile/kerncap.json"))).toBe(true);
  // the user's captures are cleaned as a corpus's; the root passed over, said
  expect(existsSync(join(corpus, "mine/build"))).toBe(false);
  expect(r.err).toContain("passed over");
});

test("the planted corpus named through a link of the user's (or /proc/self/cwd) is judged as the folder it leads to; a capture in a folder others may rename entries of is passed over (adversary 87 #01 #02)", async () => {
  if (process.getuid?.() !== 0) return; // the planted file must be another user's
  const root = tempDir();
  const corpus = join(root, "team");
  mkdirSync(corpus);
  chmodSync(corpus, 0o1777);
  Bun.spawnSync(["chown", "65534:65534", corpus]); // another user's shared corpus: neither it nor a file of theirs in it is the user's
  for (const n of ["build", "profile"]) await makeCapture(join(corpus, n));
  writeFileSync(join(corpus, "build/src-note.txt"), "precious");
  writeFileSync(join(corpus, "kerncap.json"), readFileSync(join(corpus, "build/kerncap.json")));
  Bun.spawnSync(["chown", "65534:65534", join(corpus, "kerncap.json")]);
  symlinkSync(corpus, join(root, "link"));
  const r = cli([join(root, "link"), "--profile"]);
  expect(readFileSync(join(corpus, "build/src-note.txt"), "utf8")).toBe("precious");
  expect(existsSync(join(corpus, "profile/kerncap.json"))).toBe(true);
  expect(r.err).toContain("passed over");
  // a capture of the user's in a 0777 folder (not sticky): another user could swap it for a link to another capture of the user's
  const open = join(root, "open");
  mkdirSync(open);
  chmodSync(open, 0o777);
  const mine = join(open, "vcap");
  await makeCapture(mine);
  mkdirSync(join(mine, "build"));
  const s = cli([root]);
  expect(s.err).toContain("vcap: passed over");
  expect(existsSync(join(mine, "build"))).toBe(true);
});

test("a build/ (or profile/) of another user's inside the user's capture is left as it is, said; the user's own parts are removed (adversary 88)", async () => {
  if (process.getuid?.() !== 0) return; // the part must be another user's
  const dir = join(tempDir(), "cap");
  await makeCapture(dir);
  mkdirSync(join(dir, "build"));
  writeFileSync(join(dir, "build/theirs.txt"), "x");
  Bun.spawnSync(["chown", "-R", "65534:65534", join(dir, "build")]);
  mkdirSync(join(dir, "profile"));
  const r = cli([dir, "--profile"]);
  expect(r.code, r.err).toBe(0);
  expect(r.err).toContain("build: left as it is: it belongs to another user (uid 65534)");
  expect(existsSync(join(dir, "build/theirs.txt"))).toBe(true);
  expect(existsSync(join(dir, "profile"))).toBe(false);
});
