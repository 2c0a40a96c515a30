/**
 * The toolchain's and system's headers as a CUDA slice's check read them, kept between processes.
 * validate checks, before every build, that a slice stamped with its TU's hash is what kerncap
 * makes from it (./slice.ts refreshSlice); for llm.c's train_gpt2.cu that check took 290–360 ms on
 * an H100 node, 185–237 ms of it reading system headers (1,126 lookups, 8,263 paths asked about):
 * the same headers, read again by every validate. This module keeps what the lookups found
 * (./slice-directives.ts SystemHeaderFacts) with the identity (device, inode, size, mtime, ctime)
 * of every path they asked about, there or not, in the user's cache folder (src/cache.ts
 * preferredCacheDir, used only where privateFolderRisk finds no other user able to write it):
 * `cuda-system-headers-<16 hex>.json`, one per toolchain environment (the digest of the variables
 * that choose the nvcc, the toolkit's folders and the include folders). A process takes the facts
 * only when this kerncap wrote them and every path is as it was (a header installed, removed or
 * changed anywhere it looked: all read again); it writes them back only when it looked up
 * something they did not hold. Any doubt: nothing taken, the headers read as before.
 */
import { constants, fstatSync, readFileSync, closeSync, statSync } from "node:fs";
import { join } from "node:path";
import { preferredCacheDir, privateFolderRisk } from "../../cache.ts";
import { TOOL_VERSION } from "../../version.ts";
import { openNoFollow, writeFileAtomic } from "../../util/write-file.ts";
import { INCLUDE_SEARCH_ENV } from "../include-search.ts";
import { adoptSystemHeaderFacts, systemHeaderFacts, systemPathsProbed, type SystemHeaderFacts } from "./slice-directives.ts";

const SCHEMA = "kerncap.cuda-system-headers/1";
/** The most bytes read back (about 1.3 MB for llm.c's). */
const MAX_BYTES = 32 << 20;
/** The environment variables that choose the toolchain and its headers (the nvcc found, the toolkit's folders, the include folders every compile gets). */
const TOOLCHAIN_ENV = ["NVCC", "PATH", "CUDA_HOME", "CUDA_PATH", ...INCLUDE_SEARCH_ENV];

interface FactsFile {
  schema: string;
  kerncap: string;
  /** Each path asked about and its identity then ("absent" where there was none). */
  probed: [string, string][];
  facts: SystemHeaderFacts;
}

/** How many paths this process's facts were taken with (0: none taken); a lookup past them makes the file worth writing. */
let taken = -1;

/** A path's identity: device, inode, size, mtime and ctime (ns), or "absent". */
function identity(path: string): string {
  try {
    const s = statSync(path, { bigint: true, throwIfNoEntry: false });
    return s ? `${s.dev}:${s.ino}:${s.size}:${s.mtimeNs}:${s.ctimeNs}` : "absent";
  } catch {
    return "absent"; // ENOTDIR: a file where a folder of the path would be
  }
}

/** The facts file for this environment, in a cache folder no one else can write; undefined where there is none. */
function factsFile(): string | undefined {
  try {
    const { dir } = preferredCacheDir();
    if (privateFolderRisk(dir)) return undefined;
    const h = new Bun.CryptoHasher("sha256");
    for (const k of TOOLCHAIN_ENV) h.update(`${k}=${process.env[k] ?? ""}\0`);
    return join(dir, `cuda-system-headers-${h.digest("hex").slice(0, 16)}.json`);
  } catch {
    return undefined;
  }
}

/**
 * Take the facts an earlier process kept (once per process, before this one looked anything up):
 * only this kerncap's, each path asked about as it was. Nothing else happens on any doubt.
 */
export function takeSystemFacts(): void {
  if (taken >= 0) return;
  taken = 0;
  const file = factsFile();
  if (!file) return;
  let f: FactsFile;
  try {
    const fd = openNoFollow(file, constants.O_RDONLY, "the system headers' facts");
    try {
      const st = fstatSync(fd);
      if (!st.isFile() || st.uid !== process.getuid?.() || st.size > MAX_BYTES) return;
      f = JSON.parse(readFileSync(fd, "utf8")) as FactsFile;
    } finally {
      closeSync(fd);
    }
  } catch {
    return; // none yet, unreadable
  }
  if (f?.schema !== SCHEMA || f.kerncap !== TOOL_VERSION || !Array.isArray(f.probed) || !f.facts) return;
  if (!f.probed.every((e) => Array.isArray(e) && typeof e[0] === "string" && identity(e[0]) === e[1])) return;
  if (systemHeaderFacts()) return; // this process looked up already: its own facts stand
  adoptSystemHeaderFacts(
    f.facts,
    f.probed.map(([p]) => p),
  );
  taken = systemHeaderFacts() ? f.probed.length : 0;
}

/** Keep this process's facts for the next (after a check), when it looked up more than it took; a folder that cannot take them keeps none. */
export function keepSystemFacts(): void {
  const facts = systemHeaderFacts();
  const probed = systemPathsProbed();
  if (!facts || probed.length <= taken) return;
  const file = factsFile();
  if (!file) return;
  const doc: FactsFile = { schema: SCHEMA, kerncap: TOOL_VERSION, probed: probed.map((p) => [p, identity(p)]), facts };
  try {
    writeFileAtomic(file, JSON.stringify(doc), { mode: 0o600, sync: false, create: true, what: "the system headers' facts" });
    taken = probed.length;
  } catch {
    // the next process reads the headers again
  }
}

/** `f` (a slice's check or making) with the facts an earlier process kept taken first, and this one's kept after. */
export function withSystemFacts<T>(f: () => T): T {
  takeSystemFacts();
  try {
    return f();
  } finally {
    keepSystemFacts();
  }
}
