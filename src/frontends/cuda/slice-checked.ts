/**
 * The record that a CUDA slice was checked: validate's step before the build (./slice.ts
 * refreshSlice) makes sure that a slice stamped with its TU's sha256 is what kerncap makes from
 * that TU (sliceProblem: the slice made again, with its hazards read from the project's headers
 * and the toolchain's). For llm.c's train_gpt2.cu that took 290–360 ms on the H100 node, 185–237 ms
 * of it reading the toolchain's and system's headers (1,126 lookups, 8,263 paths asked about), the
 * same answer each time. So once a check finds no problem, DIR/build/slice-check.json records what
 * it read: one digest of the capture's inputs (the TU, the slice, the project's headers by name,
 * build.sh, the manifest's slice record, this kerncap's version), one of the environment variables
 * that choose the toolchain, what the system-header lookups found (./slice-directives.ts
 * SystemHeaderFacts), and the identity (device, inode, size, mtime, ctime) of every path they asked
 * about, there or not. The next validate takes the lookups' facts when the environment and every
 * identity are the same (an edit of a project header is then checked without reading the system's
 * headers again), and the whole verdict when the inputs are the same too. The record is sealed for
 * this folder with the user's results key (src/format/state-seal.ts), as the pruned build's check
 * is: a record a copy or an archive brings is not this user's, and is checked again. Without a key,
 * no record: each validate checks.
 */
import { statSync } from "node:fs";
import { join } from "node:path";
import { canonicalJson } from "../../format/record-auth.ts";
import { MANIFEST_MAX_BYTES, readInCapture, writeInCapture } from "../../format/paths.ts";
import { stateSeal, userResultsKey } from "../../format/state-seal.ts";
import { TOOL_VERSION } from "../../version.ts";
import { INCLUDE_SEARCH_ENV } from "../include-search.ts";
import { adoptSystemHeaderFacts, systemHeaderFacts, systemPathsProbed, type SystemHeaderFacts } from "./slice-directives.ts";

/** Where the record lies in a capture (build/: pack leaves it out, kerncap clean removes it). */
export const SLICE_CHECK_FILE = "build/slice-check.json";

const SCHEMA = "kerncap.slice-check/1";
/** The most bytes of a record read back (its facts grow with the system headers a TU reaches: about 1 MB for llm.c's). */
const RECORD_MAX_BYTES = 16 << 20;

/** The environment variables that choose the toolchain and its headers (the nvcc found, the toolkit's folders, the flags and include folders every compile gets). */
const CHECK_ENV = ["NVCC", "PATH", "CUDA_HOME", "CUDA_PATH", "EXTRA_FLAGS", ...INCLUDE_SEARCH_ENV];

/** What a slice's check read from the capture: its slice record, the TU's text, the slice's text, the project's headers (src/…, by name). */
export interface SliceCheckInputs {
  meta: object;
  tuText: string;
  slice: string;
  headers: readonly { rel: string; text: string }[];
}

interface SliceCheckRecord {
  schema: string;
  kerncap: string;
  /** envDigest's. */
  env: string;
  /** inputsDigest's. */
  inputs: string;
  /** Each path the system-header lookups asked about, and its identity then ("absent" where there was none). */
  system: [string, string][];
  facts?: SystemHeaderFacts;
  auth?: string;
}

/** sha256 of the parts `fill` gives, each length-prefixed. */
function digest(fill: (part: (x: string | Uint8Array) => void) => void): string {
  const h = new Bun.CryptoHasher("sha256");
  fill((x) => h.update(`${typeof x === "string" ? Buffer.byteLength(x) : x.length}:`).update(x));
  return h.digest("hex");
}

/** The digest of the capture's inputs to a check, with build.sh and this kerncap's version. */
function inputsDigest(dir: string, i: SliceCheckInputs): string {
  return digest((part) => {
    for (const x of [TOOL_VERSION, canonicalJson(i.meta), i.tuText, i.slice]) part(x);
    for (const x of i.headers) {
      part(x.rel);
      part(x.text);
    }
    part(readInCapture(dir, "build.sh", MANIFEST_MAX_BYTES) ?? "");
  });
}

/** The digest of CHECK_ENV's values. */
function envDigest(): string {
  return digest((part) => CHECK_ENV.forEach((k) => part(`${k}=${process.env[k] ?? ""}`)));
}

/** A path's identity: device, inode, size, mtime and ctime (ns), or "absent". */
function identity(path: string): string {
  try {
    const s = statSync(path, { bigint: true });
    return `${s.dev}:${s.ino}:${s.size}:${s.mtimeNs}:${s.ctimeNs}`;
  } catch {
    return "absent";
  }
}

/** The record's seal for this folder under the user's key. */
function sealOf(dir: string, r: SliceCheckRecord, key: NonNullable<ReturnType<typeof userResultsKey>>): string {
  const { auth: _, ...body } = r;
  return stateSeal(SCHEMA, join(dir, "build"), [Buffer.from(canonicalJson(body))], key);
}

/**
 * Whether this user's kerncap checked this slice before with the same inputs: the record there,
 * sealed for this folder with the user's key, of this kerncap's version, the same environment,
 * every toolchain and system path it names as it was, and its inputs' digest the same. Where all
 * but the inputs are, the system-header lookups' facts it holds become this process's (the check
 * then reads no system header again). Any doubt (no record, no key, an unreadable or changed one):
 * false, and the caller checks.
 */
export function sliceCheckedBefore(dir: string, i: SliceCheckInputs): boolean {
  try {
    const key = userResultsKey();
    if (!key) return false;
    const r = JSON.parse(readInCapture(dir, SLICE_CHECK_FILE, RECORD_MAX_BYTES)?.toString("utf8") ?? "null") as SliceCheckRecord | null;
    if (r?.schema !== SCHEMA || r.kerncap !== TOOL_VERSION || typeof r.auth !== "string" || !Array.isArray(r.system)) return false;
    if (r.auth !== sealOf(dir, r, key) || r.env !== envDigest() || !r.system.every(([p, id]) => identity(p) === id)) return false;
    if (r.facts)
      adoptSystemHeaderFacts(
        r.facts,
        r.system.map(([p]) => p),
      );
    return r.inputs === inputsDigest(dir, i);
  } catch {
    return false;
  }
}

/**
 * Record that the slice was checked with these inputs and found what kerncap makes (after
 * sliceProblem found none, in the same process: the system-header facts and the paths asked about
 * are this process's). Nothing without the user's key; a folder that cannot take it keeps none
 * (the next validate checks again).
 */
export function recordSliceChecked(dir: string, i: SliceCheckInputs): void {
  const key = userResultsKey();
  if (!key) return;
  const facts = systemHeaderFacts();
  const system = systemPathsProbed().map((p): [string, string] => [p, identity(p)]);
  const r: SliceCheckRecord = { schema: SCHEMA, kerncap: TOOL_VERSION, env: envDigest(), inputs: inputsDigest(dir, i), system, ...(facts ? { facts } : {}) };
  try {
    // remade at a validate's check, as a build output is: no fsync (src/format/staged-build.ts collectBuild)
    writeInCapture(dir, SLICE_CHECK_FILE, JSON.stringify({ ...r, auth: sealOf(dir, r, key) }) + "\n", 0o600, { sync: false });
  } catch {
    // the next validate checks again
  }
}
