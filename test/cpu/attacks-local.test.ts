/**
 * The attack suite, local-user rows: another user of this machine who can write a folder the
 * victim uses (a team's group-writable folder, /tmp, a results folder, the folder above the state
 * folder). Each test runs the attack and asserts it is refused (and that nothing planted ran):
 *
 * - a capture made here in a group-writable folder: a group member appends a command to build.sh
 *   in place (its owner unchanged); the capture counts as received (inspect says which file and
 *   why), validate refuses it (E_UNTRUSTED) and the appended command never runs;
 * - a kerncap.json dropped in /tmp (a sticky folder every user can write), in a folder every user
 *   can write, or by another user, makes no capture below it "nested": inspect, demo and unpack
 *   work there; a kerncap.json under the user's own capture (the MCP agent's src/x) is still refused;
 * - `kerncap check` refuses a results folder (or its results.jsonl, baseline.json) that another user
 *   owns or can write before any capture is checked: a forged "ok" record is never taken on --resume;
 * - the trust store (trusted-builds.json) is kept only where the cache folder would be: no folder on
 *   the way another user owns, none others can write unless sticky above a folder of the user's.
 *
 * Tests that need another user's file run as root only (chown to uid 65534); the rest need none.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import {
  chmodSync,
  lchownSync,
  lstatSync,
  chownSync,
  copyFileSync,
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  realpathSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { assertNotNested, outerCapture, readManifest } from "../../src/format/capture-dir.ts";
import { notMadeHere, receivedReasons } from "../../src/format/received.ts";
import { trustOwnBuild, trustRecorded } from "../../src/format/trust.ts";
import { stateDir, stateFolderRisk } from "../../src/format/trust-records.ts";
import { runCheck, type CheckOptions } from "../../src/check/check.ts";
import { mergeResults } from "../../src/check/merge.ts";
import type { OpenRunner } from "../../src/check/pool.ts";
import type { Outcome } from "../../src/format/check-record.ts";
import { KerncapError } from "../../src/errors.ts";
import { privateTempFolder, sharedParentRisk } from "../../src/cache.ts";
import { isPrivateGroup } from "../../src/user-group.ts";
import { stageTrustedBuild } from "../../src/format/staged-build.ts";
import { BUILD_OUTPUT_MAX, runBuildCommand } from "../../src/frontends/build.ts";
import { pidNamespace, tempFor } from "../../src/leftovers.ts";
import { makePrivateTemp } from "../../src/util/write-file.ts";
import { checkOptions, deadPid, fakeOutcome, makeCapture, stockBuildSh, tempDir, trustDigest } from "./fixtures.ts";

const ROOT = process.geteuid?.() === 0;
const NOBODY = 65534;
const MAIN = join(import.meta.dir, "../../src/cli/main.ts");

let savedState: string | undefined;
beforeAll(() => {
  savedState = process.env.XDG_STATE_HOME;
  process.env.XDG_STATE_HOME = tempDir("kerncap-state-");
});
afterAll(() => {
  if (savedState === undefined) delete process.env.XDG_STATE_HOME;
  else process.env.XDG_STATE_HOME = savedState;
});

/** `kerncap ARGV --json` as a process: exit code, the --json document, stderr. */
function cli(argv: string[], env: Record<string, string> = {}): { code: number; doc: Record<string, any>; err: string } {
  const p = Bun.spawnSync([process.execPath, MAIN, ...argv, "--json"], {
    cwd: tempDir("kerncap-cwd-"),
    stdout: "pipe",
    stderr: "pipe",
    env: { ...process.env, ...env },
    timeout: 120_000,
  });
  let doc: Record<string, any> = {};
  try {
    doc = JSON.parse(p.stdout.toString());
  } catch {
    doc = { unparsed: p.stdout.toString() };
  }
  return { code: p.exitCode ?? -1, doc, err: p.stderr.toString() };
}

/** The KerncapError `fn` throws (or a failed expectation when it throws none). */
async function refusal(fn: () => unknown): Promise<KerncapError> {
  try {
    await fn();
  } catch (e) {
    if (e instanceof KerncapError) return e;
    throw e;
  }
  throw new Error("no refusal");
}

