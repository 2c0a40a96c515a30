/** src/format/received.ts markReceived: what unpack leaves of a received capture's identity. */
import { expect, test } from "bun:test";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { checksumsChecked, hostIdentity, markReceived, receivedBecause } from "../../../src/format/received.ts";
import { readManifest } from "../../../src/format/capture-dir.ts";
import { makeCapture, tempDir } from "../fixtures.ts";

test("an unpacked manifest carries no machine id (a hand-made archive naming this machine's: a copy without the mark stays received) (trial 19)", async () => {
  const dir = join(tempDir(), "cap");
  await makeCapture(dir);
  const p = join(dir, "kerncap.json");
  const m = JSON.parse(readFileSync(p, "utf8"));
  m.host = hostIdentity(); // the sender wrote this machine's id by hand
  writeFileSync(p, JSON.stringify(m));
  markReceived(dir, "sent.zip");
  expect(JSON.parse(readFileSync(p, "utf8")).host).toMatchObject({ name: m.host.name, machineId: null });
  // the folder copied without the mark: still received (no machine id is this machine's)
  const copy = join(tempDir(), "copy");
  await makeCapture(copy);
  writeFileSync(join(copy, "kerncap.json"), readFileSync(p));
  expect(receivedBecause(copy, readManifest(copy))).toBeDefined();
});

test("a capture another user of this machine made (its manifest's host.uid) is received, its copy too (cp -r makes every file yours); one you made is not; an older manifest without uid is as before (trial 11)", async () => {
  const dir = join(tempDir(), "cap");
  await makeCapture(dir);
  const p = join(dir, "kerncap.json");
  const mine = JSON.parse(readFileSync(p, "utf8"));
  expect(mine.host.uid).toBe(process.geteuid!()); // the capture records who made it
  expect(receivedBecause(dir, readManifest(dir))).toBeUndefined();
  writeFileSync(p, JSON.stringify({ ...mine, host: { ...mine.host, uid: process.geteuid!() + 4242 } }));
  expect(receivedBecause(dir, readManifest(dir))).toBe(
    `its manifest says another user of this machine (uid ${process.geteuid!() + 4242}) made it: a copy of their capture`,
  );
  const { uid: _, ...older } = mine.host;
  writeFileSync(p, JSON.stringify({ ...mine, host: older }));
  expect(receivedBecause(dir, readManifest(dir))).toBeUndefined();
});

test("withoutOthersWrite: a project's 0664/0777 sources copied into a capture lose their group and other write bits (else the capture counts as received), links untouched (trial 20)", async () => {
  const { chmodSync, mkdirSync, statSync, symlinkSync, lstatSync } = await import("node:fs");
  const { withoutOthersWrite } = await import("../../../src/format/paths.ts");
  const dir = join(tempDir(), "cap");
  await makeCapture(dir);
  mkdirSync(join(dir, "src/inc"), { recursive: true });
  writeFileSync(join(dir, "src/inc/a.h"), "\n");
  writeFileSync(join(dir, "src/k.cu"), "\n");
  symlinkSync("k.cu", join(dir, "src/l.cu"));
  chmodSync(join(dir, "src"), 0o775);
  chmodSync(join(dir, "src/inc"), 0o777);
  chmodSync(join(dir, "src/inc/a.h"), 0o666);
  chmodSync(join(dir, "src/k.cu"), 0o775);
  expect(receivedBecause(dir, readManifest(dir))).toBeDefined();
  withoutOthersWrite(join(dir, "src"));
  expect([statSync(join(dir, "src")).mode & 0o777, statSync(join(dir, "src/inc")).mode & 0o777, statSync(join(dir, "src/inc/a.h")).mode & 0o777]).toEqual([
    0o755, 0o755, 0o644,
  ]);
  expect(statSync(join(dir, "src/k.cu")).mode & 0o777).toBe(0o755);
  expect(lstatSync(join(dir, "src/l.cu")).isSymbolicLink()).toBe(true);
  expect(receivedBecause(dir, readManifest(dir))).toBeUndefined();
});

test("--no-verify is honoured for the user's own capture only: a received one (a group-writable memory/, an unpacked one) has its checksums checked anyway (trial 22)", async () => {
  const { chmodSync } = await import("node:fs");
  const dir = join(tempDir(), "cap");
  await makeCapture(dir);
  const m = readManifest(dir);
  expect(checksumsChecked(dir, m, false)).toBe(false);
  expect(checksumsChecked(dir, m, true)).toBe(true);
  chmodSync(join(dir, "memory"), 0o775); // a team member may replace memory/after.bin, the reference the replay judges against
  expect(checksumsChecked(dir, m, false)).toBe(true);
  chmodSync(join(dir, "memory"), 0o755);
  expect(checksumsChecked(dir, m, false)).toBe(false);
  markReceived(dir, "sent.zip");
  expect(checksumsChecked(dir, readManifest(dir), false)).toBe(true);
});

test("KERNCAP_RECEIVED=1: a capture made here by this user counts as received, said first; validate then asks --trust (a CI job over a pull request's checkout: nu13 #5)", async () => {
  const { writeDemo } = await import("../../../src/capture/demo.ts");
  const root = tempDir();
  const { dir } = writeDemo(join(root, "cap"), false);
  const m = readManifest(dir);
  const saved = process.env.KERNCAP_RECEIVED;
  try {
    delete process.env.KERNCAP_RECEIVED;
    expect(receivedBecause(dir, m)).toBeUndefined();
    process.env.KERNCAP_RECEIVED = "1";
    expect(receivedBecause(dir, m)).toBe("KERNCAP_RECEIVED=1 is set: every capture counts as received");
    // the words a CI file writes turn it on too (adversary 31: `KERNCAP_RECEIVED: true` was silently off), the off words off
    for (const on of ["true", "YES", " on ", "1"]) {
      process.env.KERNCAP_RECEIVED = on;
      expect(receivedBecause(dir, m), on).toContain(`KERNCAP_RECEIVED=${on.trim()} is set: every capture counts as received`);
    }
    for (const off of ["0", "false", "No", "off", ""]) {
      process.env.KERNCAP_RECEIVED = off;
      expect(receivedBecause(dir, m), off).toBeUndefined();
    }
    // anything else is refused, never taken for off
    for (const bad of ["2", "enabled", "1 "]) {
      process.env.KERNCAP_RECEIVED = bad;
      if (bad === "1 ") expect(receivedBecause(dir, m)).toContain("KERNCAP_RECEIVED=1 is set");
      else expect(() => receivedBecause(dir, m)).toThrow(/is neither on \(1, true, yes, on\) nor off/);
    }
  } finally {
    if (saved === undefined) delete process.env.KERNCAP_RECEIVED;
    else process.env.KERNCAP_RECEIVED = saved;
  }
  const p = Bun.spawnSync([process.execPath, join(import.meta.dir, "../../../src/cli/main.ts"), "validate", dir, "--build-only", "--json"], {
    env: { ...process.env, KERNCAP_RECEIVED: "1", XDG_STATE_HOME: join(root, "state") },
    stdout: "pipe",
    stderr: "pipe",
  });
  expect(p.exitCode).toBe(2);
  expect(JSON.parse(p.stdout.toString()).error).toMatchObject({ code: "E_UNTRUSTED", message: expect.stringContaining("KERNCAP_RECEIVED=1 is set") });
});
