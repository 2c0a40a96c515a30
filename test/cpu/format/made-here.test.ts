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

test("adversary 61: a capture kept inside another (a set's member, an older one) leaves in an archive as the top one does: no machine id, no seal (pack and unpack alike); moved out of the unpacked folder, it is received as no copy of the user's", async () => {
  const { packCapture } = await import("../../../src/format/pack.ts");
  const { unpackArchive } = await import("../../../src/format/unpack.ts");
  const { markReceived } = await import("../../../src/format/received.ts");
  const { readRawZip } = await import("../zip-fixture.ts");
  const root = tempDir();
  const dir = join(root, "cap");
  await makeCapture(dir);
  await makeCapture(join(dir, "prev"));
  const nested = (d: string) => JSON.parse(readFileSync(join(d, "prev/kerncap.json"), "utf8")); // readManifest refuses a nested capture
  expect(nested(dir).host.machineId).toBe(hostIdentity().machineId);
  const p = await packCapture(dir, join(root, "cap.zip"));
  const entries = readRawZip(p.archive);
  expect(entries.map((e) => e.name)).toContain("cap/prev/kerncap.json");
  expect(entries.filter((e) => e.name.endsWith(MADE_HERE_SEAL))).toEqual([]);
  const shipped = entries.find((e) => e.name === "cap/prev/kerncap.json")!;
  const bytes = shipped.method === 8 ? Bun.inflateSync(shipped.data as Uint8Array<ArrayBuffer>) : shipped.data;
  expect(JSON.parse(new TextDecoder().decode(bytes)).host.machineId).toBeNull();
  const out = join(root, "out");
  await unpackArchive(p.archive, out);
  const moved = join(root, "moved-out");
  renameSync(join(out, "prev"), moved);
  expect(receivedBecause(moved, readManifest(moved))).toContain("no machine-id");
  // an archive made by hand may carry both: unpack's mark takes them out of every nested capture
  const hand = join(root, "hand");
  cpSync(dir, hand, { recursive: true });
  expect(existsSync(join(hand, "prev", MADE_HERE_SEAL))).toBe(true);
  markReceived(hand, "hand.zip");
  expect(existsSync(join(hand, "prev", MADE_HERE_SEAL))).toBe(false);
  expect(nested(hand).host.machineId).toBeNull();
});

test.skipIf(process.getuid?.() !== 0)(
  "adversary 61: another user's kerncap-received.json above the user's own captures (a shared sticky folder) says nothing of them; the user's own mark there still does",
  async () => {
    const { RECEIVED_MARK } = await import("../../../src/format/received.ts");
    const { chownSync } = await import("node:fs");
    const shared = join(tempDir(), "shared");
    mkdirSync(shared);
    chmodSync(shared, 0o1777);
    const dir = join(shared, "mine", "cap");
    mkdirSync(join(shared, "mine"));
    await makeCapture(dir);
    writeFileSync(join(shared, RECEIVED_MARK), "{}");
    chownSync(join(shared, RECEIVED_MARK), 65534, 65534);
    expect(receivedBecause(dir, readManifest(dir))).toBeUndefined();
    chownSync(join(shared, RECEIVED_MARK), 0, 0);
    expect(receivedBecause(dir, readManifest(dir))).toContain("unpacked from an archive");
  },
);