describe("attack: a group member edits build.sh of a capture made here in a team folder", () => {
  test("a group-writable build.sh (or folder, src/) makes the capture received; validate refuses it and the appended command never runs", async () => {
    const root = tempDir("kerncap-attack-");
    const cap = join(root, "cap");
    const m = await makeCapture(cap); // this machine's id, this user's files
    const marker = join(root, "GROUP-MEMBER-RAN");
    writeFileSync(join(cap, "build.sh"), `#!/usr/bin/env bash\necho "no compiler in this test" >&2\nexit 1\n`, { mode: 0o755 });
    expect(receivedReasons(cap, m)).toEqual([]); // made here, by this user
    // the team folder: group-writable, as `chmod -R g+w` leaves it; a member appends in place
    chmodSync(join(cap, "build.sh"), 0o775);
    writeFileSync(join(cap, "build.sh"), `#!/usr/bin/env bash\ntouch ${JSON.stringify(marker)}\nexit 1\n`); // same inode, same owner
    expect(receivedReasons(cap, m)).toEqual([
      `build.sh can be written by every member of its group (gid ${statSync(join(cap, "build.sh")).gid}, mode 775), who could change what the build runs`,
    ]);
    const ins = cli(["inspect", cap]);
    expect(ins.code).toBe(0);
    expect(ins.doc.received.received).toBe(true);
    expect(ins.doc.received.reasons.join("; ")).toContain("build.sh can be written by every member of its group");
    const v = cli(["validate", cap]);
    expect(v.code).toBe(2);
    expect(v.doc.error.code).toBe("E_UNTRUSTED");
    expect(existsSync(marker)).toBe(false);
    // plain --trust is not enough either: the member could change the file after it was read
    const t = cli(["validate", cap, "--trust"]);
    expect(t.code).toBe(2);
    expect(t.doc.error.message).toContain("plain --trust is not enough here");
    expect(existsSync(marker)).toBe(false);
    // the folder itself, or src/, group-writable: the same
    chmodSync(join(cap, "build.sh"), 0o755);
    expect(receivedReasons(cap, m)).toEqual([]);
    mkdirSync(join(cap, "src"), { mode: 0o755 });
    chmodSync(join(cap, "src"), 0o775);
    expect(receivedReasons(cap, m)[0]).toStartWith("src can be written by every member of its group");
    chmodSync(join(cap, "src"), 0o755);
    chmodSync(cap, 0o770);
    expect(receivedReasons(cap, m)[0]).toStartWith("the folder can be written by every member of its group");
  }, 60_000);

  test("a capture of the user's own in a folder others may rename entries of (0777 or a group's, not sticky) is received: they could swap it for theirs after every check (trial 24: renameat2 between the gate and the pruned build's dry run of DIR/build.sh)", async () => {
    const root = tempDir("kerncap-attack-");
    const team = join(root, "team");
    mkdirSync(team, { mode: 0o755 });
    const cap = join(team, "cap");
    const m = await makeCapture(cap);
    writeFileSync(join(cap, "build.sh"), stockBuildSh(), { mode: 0o755 }); // kerncap's own: plain --trust would be enough but for the swap
    expect(receivedReasons(cap, m)).toEqual([]);
    chmodSync(team, 0o777); // every user may rename its entries
    const why = receivedReasons(cap, m);
    expect(why).toEqual([`another user could swap the folder for theirs by its name (${team} is writable by other users (mode 0777) and not sticky)`]);
    // a folder further up counts as much (they rename the folder that holds it)
    chmodSync(team, 0o755);
    chmodSync(root, 0o777);
    expect(receivedReasons(cap, m)[0]).toContain(`${root} is writable by other users (mode 0777) and not sticky`);
    // named through a link of yours from a safe folder: the folders above where it lies count (trial 26)
    const mine = tempDir("kerncap-attack-");
    symlinkSync(cap, join(mine, "cap"));
    expect(receivedReasons(join(mine, "cap"), m)[0]).toContain(`${root} is writable by other users (mode 0777) and not sticky`);
    // sticky: no one but its owner (root or you) renames your entries
    chmodSync(root, 0o1777);
    expect(receivedReasons(cap, m)).toEqual([]);
    expect(receivedReasons(join(mine, "cap"), m)).toEqual([]);
    if (ROOT) {
      // a folder of another user's on the way, whatever its mode: its owner renames what is in it (trial 25: a 0755 folder of the attacker's)
      chmodSync(root, 0o755);
      chownSync(team, 4242, 4242);
      expect(receivedReasons(cap, m)).toEqual([
        `another user could swap the folder for theirs by its name (${team} belongs to another user (uid 4242), who may rename what is in it)`,
      ]);
      chownSync(team, 0, 0);
      chmodSync(root, 0o1777);
    }
    chmodSync(root, 0o777);
    const v = cli(["validate", cap]);
    expect(v.code).toBe(2);
    expect(v.doc.error.code).toBe("E_UNTRUSTED");
    // the digest and the files for a program to read (trial 7: a driver had to regex them out of the message)
    const trust = v.doc.error.details.trust;
    expect(trust.digest).toMatch(/^[0-9a-f]{64}$/);
    expect(v.doc.error.message).toContain(trust.digest);
    expect(trust.files).toEqual([{ name: "build.sh", size: statSync(join(cap, "build.sh")).size, sha256: expect.stringMatching(/^[0-9a-f]{64}$/) }]);
    expect(trust.command).toBe(`kerncap validate ${cap} --trust=${trust.digest}`);
    // --build-only kept in the command to paste (nu12 #19: pasted without it where there is no GPU, it built, then E_NO_GPU)
    const b = cli(["validate", cap, "--build-only"]);
    expect(b.doc.error.details.trust.command).toBe(`kerncap validate ${cap} --build-only --trust=${trust.digest}`);
    // plain --trust is not enough: the folder read and the folder built could be two
    const t = cli(["validate", cap, "--trust"]);
    expect(t.code).toBe(2);
    expect(t.doc.error.message).toContain("plain --trust is not enough here: another user could swap the folder");
    chmodSync(root, 0o700);
  }, 60_000);

  test("a file or folder under src/ that the group or every user may write, or (as root) another user owns, makes the capture received, named (trial 20)", async () => {
    const root = tempDir("kerncap-attack-");
    const cap = join(root, "cap");
    const m = await makeCapture(cap);
    mkdirSync(join(cap, "src/inc"), { recursive: true, mode: 0o755 });
    writeFileSync(join(cap, "src/saxpy.cu"), "__global__ void k() {}\n", { mode: 0o644 });
    writeFileSync(join(cap, "src/inc/a.h"), "\n", { mode: 0o644 });
    expect(receivedReasons(cap, m)).toEqual([]);
    // the victim shares one source with the team; a member can now edit it in place (its owner unchanged)
    chmodSync(join(cap, "src/saxpy.cu"), 0o664);
    expect(receivedReasons(cap, m)).toEqual([
      `src/saxpy.cu can be written by every member of its group (gid ${statSync(join(cap, "src/saxpy.cu")).gid}, mode 664), who could change what the build runs`,
    ]);
    const ins = cli(["inspect", cap]);
    expect(ins.doc.received.received).toBe(true);
    expect(ins.doc.received.reasons.join("; ")).toContain("src/saxpy.cu can be written by every member of its group");
    chmodSync(join(cap, "src/saxpy.cu"), 0o644);
    // a folder deeper down that every user may write (a new file there is compiled by an #include)
    chmodSync(join(cap, "src/inc"), 0o777);
    expect(receivedReasons(cap, m)).toEqual(["src/inc can be written by every user (mode 777)"]);
    chmodSync(join(cap, "src/inc"), 0o755);
    chmodSync(join(cap, "src/inc/a.h"), 0o646);
    expect(receivedReasons(cap, m)).toEqual(["src/inc/a.h can be written by every user (mode 646)"]);
    chmodSync(join(cap, "src/inc/a.h"), 0o644);
    // a name with a control character is named escaped; a link's own mode (0777) is not counted, only its owner
    writeFileSync(join(cap, "src/e\x1b]0;x\x07.h"), "\n");
    chmodSync(join(cap, "src/e\x1b]0;x\x07.h"), 0o664);
    expect(receivedReasons(cap, m)[0]).toStartWith(`${JSON.stringify("src/e\x1b]0;x\x07.h")} can be written by every member of its group`);
    rmSync(join(cap, "src/e\x1b]0;x\x07.h"));
    symlinkSync("a.h", join(cap, "src/inc/l.h"));
    expect(receivedReasons(cap, m)).toEqual([]);
    if (ROOT) {
      lchownSync(join(cap, "src/inc/l.h"), NOBODY, NOBODY);
      expect(receivedReasons(cap, m)).toEqual([`src/inc/l.h belongs to another user (uid ${NOBODY}; you are uid 0)`]);
      rmSync(join(cap, "src/inc/l.h"));
      chownSync(join(cap, "src/inc/a.h"), NOBODY, NOBODY);
      expect(receivedReasons(cap, m)).toEqual([`src/inc/a.h belongs to another user (uid ${NOBODY}; you are uid 0)`]);
    }
  }, 60_000);

  test("a group-writable memory/, memory/after.bin or kernel/module.* (the reference a replay is judged against, the module it runs), or (as root) another user's after.bin, makes the capture received, named in inspect (trial 22)", async () => {
    const root = tempDir("kerncap-attack-");
    const cap = join(root, "cap");
    const m = await makeCapture(cap);
    expect(receivedReasons(cap, m)).toEqual([]);
    const could = "who could change what a replay runs or is judged against";
    // the team folder: memory/ group-writable (a member replaces after.bin with a file of the victim's name)
    chmodSync(join(cap, "memory"), 0o2775);
    expect(receivedReasons(cap, m)).toEqual([
      `memory can be written by every member of its group (gid ${statSync(join(cap, "memory")).gid}, mode 2775), ${could}`,
    ]);
    const ins = cli(["inspect", cap]);
    expect(ins.code).toBe(0);
    expect(ins.doc.received.received).toBe(true);
    expect(ins.doc.received.reasons.join("; ")).toContain("memory can be written by every member of its group");
    const text = Bun.spawnSync([process.execPath, MAIN, "inspect", cap], { env: { ...process.env }, stdout: "pipe", stderr: "pipe" }).stdout.toString();
    expect(text).not.toContain("your own files");
    expect(text).toContain("memory can be written by every member of its group");
    chmodSync(join(cap, "memory"), 0o755);
    // a file under it, edited in place (its owner unchanged)
    chmodSync(join(cap, m.memory.after), 0o664);
    expect(receivedReasons(cap, m)).toEqual([
      `${m.memory.after} can be written by every member of its group (gid ${statSync(join(cap, m.memory.after)).gid}, mode 664), ${could}`,
    ]);
    chmodSync(join(cap, m.memory.after), 0o644);
    // the module the replay runs
    expect(m.module.file).toStartWith("kernel/module.");
    chmodSync(join(cap, m.module.file), 0o666);
    expect(receivedReasons(cap, m)).toEqual([`${m.module.file} can be written by every user (mode 666)`]);
    chmodSync(join(cap, m.module.file), 0o644);
    chmodSync(join(cap, "kernel"), 0o775);
    expect(receivedReasons(cap, m)[0]).toStartWith("kernel can be written by every member of its group");
    chmodSync(join(cap, "kernel"), 0o755);
    expect(receivedReasons(cap, m)).toEqual([]);
    if (ROOT) {
      chownSync(join(cap, m.memory.after), NOBODY, NOBODY);
      expect(receivedReasons(cap, m)).toEqual([`${m.memory.after} belongs to another user (uid ${NOBODY}; you are uid 0)`]);
    }
  }, 60_000);

  test("build.sh writes the slice's compiler messages (build/slice-build.log) 0600: they may quote a private file an edit included (trial 20)", () => {
    const root = tempDir("kerncap-attack-");
    const d = join(root, "d");
    expect(cli(["demo", d]).code).toBe(0);
    // a stand-in nvcc that quotes "a file it read" on stderr and writes its -o output
    const nvcc = join(root, "nvcc");
    writeFileSync(nvcc, `#!/usr/bin/env bash\necho "secret.txt(1): error: TOPSECRET" >&2\nwhile [ $# -gt 0 ]; do [ "$1" = -o ] && : >"$2"; shift; done\n`, {
      mode: 0o755,
    });
    mkdirSync(join(d, "build"), { mode: 0o755 });
    writeFileSync(join(d, "build/slice-build.log"), "old\n", { mode: 0o644 }); // an earlier build's, world-readable
    const b = Bun.spawnSync(["bash", join(d, "build.sh")], { cwd: d, env: { ...process.env, NVCC: nvcc }, stdout: "pipe", stderr: "pipe" });
    expect(b.exitCode).toBe(0);
    const log = join(d, "build/slice-build.log");
    expect(readFileSync(log, "utf8")).toContain("TOPSECRET");
    expect(statSync(log).mode & 0o777).toBe(0o600);
  });

  test("a capture kerncap writes under umask 002 is not group-writable (so it is not received for that)", async () => {
    const old = process.umask(0o002);
    try {
      const root = tempDir("kerncap-attack-");
      const r = cli(["demo", join(root, "d")]);
      expect(r.code).toBe(0);
      for (const p of [".", "src", "kernel", "memory", ...readdirSync(join(root, "d/src")).map((f) => `src/${f}`)])
        if (existsSync(join(root, "d", p))) expect(statSync(join(root, "d", p)).mode & 0o022, p).toBe(0);
      const m = readManifest(join(root, "d"));
      // the demo records this machine's host (made here where there is a machine-id); nothing else (no group-writable folder)
      const host = notMadeHere(m);
      expect(receivedReasons(join(root, "d"), m)).toEqual(host ? [host] : []);
    } finally {
      process.umask(old);
    }
  }, 60_000);
});

