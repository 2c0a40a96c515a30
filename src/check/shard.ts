/**
 * `--shard K/N`: a stable share of the captures for a CI matrix or a Slurm job array. A capture
 * belongs to shard sha256(identity) mod N: the same capture lands in the same shard on every node
 * and in every run, whatever else the corpus holds and in whatever order it is listed; the shards
 * are disjoint and together cover the corpus; each holds about 1/N of it (a hash's share).
 */
import { KerncapError } from "../errors.ts";
import { recordAuthProblem, sealRecord, type ResultsKey } from "../format/record-auth.ts";

export interface Shard {
  /** 0-based: 0 … count-1 (SLURM_ARRAY_TASK_ID of `--array=0-(N-1)`). */
  index: number;
  count: number;
}

/** "K/N" → { index: K, count: N }. @throws KerncapError E_USAGE naming what is wrong */
export function parseShard(text: string): Shard {
  const m = /^(\d+)\/(\d+)$/.exec(text.trim());
  const hint = "Write --shard K/N with 0 ≤ K < N, e.g. --shard $SLURM_ARRAY_TASK_ID/$SLURM_ARRAY_TASK_COUNT for `sbatch --array=0-(N-1)`.";
  if (!m) throw new KerncapError("E_USAGE", `--shard ${JSON.stringify(text)} is not K/N`, { hint });
  const index = Number(m[1]);
  const count = Number(m[2]);
  if (count < 1 || count > 100_000) throw new KerncapError("E_USAGE", `--shard ${text}: N must be from 1 to 100000`, { hint });
  if (index >= count) throw new KerncapError("E_USAGE", `--shard ${text}: K must be below N (shards are numbered from 0)`, { hint });
  return { index, count };
}

/** The shard (0 … count-1) a capture identity belongs to: the first 48 bits of its SHA-256, mod count. */
export function shardOf(id: string, count: number): number {
  const h = new Bun.CryptoHasher("sha256").update(id).digest();
  return h.readUIntBE(0, 6) % count;
}

/** The document id the authenticator of a shard's claim covers (shardClaimAuth). */
const SHARD_CLAIM = "kerncap.check-shard/1";

/**
 * The authenticator of a sharded check's --json document's claim: it was shard "K/N" and checked
 * exactly the captures `ids` (none, for a shard that held none). Without it, a document written by
 * hand could stand for any shard, an empty one hiding a failing shard's captures from --merge
 * (adversary 31 #2). undefined where there is no key to write with.
 */
export function shardClaimAuth(shard: string, ids: readonly string[], key: ResultsKey | undefined, runSubject?: string): string | undefined {
  return sealRecord(SHARD_CLAIM, { shard, ids: [...ids].sort(), ...(runSubject ? { runSubject } : {}) }, key).auth;
}

/** Why a document's claim to be shard "K/N" of the captures `ids` is not authenticated under `key` (a phrase), or undefined when it is. */
export function shardClaimProblem(shard: string, ids: readonly string[], auth: unknown, key: ResultsKey, runSubject?: string): string | undefined {
  return recordAuthProblem(SHARD_CLAIM, { shard, ids: [...ids].sort(), ...(runSubject ? { runSubject } : {}), auth }, key);
}
