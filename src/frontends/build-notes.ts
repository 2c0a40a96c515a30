/**
 * build.sh's notes ("kerncap: …" lines on its stderr) that a frontend says itself before the build
 * (sayBeforeBuild): CUDA's slice edited by hand, which the pruned build compiles without running
 * build.sh to say it. ./build.ts then logs build.sh's own such note at debug level only, and keeps
 * it out of an error's text. A module of its own, below both ./build.ts and the frontends.
 */
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