describe("attack: another user's capture with a FIFO (or a link) under src/ that the build reads", () => {
  test("validate --trust=DIGEST refuses it (E_UNSAFE_PATH, naming it) before anything runs, instead of hanging in the compiler", async () => {
    const root = tempDir("kerncap-attack-");
    const cap = join(root, "cap");
    await makeCapture(cap);
    const m = JSON.parse(readFileSync(join(cap, "kerncap.json"), "utf8"));
    delete m.host; // received: validate asks, and the digest it shows covers build.sh, not src/
    writeFileSync(join(cap, "kerncap.json"), JSON.stringify(m));
    const marker = join(root, "BUILD-RAN");
    // kerncap's own build.sh (its digest covers no file under src/), and a compiler that does what nvcc does with
    // an #include of src/sub/x.h: open it and read (a FIFO blocks there for ever)
    writeFileSync(join(cap, "build.sh"), stockBuildSh(), { mode: 0o755 });
    const nvcc = join(root, "nvcc");
    writeFileSync(nvcc, `#!/bin/sh\ntouch ${JSON.stringify(marker)}\ncat src/sub/x.h >/dev/null\nexit 1\n`, { mode: 0o755 });
    mkdirSync(join(cap, "src/sub"), { recursive: true });
    writeFileSync(join(cap, "src/kernel.cu"), '#include "sub/x.h"\n');
    expect(Bun.spawnSync(["mkfifo", join(cap, "src/sub/x.h")]).exitCode).toBe(0);
    const validate = () => {
      const p = Bun.spawnSync([process.execPath, MAIN, "validate", cap, `--trust=${trustDigest(cap)}`, "--json"], {
        cwd: tempDir("kerncap-cwd-"),
        stdout: "pipe",
        stderr: "pipe",
        // the trust rules on a machine that cannot make the sandbox: the stand-in nvcc writes outside (a received build's sandbox: test/cpu/frontends/sandbox.test.ts)
        env: { ...process.env, NVCC: nvcc, KERNCAP_SANDBOX: "0" },
        timeout: 30_000, // a hang is the attack: it must not get that far
      });
      return { code: p.exitCode, doc: JSON.parse(p.stdout.toString() || "{}") };
    };
    let v = validate();
    expect(v.code).toBe(2);
    expect(v.doc.error.code).toBe("E_UNSAFE_PATH");
    expect(v.doc.error.message).toStartWith("src/sub/x.h in ");
    expect(v.doc.error.message).toContain("is a FIFO");
    expect(existsSync(marker)).toBe(false);
    // a link (out of the capture, or dangling) under src/: the same, before anything runs
    rmSync(join(cap, "src/sub/x.h"));
    for (const target of ["/etc/hostname", join(root, "missing")]) {
      rmSync(join(cap, "src/sub/x.h"), { force: true });
      symlinkSync(target, join(cap, "src/sub/x.h"));
      v = validate();
      expect(v.doc.error?.code).toBe("E_UNSAFE_PATH");
      expect(v.doc.error.message).toContain("is a symbolic link");
      expect(existsSync(marker)).toBe(false);
    }
    // a regular file there: the build runs (and fails in this test's build.sh)
    rmSync(join(cap, "src/sub/x.h"));
    writeFileSync(join(cap, "src/sub/x.h"), "// header\n");
    v = validate();
    expect(v.doc.error?.code).toBe("E_BUILD");
    expect(existsSync(marker)).toBe(true);
  }, 120_000);
});

