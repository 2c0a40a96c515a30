/**
 * What must hold before a capture's build runs (a received capture's build.sh only after
 * --trust; a confined build only the one kerncap wrote, src/format/trust.ts and
 * src/format/rendered.ts). The gates are applied by the workflows of src/ops/ (src/ops/gates.ts),
 * once per verb; a library function whose build may run (a tune's configs, eval's candidates)
 * takes one as a required option and calls it where its usage errors are said and its first
 * build is about to start, so that a caller cannot leave the question out.
 */
export type BuildGate = () => void;
