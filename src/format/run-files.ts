/**
 * What a rebuild runs besides build.sh, as each frontend declares it (Frontend.runFiles,
 * registered by src/frontends/index.ts as it loads): the files the trust gate shows, hashes and
 * stages (src/format/trust.ts, src/format/staged-build.ts), the ones a confined build holds to their rendered bytes
 * (src/format/rendered.ts), and the build outputs not worth collecting. Every frontend's count
 * for every capture, whatever its manifest names: a received capture's manifest is the sender's,
 * and its build.sh may run any file of the folder. Registration only ever adds: a frontend cannot
 * take a file out of another's.
 *
 * Asked before the registry loaded, runFileSpecs throws (a kerncap bug), so a build is never
 * trusted on fewer files than the frontends declare.
 */
/** One frontend's files that its rebuild runs or reads commands from (Frontend.runFiles). */
export interface RunFiles {
  /** Files of the capture folder (relative paths) its build runs or reads commands from, beyond build.sh, read in this order when present (Triton: pinned.json, repro.py). */
  files: readonly string[];
  /**
   * What those files name that runs too, from their bytes as read (`read`: each of `files`
   * present, by name): more files (relative paths in the capture folder: Triton's kernel file
   * under src/) and the interpreter that runs them (a path or command name; null: none named).
   * @throws KerncapError (E_UNSAFE_PATH, E_MANIFEST) for a file that names what may not run
   */
  follow?(dir: string, read: ReadonlyMap<string, Buffer>): { files: string[]; interpreter: string | null };
  /**
   * How the refusal speaks of the interpreter `follow` found: `named` ends "what its build runs
   * (…, NAMED: …)" (Triton: "the interpreter pinned.json names"); `shown(present, interpreter)`
   * is the block printed after the files ("" when none of its files is present); `check(dir,
   * interpreter)` refuses one that may not run, once the files `follow` named were read.
   * @throws KerncapError E_UNSAFE_PATH from `check`
   */
  interpreter?: { named: string; shown(present: ReadonlySet<string>, interpreter: string | null): string; check(dir: string, interpreter: string): void };
  /** Entries of the build's private build/ that are not moved into the capture's (a compile cache: Triton's triton-cache). */
  uncollected?: readonly string[];
}

const specs: RunFiles[] = [];
let loaded = false;

/**
 * Add a frontend's run files (src/frontends/index.ts, for each frontend it registers).
 * @returns the function that removes them again (a test's frontend)
 */
export function addRunFiles(s: RunFiles): () => void {
  specs.push(s);
  return () => {
    const i = specs.indexOf(s);
    if (i >= 0) specs.splice(i, 1);
  };
}

/** The built-in frontends' run files are all added (src/frontends/index.ts, once it loaded). */
export function runFilesLoaded(): void {
  loaded = true;
}

/**
 * Every frontend's run files, in registry order.
 * @throws Error before the frontend registry loaded (a kerncap bug: trust would cover too little)
 */
export function runFileSpecs(): readonly RunFiles[] {
  if (!loaded) throw new Error("the frontend registry (src/frontends/index.ts) is not loaded: what a build runs is not known");
  return specs;
}

/** The files every frontend's build runs beyond build.sh (RunFiles.files), in registry order, each once. */
export function frontendRunFiles(): string[] {
  return [...new Set(runFileSpecs().flatMap((s) => s.files))];
}