describe("attack: another user drops a kerncap.json above the victim's captures", () => {
  test("in a sticky folder every user can write (/tmp): no capture below is nested; demo, inspect, unpack write and read there", async () => {
    const root = tempDir("kerncap-attack-");
    const tmp = join(root, "tmp");
    mkdirSync(tmp);
    chmodSync(tmp, 0o1777);
    const mine = join(tmp, "mine");
    await makeCapture(mine);
    copyFileSync(join(mine, "kerncap.json"), join(tmp, "kerncap.json")); // a valid manifest, in /tmp
    if (ROOT) chownSync(join(tmp, "kerncap.json"), NOBODY, NOBODY);
    expect(outerCapture(mine)).toBeUndefined();
    expect(() => readManifest(mine)).not.toThrow();
    expect(cli(["inspect", mine]).code).toBe(0);
    const d = cli(["demo", join(tmp, "demo")]);
    expect(d.code).toBe(0);
    expect(existsSync(join(tmp, "demo/kerncap.json"))).toBe(true);
    const z = join(root, "mine.zip");
    expect(cli(["pack", mine, "-o", z]).code).toBe(0);
    expect(cli(["unpack", z, "-o", join(tmp, "got")]).code).toBe(0);
    // the MCP agent's attack still fails there: a kerncap.json under the user's own capture
    mkdirSync(join(mine, "src/x"), { recursive: true });
    copyFileSync(join(mine, "kerncap.json"), join(mine, "src/x/kerncap.json"));
    expect(outerCapture(join(mine, "src/x"))).toBe(mine);
    expect(cli(["inspect", join(mine, "src/x")]).doc.error.code).toBe("E_NESTED_CAPTURE");
  }, 120_000);

  test("in a folder every user can write (not sticky): the walk stops there", async () => {
    const root = tempDir("kerncap-attack-");
    const open = join(root, "open");
    mkdirSync(open);
    chmodSync(open, 0o777);
    await makeCapture(join(open, "c"));
    copyFileSync(join(open, "c/kerncap.json"), join(open, "kerncap.json"));
    expect(outerCapture(join(open, "c"))).toBeUndefined();
    expect(() => assertNotNested(join(open, "new"))).not.toThrow();
    // a capture of the user's own in a folder of the user's own still holds what lies in it
    chmodSync(open, 0o755);
    expect(outerCapture(join(open, "c"))).toBe(open);
  }, 60_000);

  test.skipIf(!ROOT)(
    "another user's kerncap.json, or one in another user's folder, holds none of the victim's captures",
    async () => {
      const root = tempDir("kerncap-attack-");
      chmodSync(root, 0o755);
      const team = join(root, "team");
      mkdirSync(team, { mode: 0o755 });
      await makeCapture(join(team, "c"));
      copyFileSync(join(team, "c/kerncap.json"), join(team, "kerncap.json"));
      expect(outerCapture(join(team, "c"))).toBe(team); // the user's own kerncap.json: a capture holds it
      chownSync(join(team, "kerncap.json"), NOBODY, NOBODY); // another user's file in a folder of ours
      expect(outerCapture(join(team, "c"))).toBeUndefined();
      chownSync(join(team, "kerncap.json"), 0, 0);
      chownSync(team, NOBODY, NOBODY); // the folder another user's: their files, not the user's capture
      expect(outerCapture(join(team, "c"))).toBeUndefined();
      expect(cli(["inspect", join(team, "c")]).code).toBe(0);
    },
    60_000,
  );
});

