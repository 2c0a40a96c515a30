/**
 * The user's acceptances of a capture's judging settings (`kerncap judge DIR --accept`, or settings
 * the user set with `kerncap judge`): one record per folder (its path, device, inode, owner, birth
 * time: src/format/trust-records.ts trustKey) and the judging file's SHA-256, in the user's state
 * folder (accepted-judging.json, 0600). Read by the judging rules (src/replay/judge-settings.ts
 * judgingInEffect) and by the trust gate (./trust.ts: a copy of the user's own is sealed by --trust
 * only when the settings it holds are accepted).
 */
import { createHash } from "node:crypto";
import { JUDGE_FILE } from "./file-names.ts";
import { readInCapture, writeInCapture } from "./paths.ts";
import { stateDir, stateFileRisk, trustKey, type TrustRecord } from "./trust-records.ts";

/** The acceptance records' file in the state folder. */
const ACCEPT_FILE = "accepted-judging.json";

/** The SHA-256 of the capture's judging file as it is (the bytes), or undefined when it has none. */
function fileDigest(dir: string): string | undefined {
  const b = readInCapture(dir, JUDGE_FILE, 1 << 20);
  return b ? createHash("sha256").update(b).digest("hex") : undefined;
}

function records(state: string): TrustRecord[] {
  if (stateFileRisk(state, ACCEPT_FILE)) return []; // another user may write it: nothing accepted
  try {
    const doc = JSON.parse(readInCapture(state, ACCEPT_FILE, 16 << 20)?.toString("utf8") ?? "{}");
    return Array.isArray(doc?.accepted) ? doc.accepted : [];
  } catch {
    return []; // a damaged record accepts nothing
  }
}

const same = (r: TrustRecord, k: Omit<TrustRecord, "at">) =>
  r.dir === k.dir && r.dev === k.dev && r.ino === k.ino && r.uid === k.uid && r.birth === k.birth && r.runs === k.runs;

/**
 * Record that the user accepts the judging file of capture `dir` whose bytes have the SHA-256 `d`
 * (the bytes shown, or written: never the file read again, which another user may have replaced
 * meanwhile), for this folder. Nothing is recorded without a state folder of the user's own (the settings then
 * stay unused in a received capture, said where they are read).
 * @returns whether it was recorded
 */
export function acceptJudging(dir: string, d: string | undefined): boolean {
  const state = stateDir();
  if (!d || !state) return false;
  const key = trustKey(dir, `judge:${d}`);
  const kept = records(state).filter((r) => r.dir !== key.dir);
  writeInCapture(
    state,
    ACCEPT_FILE,
    `${JSON.stringify({ schema: "kerncap.accepted-judging/1", accepted: [...kept, { ...key, at: new Date().toISOString() }] }, null, 1)}\n`,
    0o600,
  );
  return true;
}

/** Whether the user accepted the capture's judging file as it is now (acceptJudging); `read`: the digest of the bytes the settings were read from (else the file is read again). */
export function judgingAccepted(dir: string, read?: string): boolean {
  const d = read ?? fileDigest(dir);
  const state = stateDir();
  if (!d || !state) return false;
  const key = trustKey(dir, `judge:${d}`);
  return records(state).some((r) => same(r, key));
}
