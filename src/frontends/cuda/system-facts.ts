/**
 * The toolchain's and system's headers as a CUDA slice's check read them, kept between processes.
 * validate checks, at every build, that a slice stamped with its TU's hash is what kerncap makes
 * from it (./slice.ts refreshSlice); for llm.c's train_gpt2.cu that check took 290–360 ms on an
 * H100 node, 185–237 ms of it reading system headers (1,126 lookups, 8,263 paths asked about): the
 * same headers, read again by every validate. This module keeps what the lookups found
 * (./slice-directives.ts SystemHeaderFacts) with the identity (device, inode, size, mtime, ctime)
 * of every path they asked about, there or not, as it was when asked (a header read: the file read,
 * by its descriptor; the nvcc found, a link followed), in the user's cache folder (src/cache.ts
 * preferredCacheDir, used only where privateFolderRisk finds no other user able to write it):
 * `cuda-system-headers-<16 hex>.json`, 0600, one per toolchain environment (the digest of the
 * variables that choose the nvcc, the toolkit's folders and the include folders). A process takes
 * the facts only from a regular file of the user's that no one else may write (never through a
 * link, never waiting on a FIFO), of this kerncap's version, with every path as it was (a header
 * installed, removed or changed anywhere it looked, the toolkit behind the nvcc link changed: all
 * read again); it writes them back only when it looked up something they did not hold, and only
 * while every path is still as it was asked about (adversary 72: a header upgraded while a watch
 * ran). Any doubt: nothing taken, the headers read as before.
 */
import { lstatSync, rmSync } from "node:fs";
import { join } from "node:path";
import { preferredCacheDir, privateFolderRisk } from "../../cache.ts";
import { TOOL_VERSION } from "../../version.ts";
import { writeFileAtomic } from "../../util/write-file.ts";
import { readInputFile } from "../../format/paths.ts";
import { notOwnFile } from "../../user-group.ts";
import { INCLUDE_SEARCH_ENV } from "../include-search.ts";
import { adoptSystemHeaderFacts, pathIdentity, systemHeaderFacts, systemPathsProbed, type SystemHeaderFacts } from "./slice-directives.ts";

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

/** The file's text when it is a regular file of the user's that no one else may write (never waiting on a FIFO, never through a link: src/format/paths.ts readInputFile, src/user-group.ts notOwnFile); else undefined. */
function readOwn(file: string): string | undefined {
  try {
    return readInputFile(file, "system headers' facts file", "E_IO", MAX_BYTES, (st) => {
      const why = notOwnFile(st, file);
      if (why) throw new Error(why);
    });
  } catch {
    return undefined;
  }
}

/**
 * Take the facts an earlier process kept (once per process, before this one looked anything up):
 * only this kerncap's, found by paths that include every include folder they name, each path as
 * it was. Nothing else happens on any doubt.
 */
export function takeSystemFacts(): void {
  if (taken >= 0) return;
  taken = 0;
  if (systemHeaderFacts()) return; // this process looked up already: its own facts stand
  const file = factsFile();
  const text = file && readOwn(file);
  if (!text) return;
  let f: FactsFile;
  try {
    f = JSON.parse(text) as FactsFile;
  } catch {
    return;
  }
  if (f?.schema !== SCHEMA || f.kerncap !== TOOL_VERSION || !Array.isArray(f.probed) || !f.probed.length || !Array.isArray(f.facts?.dirs)) return;
  if (!f.probed.every((e) => Array.isArray(e) && typeof e[0] === "string" && pathIdentity(e[0]) === e[1])) return;
  const asked = new Set(f.probed.map(([p]) => p));
  if (!f.facts.dirs.every((d) => asked.has(d))) return; // facts whose folders were never asked about: not the lookups'
  adoptSystemHeaderFacts(f.facts, f.probed);
  taken = systemHeaderFacts() ? f.probed.length : 0;
}

/**
 * Keep this process's facts for the next (after a check), when it looked up more than it took:
 * each path with its identity as it was asked about or read, and only while every one is still so
 * (a header changed meanwhile: nothing kept). Written private (0600; a file others could write is
 * removed first: its mode would be kept); a folder that cannot take it keeps none.
 */
export function keepSystemFacts(): void {
  const facts = systemHeaderFacts();
  const probed = systemPathsProbed();
  if (!facts || probed.length <= taken) return;
  if (!probed.every(([p, id]) => pathIdentity(p) === id)) return;
  const file = factsFile();
  if (!file) return;
  const doc: FactsFile = { schema: SCHEMA, kerncap: TOOL_VERSION, probed, facts };
  try {
    const st = lstatSync(file, { throwIfNoEntry: false });
    if (st && (!st.isFile() || (st.mode & 0o077) !== 0)) rmSync(file, { force: true });
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