describe("attack: a results folder another user made (check --resume)", () => {
  const done = (t: { id: string; path: string }): Outcome => fakeOutcome(t);
  function workers() {
    const calls: string[] = [];
    const open: OpenRunner = () => ({ run: async (t) => (calls.push(t.id), done(t)), kill() {}, close: async () => {} });
    return { calls, open: () => open };
  }
  const options = checkOptions;

  test("a results folder every user can write, holding a forged ok record: refused before any capture, E_UNSAFE_PATH naming it", async () => {
    const root = tempDir("kerncap-attack-");
    await makeCapture(join(root, "corpus/c1"));
    // the attacker's forged record: what a real check of c1 writes (made in a folder of the test's own)
    const real = join(root, "real");
    expect((await runCheck(options([join(root, "corpus")], real, workers().open))).exitCode).toBe(0);
    const shared = join(root, "shared");
    mkdirSync(shared);
    chmodSync(shared, 0o777);
    writeFileSync(join(shared, "results.jsonl"), readFileSync(join(real, "results.jsonl")));
    const w = workers();
    const e = await refusal(() => runCheck(options([join(root, "corpus")], shared, w.open, { resume: true })));
    expect(e.code).toBe("E_UNSAFE_PATH");
    expect(e.message).toContain(`${shared} (the results folder) can be written by every user (mode 777)`);
    expect(e.hint).toContain("--results DIR");
    expect(w.calls).toEqual([]);
    // closed (chmod go-w), the folder is the user's again; the results file written by another (group-writable) is not
    chmodSync(shared, 0o755);
    chmodSync(join(shared, "results.jsonl"), 0o664);
    expect((await refusal(() => runCheck(options([join(root, "corpus")], shared, w.open, { resume: true })))).message).toContain(
      "results.jsonl (the results file) can be written by every member of its group",
    );
    chmodSync(join(shared, "results.jsonl"), 0o644);
    writeFileSync(join(shared, "baseline.json"), "{}");
    chmodSync(join(shared, "baseline.json"), 0o666);
    expect((await refusal(() => runCheck(options([join(root, "corpus")], shared, w.open, { resume: true })))).message).toContain(
      "baseline.json (the results folder's baseline) can be written by every user",
    );
    expect(w.calls).toEqual([]);
  }, 60_000);

  test("the CLI: exit 2 with the hint, nothing checked; a folder check makes under umask 002 is not refused the next time", async () => {
    const root = tempDir("kerncap-attack-");
    await makeCapture(join(root, "corpus/c1"));
    const shared = join(root, "shared");
    mkdirSync(shared);
    chmodSync(shared, 0o777);
    const r = cli(["check", join(root, "corpus"), "--results", shared, "--resume"]);
    expect(r.code).toBe(2);
    expect(r.doc.error.code).toBe("E_UNSAFE_PATH");
    expect(existsSync(join(shared, "results.jsonl"))).toBe(false);
    const old = process.umask(0o002);
    try {
      const mine = join(root, "mine");
      await runCheck(options([join(root, "corpus")], mine, workers().open));
      expect(statSync(mine).mode & 0o022).toBe(0);
      expect((await runCheck(options([join(root, "corpus")], mine, workers().open, { resume: true }))).exitCode).toBe(0);
    } finally {
      process.umask(old);
    }
  }, 120_000);

  test("a results folder unpacked from an archive (its root named kerncap-check, check's default) is refused: its records are the sender's", async () => {
    const root = tempDir("kerncap-attack-");
    await makeCapture(join(root, "corpus/c1"));
    const unpacked = join(root, "kerncap-check");
    mkdirSync(unpacked);
    writeFileSync(join(unpacked, "kerncap-received.json"), "{}");
    const w = workers();
    expect((await refusal(() => runCheck(options([join(root, "corpus")], unpacked, w.open, { resume: true })))).message).toContain(
      "was unpacked from an archive (kerncap-received.json): its records and baseline are the sender's",
    );
    expect(w.calls).toEqual([]);
  }, 60_000);

  test.skipIf(!ROOT)(
    "a results folder named by a link another user made (./kerncap-check in a sticky /tmp, pointing at another results folder of yours) is refused",
    async () => {
      const root = tempDir("kerncap-attack-");
      await makeCapture(join(root, "corpus/c1"));
      const mine = join(root, "mine");
      mkdirSync(mine);
      const link = join(root, "kerncap-check");
      symlinkSync(mine, link);
      lchownSync(link, NOBODY, NOBODY);
      const w = workers();
      expect((await refusal(() => runCheck(options([join(root, "corpus")], link, w.open)))).message).toContain(
        `${link} (the results folder) is a symbolic link another user made (uid ${NOBODY})`,
      );
      expect(readdirSync(mine)).toEqual([]);
    },
    60_000,
  );

  test.skipIf(!ROOT)(
    "a results folder another user owns (mode 0755) is refused too",
    async () => {
      const root = tempDir("kerncap-attack-");
      await makeCapture(join(root, "corpus/c1"));
      const theirs = join(root, "theirs");
      mkdirSync(theirs, { mode: 0o755 });
      chownSync(theirs, NOBODY, NOBODY);
      const w = workers();
      expect((await refusal(() => runCheck(options([join(root, "corpus")], theirs, w.open)))).message).toContain(
        `${theirs} (the results folder) belongs to another user (uid ${NOBODY}`,
      );
      expect(w.calls).toEqual([]);
    },
    60_000,
  );
});

describe("attack: check --merge of another user's results file or baseline (trial 18 F1: a forged shard-9/results.jsonl turned a failing capture ok)", () => {
  const done = (t: { id: string; path: string }): Outcome => fakeOutcome(t);
  const open: OpenRunner = () => ({ run: async (t) => done(t), kill() {}, close: async () => {} });
  const options = (paths: string[], results: string): CheckOptions => checkOptions(paths, results, () => open);

  test("a results file or --baseline that everyone can write, or (as root) another user owns: E_UNSAFE_PATH (exit 2) naming it, as eval --merge refuses its files; nothing merged", async () => {
    const root = tempDir("kerncap-attack-");
    await makeCapture(join(root, "corpus/c1"));
    const mine = join(root, "shard-0");
    await runCheck(options([join(root, "corpus")], mine));
    const own = join(mine, "results.jsonl");
    expect(mergeResults([own], { slowerPct: 10 }).exitCode).toBe(0); // the user's own file
    // the attacker's file: a copy of a real record, in a folder of its own, mode 0666
    mkdirSync(join(root, "shard-9"));
    const forged = join(root, "shard-9", "results.jsonl");
    copyFileSync(own, forged);
    chmodSync(forged, 0o666);
    const junit = join(root, "all.xml");
    const e = await refusal(async () => mergeResults([forged], { slowerPct: 10, junit }));
    expect([e.code, e.exitCode]).toEqual(["E_UNSAFE_PATH", 2]);
    expect(e.message).toBe(
      `${forged} (a results file of --merge) can be written by others (mode 666): another user could have written its records, which check would take as its own`,
    );
    expect(existsSync(junit)).toBe(false);
    const r = cli(["check", "--merge", forged]);
    expect([r.code, r.doc.error?.code]).toEqual([2, "E_UNSAFE_PATH"]);
    // the --baseline every record is timed against again, and a --write-baseline read as the base
    const theirs = join(root, "theirs.json");
    copyFileSync(join(mine, "baseline.json"), theirs);
    chmodSync(theirs, 0o666);
    expect((await refusal(async () => mergeResults([own], { slowerPct: 10, baseline: theirs }))).message).toStartWith(
      `${theirs} (a --baseline file of --merge) can be written by others (mode 666): another user could have written its baseline`,
    );
    expect((await refusal(async () => mergeResults([own], { slowerPct: 10, writeBaseline: theirs }))).message).toStartWith(
      `${theirs} (a --write-baseline file of --merge) can be written by others (mode 666)`,
    );
    if (ROOT) {
      // closed to others, but another user's
      for (const f of [forged, theirs]) {
        chmodSync(f, 0o644);
        chownSync(f, NOBODY, NOBODY);
      }
      expect((await refusal(async () => mergeResults([own, forged], { slowerPct: 10 }))).message).toContain(
        `${forged} (a results file of --merge) belongs to another user (uid ${NOBODY}`,
      );
      expect((await refusal(async () => mergeResults([own], { slowerPct: 10, baseline: theirs }))).message).toContain(
        `${theirs} (a --baseline file of --merge) belongs to another user (uid ${NOBODY}`,
      );
    }
  }, 60_000);
});

