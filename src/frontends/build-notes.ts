/**
 * build.sh's notes ("kerncap: …" lines on its stderr), as ./build.ts reads them:
 * those a frontend says itself before the build (sayBeforeBuild: CUDA's slice edited by hand, which
 * the pruned build compiles without build.sh to say it), and which lines are notes at all
 * (knownNote: only the exact forms the frontend's template writes, so that a line a received
 * source makes the compiler print never speaks as kerncap). A module below ./build.ts and the frontends.
 */
import type { Manifest } from "../format/manifest.ts";
import { log } from "../log.ts";

/** Starts of the notes said before the build, in this process. */
const saidBefore = new Set<string>();

/**
 * Say before a build what build.sh would say in a note starting `noteStart` (its `src/…` paths as
 * build.sh writes them): `said` is logged once per process, and build.sh's own note then at debug level only.
 */
export function sayBeforeBuild(noteStart: string, said: string): void {
  if (!saidBefore.has(noteStart)) log.info(said);
  saidBefore.add(noteStart);
}

/** The starts of the notes sayBeforeBuild said in this process. */
export const notesSaidBefore = (): string[] => [...saidBefore];

/** Each frontend's note forms for a manifest (Frontend.buildNotes), set by the registry (./index.ts), which this module is below. */
let noteForms: (m: Manifest) => RegExp[] = () => [];

/** Set how a manifest's frontend says its build.sh's note forms (./index.ts, as it loads). */
export function setNoteForms(f: (m: Manifest) => RegExp[]): void {
  noteForms = f;
}

/** The longest line read as a note (characters): build.sh's are short, and a longer one is no note (nor read by a pattern). */
const NOTE_MAX = 4096;

/**
 * Whether `line` (build.sh's stderr, its src/ paths as the build's messages name them) is one of the
 * notes the frontend's template writes for capture `m`, word for word but the names (Frontend.buildNotes):
 * a line a compiler prints (a received source's `#pragma GCC warning "-\nkerncap: …"`) is not
 * (adversary 65 07: it spoke in kerncap's voice, naming a command to accept lenient settings).
 */
export function knownNote(m: Manifest | undefined, line: string): boolean {
  if (!m || line.length > NOTE_MAX) return false;
  return noteForms(m).some((re) => re.test(line));
}
