/**
 * GPU tests of doctor, pack/unpack and the MCP server on a real capture (structs.cu): doctor's
 * fixed-VA reservation and built-in capture + replay pass; a capture packed, unpacked elsewhere
 * and replayed is bit-exact (every file the same bytes, every region checksum verified).
 */
import { describe, expect, test } from "bun:test";
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { APPS, json, kerncap, skipReason, workDir } from "./harness.ts";
import { MADE_HERE_SEAL, RECEIVED_MARK } from "../../src/format/file-names.ts";

const SKIP = !!skipReason("share/doctor gpu tests");
const WORK = workDir("kerncap-gpu-share-");
const kc = (args: string[]) => kerncap(WORK, args);

function files(dir: string, rel = ""): string[] {
  return readdirSync(join(dir, rel), { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? files(dir, rel ? `${rel}/${e.name}` : e.name) : [rel ? `${rel}/${e.name}` : e.name],
  );
}

describe.skipIf(SKIP)("doctor with a GPU", () => {
  test("every check passes or warns; the fixed-VA reservation and the built-in capture + replay are ok", () => {
    const r = kc(["doctor", "--json"]);
    const d = json(r);
    const by = Object.fromEntries(d.checks.map((c: any) => [c.id, c]));
    expect(by.libcuda.status, JSON.stringify(by.libcuda)).toBe("ok");
    expect(by.gpu.status).toBe("ok");
    expect(by["va-reservation"].status, JSON.stringify(by["va-reservation"])).toBe("ok");
    expect(by["capture-replay"].status, JSON.stringify(by["capture-replay"])).toBe("ok");
    expect(r.code, r.stdout).toBe(d.verdict === "fail" ? 2 : 0);
  }, 300_000);
});

describe.skipIf(SKIP)("pack / unpack a real capture", () => {
  test("packed, unpacked into another folder: same bytes, checksums verify, replay matches", () => {
    const bin = join(WORK, "structs");
    const b = Bun.spawnSync(["nvcc", "-O2", "-lineinfo", "-arch=sm_90", "-o", bin, join(APPS, "structs.cu")], { stderr: "pipe" });
    expect(b.exitCode, b.stderr.toString()).toBe(0);
    const cap = join(WORK, "cap");
    const c = kc(["run", "--kernel", "scale_jobs", "--dispatch", "1", "--source-root", APPS, "--out", cap, "--json", "--", bin, "3"]);
    expect(c.code, c.stderr).toBe(0);
    const p = kc(["pack", cap, "-o", join(WORK, "cap.zip"), "--json"]);
    expect(p.code, p.stderr).toBe(0);
    const pd = json(p);
    expect(pd.schema).toBe("kerncap.pack/1");
    const u = kc(["unpack", join(WORK, "cap.zip"), "-o", join(WORK, "back"), "--json"]);
    expect(u.code, u.stderr).toBe(0);
    const back = join(WORK, "back");
    // the same files but the sender's seal (never shipped: src/format/pack.ts), and the mark
    // unpack adds: a received capture's build.sh waits for --trust (src/format/trust.ts)
    const shipped = files(cap).filter((f) => f !== MADE_HERE_SEAL);
    expect(files(cap)).toContain(MADE_HERE_SEAL);
    expect(files(back).sort()).toEqual([...shipped, RECEIVED_MARK].sort());
    for (const f of shipped) {
      if (f === "kerncap.json") continue; // below: shipped without this machine's id
      expect(statSync(join(back, f)).size, f).toBe(statSync(join(cap, f)).size);
      expect(Buffer.compare(readFileSync(join(back, f)), readFileSync(join(cap, f))), f).toBe(0);
    }
    // the manifest is the sender's but for host.machineId, null (src/format/redact.ts shippedManifestOf: made here means this machine's id)
    const sent = JSON.parse(readFileSync(join(cap, "kerncap.json"), "utf8"));
    const got = JSON.parse(readFileSync(join(back, "kerncap.json"), "utf8"));
    expect(typeof sent.host.machineId).toBe("string");
    expect(got.host.machineId).toBeNull();
    expect({ ...got, host: { ...got.host, machineId: sent.host.machineId } }).toEqual(sent);
    const i = kc(["inspect", back, "--verify", "--json"]);
    expect(i.code, i.stderr).toBe(0);
    expect(json(i).integrity.verdict).toBe("ok");
    const r = kc(["replay", back, "--iters", "3", "--json"]);
    expect(r.code, r.stderr).toBe(0);
    expect(json(r).verdict).toBe("match");
    console.log(`[share] pack ${pd.bytes.files} B of files (${pd.bytes.data} B data) → ${pd.bytes.archive} B archive in ${pd.seconds.toFixed(2)} s`);
  }, 300_000);
});
