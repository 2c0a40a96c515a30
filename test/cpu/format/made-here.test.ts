/** src/format/made-here.ts: a capture counts as made here only by the seal the user's own key made for its very folder. */
import { expect, test } from "bun:test";
import { chmodSync, cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, renameSync, rmSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { randomBytes } from "node:crypto";
import { hostIdentity, onlyUnsealed, receivedBecause } from "../../../src/format/received.ts";
import { readManifest } from "../../../src/format/capture-dir.ts";
import { MADE_HERE_SEAL, notSealedHere, sealMadeHere } from "../../../src/format/made-here.ts";
import { keyId, type ResultsKey } from "../../../src/format/record-auth.ts";
import { kerncapErrorOf, makeCapture, stderrOf, tempDir } from "../fixtures.ts";
import { writeDemo } from "../../../src/capture/demo.ts";
import { requireTrustedBuild } from "../../../src/format/trust.ts";

const otherKey = (): ResultsKey => {
  const bytes = randomBytes(32);
  return { bytes, id: keyId(bytes), from: "test" };
};

test("a capture is sealed where it is made (0600): made here; renamed on the same file system, still; a copy (cp -r, files and seal alike) is received, saying why", async () => {
  const root = tempDir();
  const dir = join(root, "cap");
  await makeCapture(dir);
  expect(statSync(join(dir, MADE_HERE_SEAL)).mode & 0o777).toBe(0o600);
  expect(receivedBecause(dir, readManifest(dir))).toBeUndefined();
  const moved = join(root, "moved");
  renameSync(dir, moved);
  expect(receivedBecause(moved, readManifest(moved))).toBeUndefined();
  const copy = join(root, "copy");
  cpSync(moved, copy, { recursive: true, preserveTimestamps: true });
  expect(existsSync(join(copy, MADE_HERE_SEAL))).toBe(true);
  expect(receivedBecause(copy, readManifest(copy))).toBe(
    "its manifest names this machine, but its seal is not for this folder (a copy: cp, tar, rsync; or a folder moved to another file system)",
  );
});

test("adversary 57 #33: a manifest naming this machine's id and this user (anyone can read or write those) with no seal, a seal made under another key, or a seal that is a link: received", async () => {
  const dir = join(tempDir(), "cap");
  await makeCapture(dir);
  const m = readManifest(dir);
  expect(m.host).toMatchObject({ machineId: hostIdentity().machineId, uid: process.geteuid!() });
  const seal = join(dir, MADE_HERE_SEAL);
  const genuine = readFileSync(seal);
  rmSync(seal);
  expect(receivedBecause(dir, m)).toStartWith("its manifest names this machine, but it holds no seal of yours");
  expect(sealMadeHere(dir, otherKey())).toBe(true); // the attacker's own key, the right folder
  expect(receivedBecause(dir, m)).toBe("its manifest names this machine, but its seal was made under another results key than yours");
  rmSync(seal);
  const elsewhere = join(tempDir(), "seal");
  writeFileSync(elsewhere, genuine);
  symlinkSync(elsewhere, seal);
  expect(notSealedHere(dir)).toBe(`its ${MADE_HERE_SEAL} cannot be read (a symbolic link)`);
  rmSync(seal);
  writeFileSync(seal, genuine, { mode: 0o600 });
  chmodSync(seal, 0o622);
  expect(notSealedHere(dir)).toBe(`its ${MADE_HERE_SEAL} is not a file of yours only you may write`);
  chmodSync(seal, 0o600);
  expect(receivedBecause(dir, m)).toBeUndefined(); // the genuine bytes again, in this folder: made here
  writeFileSync(seal, `{"schema":"kerncap.made-here/1","auth":"hmac-sha256:${"0".repeat(16)}:${"0".repeat(64)}"}\n`);
  expect(notSealedHere(dir)).toBe("its seal was made under another results key than yours");
});

// a real hand-off between two local users (as root: runuser); the receiver extracts the sender's tar, so every file is the receiver's and the manifest names the receiver
const asUser = (user: string, cmd: string) => Bun.spawnSync(["runuser", "-u", user, "--", "bash", "-c", cmd], { stdout: "pipe", stderr: "pipe" });
const twoUsers = process.geteuid?.() === 0 && existsSync("/var/lib") && asUser("victim", "true").exitCode === 0 && asUser("attacker", "true").exitCode === 0;

test.skipIf(!twoUsers)(
  "another local user's tar, its manifest rewritten to name the receiver (machine id and uid) and its seal the receiver's own from another capture: received, build.sh asks --trust",
  async () => {
    const main = join(import.meta.dir, "../../../src/cli/main.ts");
    // state folders are kerncap's only on a way no other user can rename (not under /tmp's 1777): a root-owned folder in /var/lib
    const root = mkdtempSync("/var/lib/kerncap-handoff-");
    chmodSync(root, 0o755);
    try {
      const home = (u: string) => {
        const h = join(root, u);
        mkdirSync(h, { mode: 0o700 });
        Bun.spawnSync(["chown", `${u}:${u}`, h]);
        return h;
      };
      const v = home("victim");
      const a = home("attacker");
      const kc = (u: string, h: string, args: string) => asUser(u, `cd ${h} && XDG_STATE_HOME=${h}/.state HOME=${h} ${process.execPath} ${main} ${args}`);
      expect(kc("victim", v, "demo mine").exitCode).toBe(0);
      const victimUid = Number(asUser("victim", "id -u").stdout.toString().trim());
      expect(kc("attacker", a, "demo theirs").exitCode).toBe(0);
      // the attacker names the victim (the id every manifest shows; the uid) and ships a tar
      const mf = join(a, "theirs/kerncap.json");
      const m = JSON.parse(readFileSync(mf, "utf8"));
      m.host.uid = victimUid;
      const script = `const fs=require("fs");fs.writeFileSync(${JSON.stringify(mf)}, ${JSON.stringify(JSON.stringify(m, null, 2))})`;
      expect(asUser("attacker", `${process.execPath} -e '${script.replaceAll("'", "'\\''")}'`).exitCode).toBe(0);
      expect(
        asUser(
          "attacker",
          `printf 'echo planted >&2; exit 3\\n' >> ${a}/theirs/build.sh && cd ${a} && tar cf /tmp/kc-handoff-$$.tar theirs && mv /tmp/kc-handoff-$$.tar ${a}/theirs.tar && chmod 644 ${a}/theirs.tar`,
        ).exitCode,
      ).toBe(0);
      chmodSync(a, 0o755);
      // the victim extracts it, and puts their own seal of another capture beside it
      const x = asUser("victim", `cd ${v} && tar xf ${a}/theirs.tar && cp mine/${MADE_HERE_SEAL} theirs/`);
      expect(x.stderr.toString()).toBe("");
      expect(x.exitCode).toBe(0);
      const inspect = kc("victim", v, "inspect theirs --json");
      const doc = JSON.parse(inspect.stdout.toString());
      expect(doc.received.received).toBe(true);
      expect(doc.received.reasons.join("; ")).toContain("its seal is not for this folder");
      const built = kc("victim", v, "validate theirs --build-only --json");
      expect(built.exitCode).toBe(2);
      expect(JSON.parse(built.stdout.toString()).error.code).toBe("E_UNTRUSTED");
      expect(built.stderr.toString()).not.toContain("planted\n"); // the planted line never ran
      // the victim's own capture is made here
      expect(JSON.parse(kc("victim", v, "inspect mine --json").stdout.toString()).received.received).toBe(false);
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  },
);

test("a copy of the user's own capture: refused, the hint saying it is a copy and that plain --trust is enough; once trusted, sealed as the user's (later builds need no --trust); an MCP agent's trust seals nothing", async () => {
  const root = tempDir();
  const dir = join(root, "cap");
  writeDemo(dir, false);
  const copy = join(root, "copy");
  cpSync(dir, copy, { recursive: true });
  const m = readManifest(copy);
  expect(onlyUnsealed(copy, m)).toBe(true);
  const refused = await kerncapErrorOf(() => stderrOf(() => requireTrustedBuild(copy, m, false)).then((r) => r.value));
  expect(refused.code).toBe("E_UNTRUSTED");
  expect(refused.hint).toStartWith("It names this machine and you: a copy of a capture of yours (cp -r)");
  expect(refused.hint).toContain("(kerncap's own build.sh: plain --trust is enough; remembered for this folder");
  // an agent's build trusted by the server (--trust-builds): runs, seals nothing
  const agents = join(root, "agents");
  cpSync(dir, agents, { recursive: true });
  await stderrOf(() => requireTrustedBuild(agents, m, true, { inMessage: true, remember: false }));
  expect(notSealedHere(agents)).toBeDefined();
  await stderrOf(() => requireTrustedBuild(copy, m, true));
  expect(notSealedHere(copy)).toBeUndefined();
  expect(statSync(join(copy, MADE_HERE_SEAL)).mode & 0o777).toBe(0o600);
  expect(receivedBecause(copy, m)).toBeUndefined();
  // a capture another machine made is received for its manifest too: no --trust makes it one made here
  const foreign = join(root, "foreign");
  cpSync(dir, foreign, { recursive: true });
  const fm = readManifest(foreign);
  fm.host = { ...fm.host!, machineId: "0".repeat(31) + "1" };
  expect(onlyUnsealed(foreign, fm)).toBe(false);
});