describe("attack: the state folder inside a folder another user can write", () => {
  /** Whether trustOwnBuild recorded `cap` with XDG_STATE_HOME=`state`, and whether the trust file is there. */
  async function recordsIn(state: string): Promise<boolean> {
    const cap = join(tempDir("kerncap-attack-"), "cap");
    const m = await makeCapture(cap);
    writeFileSync(join(cap, "build.sh"), "#!/usr/bin/env bash\nexit 1\n", { mode: 0o755 });
    const saved = process.env.XDG_STATE_HOME;
    process.env.XDG_STATE_HOME = state;
    try {
      trustOwnBuild(cap, m);
      return trustRecorded(cap, m) || existsSync(join(state, "kerncap/trusted-builds.json"));
    } finally {
      process.env.XDG_STATE_HOME = saved;
    }
  }

  test("the trust records drop folders that are gone or are other folders now (trial 8: 1410 of 1865 records named removed folders); a HOME that does not exist is not made", async () => {
    const state = tempDir("kerncap-state-");
    const saved = { xdg: process.env.XDG_STATE_HOME, home: process.env.HOME };
    process.env.XDG_STATE_HOME = state;
    try {
      const caps: { cap: string; m: Awaited<ReturnType<typeof makeCapture>> }[] = [];
      for (let i = 0; i < 3; i++) {
        const cap = join(tempDir("kerncap-attack-"), "cap");
        const m = await makeCapture(cap);
        writeFileSync(join(cap, "build.sh"), "#!/usr/bin/env bash\nexit 1\n", { mode: 0o755 });
        trustOwnBuild(cap, m);
        caps.push({ cap, m });
      }
      const file = join(state, "kerncap/trusted-builds.json");
      const dirs = () => (JSON.parse(readFileSync(file, "utf8")).builds as { dir: string }[]).map((b) => b.dir);
      expect(dirs()).toHaveLength(3);
      rmSync(caps[0]!.cap, { recursive: true, force: true }); // gone
      rmSync(caps[1]!.cap, { recursive: true, force: true });
      mkdirSync(caps[1]!.cap); // another folder at the path
      const next = join(tempDir("kerncap-attack-"), "cap");
      const m = await makeCapture(next);
      writeFileSync(join(next, "build.sh"), "#!/usr/bin/env bash\nexit 1\n", { mode: 0o755 });
      trustOwnBuild(next, m);
      expect(dirs()).toEqual([realpathSync(caps[2]!.cap), realpathSync(next)]);
      expect(trustRecorded(caps[2]!.cap, caps[2]!.m)).toBe(true);
      // a record file another may write (group write bits: what an ACL granting another user write access shows as its
      // mask): none of its records is taken (adversary 52: that user wrote a record that ran their build.sh)
      chmodSync(file, 0o660);
      expect(trustRecorded(caps[2]!.cap, caps[2]!.m)).toBe(false);
      chmodSync(file, 0o600);
      expect(trustRecorded(caps[2]!.cap, caps[2]!.m)).toBe(true);
      // no XDG_STATE_HOME and a HOME that does not exist: no state folder, nothing made
      delete process.env.XDG_STATE_HOME;
      const nohome = join(tempDir("kerncap-attack-"), "nonexistent");
      process.env.HOME = nohome;
      expect(stateDir()).toBeUndefined();
      expect(stateFolderRisk()).toContain(`your home folder ${nohome} does not exist`);
      expect(existsSync(nohome)).toBe(false);
    } finally {
      for (const [k, v] of [
        ["XDG_STATE_HOME", saved.xdg],
        ["HOME", saved.home],
      ] as const)
        if (v === undefined) delete process.env[k];
        else process.env[k] = v;
    }
  }, 60_000);

  test("XDG_STATE_HOME in a folder every user can write (not sticky): no trust record is kept there", async () => {
    const open = join(tempDir("kerncap-attack-"), "open");
    mkdirSync(open);
    chmodSync(open, 0o777);
    expect(await recordsIn(open)).toBe(false);
    expect(existsSync(join(open, "kerncap"))).toBe(false); // not even made there
    // a folder of the user's own: kept
    const own = tempDir("kerncap-state-");
    expect(await recordsIn(own)).toBe(true);
    // under a sticky folder every user can write, in a folder of the user's own: kept (the cache folder's rule)
    const sticky = join(tempDir("kerncap-attack-"), "tmp");
    mkdirSync(sticky);
    chmodSync(sticky, 0o1777);
    mkdirSync(join(sticky, "me"), { mode: 0o700 });
    expect(await recordsIn(join(sticky, "me"))).toBe(true);
  }, 60_000);

  test.skipIf(!ROOT)(
    "XDG_STATE_HOME in another user's folder: no trust record is kept there",
    async () => {
      const theirs = join(tempDir("kerncap-attack-"), "theirs");
      mkdirSync(theirs, { mode: 0o755 });
      chownSync(theirs, NOBODY, NOBODY);
      expect(await recordsIn(theirs)).toBe(false);
      expect(existsSync(join(theirs, "kerncap"))).toBe(false);
    },
    60_000,
  );

  test("validate --trust warns that the trust is not remembered, and why", async () => {
    const open = join(tempDir("kerncap-attack-"), "open");
    mkdirSync(open);
    chmodSync(open, 0o777);
    const cap = join(tempDir("kerncap-attack-"), "cap");
    await makeCapture(cap);
    const m = JSON.parse(readFileSync(join(cap, "kerncap.json"), "utf8"));
    delete m.host; // received: validate asks
    writeFileSync(join(cap, "kerncap.json"), JSON.stringify(m));
    writeFileSync(join(cap, "build.sh"), "#!/usr/bin/env bash\necho no compiler >&2\nexit 1\n", { mode: 0o755 });
    const r = cli(["validate", cap, `--trust=${trustDigest(cap)}`], { XDG_STATE_HOME: open });
    expect(r.err).toContain(`the state folder is not used (${open} is writable by other users (mode 0777))`);
    expect(existsSync(join(open, "kerncap"))).toBe(false);
  }, 60_000);
});

describe("attack: another user swaps a folder kerncap made in a folder they can write (a TMPDIR, run's --out parent: others may write, not sticky)", () => {
  /** `fn` with TMPDIR set to `dir` (os.tmpdir() reads it at each call). */
  const withTmpdir = <T>(dir: string, fn: () => T): T => {
    const saved = process.env.TMPDIR;
    process.env.TMPDIR = dir;
    try {
      return fn();
    } finally {
      if (saved === undefined) delete process.env.TMPDIR;
      else process.env.TMPDIR = saved;
    }
  };
  const folders = () => {
    const root = tempDir("kerncap-attack-");
    const made = (name: string, mode: number) => {
      const p = join(root, name);
      mkdirSync(p);
      chmodSync(p, mode);
      return p;
    };
    return { root, open: made("open", 0o777), team: teamFolder(made("team", 0o2770)), sticky: made("sticky", 0o1777), mine: made("mine", 0o700) };
  };
  /**
   * `p` (2770) given a group that is not the user's private group (src/user-group.ts: a 0775 folder
   * of a user-private group is the user's alone): root gives it a group no one is in; another user
   * one of its other groups, or none (undefined: the team cases are left out).
   */
  const teamFolder = (p: string): string | undefined => {
    const gid = process.getuid?.() === 0 ? 4242 : (process.getgroups?.() ?? []).find((g) => g !== process.getgid?.() && !isPrivateGroup(g));
    if (gid === undefined && isPrivateGroup(statSync(p).gid)) return undefined;
    if (gid !== undefined) chownSync(p, -1, gid);
    chmodSync(p, 0o2770);
    return p;
  };

  test("under umask 000 (or 002 in a team folder) what kerncap writes has no group or other write bit: an export, a demo, build outputs, eval's copies", () => {
    const root = tempDir();
    const sh = (cmd: string) =>
      Bun.spawnSync(["bash", "-c", `umask 000; ${cmd}`], {
        cwd: root,
        stdout: "pipe",
        stderr: "pipe",
        env: { ...process.env, K: `${process.execPath} ${MAIN}` },
      });
    expect(sh("$K demo cap >/dev/null 2>&1; $K export cap -o out >/dev/null 2>&1; echo x >edit.h; $K eval cap edit.h >/dev/null 2>&1; true").exitCode).toBe(0);
    const writable: string[] = [];
    const walk = (d: string) => {
      for (const n of readdirSync(d)) {
        const p = join(d, n);
        const st = lstatSync(p);
        if (st.isSymbolicLink()) continue;
        if (st.mode & 0o022) writable.push(`${p} ${(st.mode & 0o777).toString(8)}`);
        if (st.isDirectory()) walk(p);
      }
    };
    for (const d of ["cap", "out"]) walk(join(root, d));
    expect(existsSync(join(root, "out/capture.h"))).toBe(true);
    expect(existsSync(join(root, "cap/build"))).toBe(true);
    expect(writable).toEqual([]);
  }, 120_000);

  test("every build command gets a TMPDIR of its own (nvcc's tmpxft_<pid>_… names in a shared /tmp: another user planted links and files there), removed after", async () => {
    const r = await runBuildCommand(["bash", "-c", 'echo "$TMPDIR"; stat -c "%a %u" "$TMPDIR"; : >"$TMPDIR/tmpxft_1"'], process.cwd(), { ...process.env });
    const [dir, mode] = r.out.trim().split("\n");
    expect(r.code).toBe(0);
    expect(dir).not.toBe(process.env.TMPDIR ?? "/tmp");
    expect(dir!.startsWith(join(tmpdir(), "kerncap-tmp-"))).toBe(true);
    expect(mode).toBe(`700 ${process.geteuid?.()}`);
    expect(existsSync(dir!)).toBe(false);
    // ncu's run keeps the caller's (its lock file is shared with other profilers)
    const shared = await runBuildCommand(["bash", "-c", 'echo "$TMPDIR"'], process.cwd(), { ...process.env, TMPDIR: "/tmp" }, undefined, { sharedTmp: true });
    expect(shared.out.trim()).toBe("/tmp");
  });

  test("a build that writes messages without end is stopped past 32 MiB and failed, its first 32 MiB kept (a 200 KB source made 20 GB of warnings: adversary 63)", async () => {
    const t0 = performance.now();
    // 4 GiB of a warning line on stderr, then a marker the build never reaches; stdout the same, alone
    const r = await runBuildCommand(["bash", "-c", 'yes "k.cu(1): warning: expression has no effect" | head -c 4G >&2; echo finished'], process.cwd(), {
      ...process.env,
    });
    expect(performance.now() - t0).toBeLessThan(20_000);
    expect(r.code).not.toBe(0);
    expect(r.out).toBe("");
    expect(r.err.startsWith("k.cu(1): warning: expression has no effect\n")).toBe(true);
    expect(r.err).toContain("kerncap: the build wrote more than 32 MiB to its stderr: stopped");
    expect(r.err.length).toBeLessThan(BUILD_OUTPUT_MAX + 1024);
    expect(r.err.length).toBeGreaterThan(BUILD_OUTPUT_MAX - 1024);
    const o = await runBuildCommand(["bash", "-c", "head -c 4G /dev/zero"], process.cwd(), { ...process.env });
    expect(o.code).not.toBe(0);
    expect(o.out.length).toBe(BUILD_OUTPUT_MAX);
    expect(o.err).toContain("more than 32 MiB to its stdout");
    // within the bound: all of it, the build's own status
    const ok = await runBuildCommand(["bash", "-c", "head -c 1M /dev/zero | tr '\\0' x; echo >&2 fine"], process.cwd(), { ...process.env });
    expect([ok.code, ok.out.length, ok.err]).toEqual([0, 1 << 20, "fine\n"]);
  }, 60_000);

  test("privateTempFolder: a TMPDIR others can write and not sticky (0777, a 2770 team folder) is refused (E_TMPDIR), nothing made there; a sticky or private one is used, the folder 0700 and the user's", async () => {
    const f = folders();
    for (const bad of [f.open, f.team].filter((x) => x !== undefined)) {
      const e = await refusal(() => privateTempFolder("kerncap-run-", bad));
      expect(e.code).toBe("E_TMPDIR");
      expect(e.message).toContain(`TMPDIR ${bad}`);
      expect(e.message).toContain("writable by other users");
      expect(e.hint).toContain("TMPDIR");
      expect(readdirSync(bad)).toEqual([]);
    }
    if (f.sticky && process.getuid?.() === 0) {
      // another user's folder at the name the check once judged (kerncap-run-x): no refusal of TMPDIR for it (adversary 69)
      mkdirSync(join(f.sticky, "kerncap-run-x"));
      chownSync(join(f.sticky, "kerncap-run-x"), 65534, 65534);
    }
    for (const good of [f.sticky, f.mine]) {
      const p = privateTempFolder("kerncap-run-", good);
      const st = statSync(p);
      expect(p.startsWith(join(good, "kerncap-run-"))).toBe(true);
      expect(st.isDirectory() && st.uid === process.geteuid?.() && (st.mode & 0o7777) === 0o700).toBe(true);
    }
  });

  test("privateTempFolder: a TMPDIR of this user's whose path holds $ or a backquote is refused (E_TMPDIR), nothing made there: nvcc pastes its temporary files' paths into shell lines (adversary 49)", async () => {
    for (const name of ["t$(touch x)", "t`touch x`", 't"q']) {
      const bad = join(tempDir(), name);
      mkdirSync(bad, { mode: 0o700 });
      chmodSync(bad, 0o700);
      const e = await refusal(() => privateTempFolder("kerncap-tmp-", bad));
      expect(e.code).toBe("E_TMPDIR");
      expect(e.message).toContain("which a compiler's shell steps would read as code");
      expect(readdirSync(bad)).toEqual([]);
    }
    expect(privateTempFolder("kerncap-tmp-", join(tempDir()))).toContain("kerncap-tmp-"); // a plain one is used
  });

  test("a private folder a killed kerncap left (an MCP server killed during evaluate): the next one of that prefix removes the user's own 0700 folders of gone processes; a live process's, a link, one open to others are kept", async () => {
    const base = tempDir();
    const dead = await deadPid();
    const left = join(base, `kerncap-evaluate-${dead}-a1b2c3`);
    mkdirSync(join(left, "tree/src"), { recursive: true, mode: 0o700 });
    chmodSync(left, 0o700);
    writeFileSync(join(left, "tree/src/k.cu"), "// a candidate\n");
    const live = join(base, `kerncap-evaluate-${process.pid}-d4e5f6`);
    mkdirSync(live, { mode: 0o700 });
    const open = join(base, `kerncap-evaluate-${dead}-open00`);
    mkdirSync(open, { mode: 0o755 });
    chmodSync(open, 0o755);
    const target = join(base, "elsewhere");
    mkdirSync(target, { mode: 0o700 });
    symlinkSync(target, join(base, `kerncap-evaluate-${dead}-link00`));
    const other = join(base, `kerncap-eval-${dead}-x00000`); // another prefix: its own sweep
    mkdirSync(other, { mode: 0o700 });
    // a folder of a process in another pid namespace (a container sharing TMPDIR: adversary 75) is left, whatever its pid
    // means here; one of a process gone from this namespace is removed
    const ns = pidNamespace();
    const foreign = join(base, `kerncap-evaluate-${dead}-n${ns}9-f00000`);
    mkdirSync(foreign, { mode: 0o700 });
    const goneHere = join(base, `kerncap-evaluate-${dead}-n${ns}-g00000`);
    mkdirSync(goneHere, { mode: 0o700 });
    const made = privateTempFolder("kerncap-evaluate-", base);
    expect(made.startsWith(join(base, `kerncap-evaluate-${process.pid}-n${ns}-`))).toBe(true);
    expect(existsSync(goneHere)).toBe(false);
    expect(made.startsWith(join(base, `kerncap-evaluate-${process.pid}-`))).toBe(true);
    expect(existsSync(left)).toBe(false);
    expect(readdirSync(base).sort()).toEqual(
      [
        "elsewhere",
        `kerncap-eval-${dead}-x00000`,
        `kerncap-evaluate-${dead}-link00`,
        `kerncap-evaluate-${dead}-open00`,
        `kerncap-evaluate-${process.pid}-d4e5f6`,
        `kerncap-evaluate-${dead}-n${ns}9-f00000`,
        made.slice(base.length + 1),
      ].sort(),
    );
    expect(existsSync(target)).toBe(true);
  });

  test("a build's private folder (stageTrustedBuild, the folder build.sh runs from) is not made in a TMPDIR others can swap it in: E_TMPDIR before anything is copied; a sticky TMPDIR is used", async () => {
    const f = folders();
    const cap = join(f.root, "cap");
    await makeCapture(cap);
    writeFileSync(join(cap, "build.sh"), stockBuildSh());
    const e = await refusal(() => withTmpdir(f.open, () => stageTrustedBuild(cap)));
    expect(e.code).toBe("E_TMPDIR");
    expect(readdirSync(f.open)).toEqual([]);
    const staged = withTmpdir(f.sticky, () => stageTrustedBuild(cap));
    expect(staged?.folder.startsWith(join(f.sticky, "kerncap-run-"))).toBe(true);
    staged?.dispose();
  });

  test("kerncap run --out in a folder others can write and not sticky: refused before the application runs (E_UNSAFE_PATH, exit 2, the folder and its mode named); a sticky parent passes", () => {
    const f = folders();
    const marker = join(f.root, "APP-RAN");
    for (const [parent, mode] of [[f.open, "0777"], ...(f.team ? [[f.team, "2770"] as const] : [])] as const) {
      // the app's argv last (cli() appends --json, which would be the app's): the error read from stderr
      const r = cli(["run", "--kernel", "k", "--out", join(parent, "cap"), "--", "/bin/sh", "-c", `touch ${marker}`]);
      expect(r.code, r.err).toBe(2);
      expect(r.err).toContain(`${parent} is writable by`);
      expect(r.err).toContain(`mode ${mode}) and not sticky`);
      expect(r.err).toContain("only you can write");
      expect(existsSync(marker)).toBe(false);
      expect(readdirSync(parent)).toEqual([]);
    }
    // a folder above the parent counts too (the real path's chain)
    mkdirSync(join(f.open, "sub"));
    expect(sharedParentRisk(join(f.open, "sub", "cap"))).toContain(`${f.open} is writable by other users`);
    // a link in such a folder can be re-pointed: the path as given counts, not only where it leads
    symlinkSync(f.mine, join(f.open, "to-mine"));
    expect(sharedParentRisk(join(f.open, "to-mine", "cap"))).toContain(`${f.open} is writable by other users`);
    expect(sharedParentRisk(join(f.sticky, "cap"))).toBeUndefined();
    expect(sharedParentRisk(join(f.mine, "cap"))).toBeUndefined();
  });

  test("a sticky folder that belongs to another user (not root) is no safe parent for run -o and export -o: its owner may rename what others put in it (trial 14 F5: the export swapped before make)", async () => {
    const f = folders();
    const me = process.geteuid?.() ?? 0;
    // the sticky folder as another user's: chowned where this test is root, else judged for another uid
    const other = me === 0 ? 4243 : me + 4242;
    if (me === 0) chownSync(f.sticky, other, -1);
    const asMe = me === 0 ? 0 : other; // the uid the folder is foreign to
    const risk = sharedParentRisk(join(f.sticky, "cap"), asMe);
    expect(risk).toBe(`${f.sticky} is sticky (mode 1777) but belongs to another user (uid ${me === 0 ? other : me}), who may rename what others put in it`);
    // the verb refuses it before writing anything there
    if (me === 0) {
      const cap = join(f.root, "cap");
      await makeCapture(cap);
      const r = cli(["export", cap, "-o", join(f.sticky, "exp")]);
      expect(r.code, r.err).toBe(2);
      expect(r.err).toContain("belongs to another user");
      expect(readdirSync(f.sticky)).toEqual([]);
    }
  });

  test("demo: trust is recorded only for the folder kerncap wrote and holds open, not for another folder swapped in at DIR's name", async () => {
    const f = folders();
    const theirs = join(f.root, "theirs");
    await makeCapture(theirs);
    writeFileSync(join(theirs, "build.sh"), "#!/bin/bash\necho pwned\n");
    const m = readManifest(theirs);
    const held = makePrivateTemp(tempFor(join(f.root, "demo"))); // the folder demo wrote, held open; DIR names another one
    try {
      trustOwnBuild(theirs, m, held);
    } finally {
      held.dispose();
    }
    expect(trustRecorded(theirs, m)).toBe(false);
    trustOwnBuild(theirs, m); // the same call without a held folder records it: the check above is what refused
    expect(trustRecorded(theirs, m)).toBe(true);
  });
});
