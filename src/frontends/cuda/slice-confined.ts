/**
 * The CUDA slice (./slice.ts) of a build of sources kerncap does not trust: a confined build
 * (validate --confine, kerncap mcp's validate, tune, profile and evaluate; every eval candidate of a
 * CUDA capture) and an eval candidate's private copy. The stamps on a slice's first line (sha256= of
 * the TU, body= of the slice) have no key: whoever writes the slice recomputes them, and build.sh
 * then compiles its text as the TU's (a trial: a broken TU validated as the original kernel, an
 * unchanged TU as a hidden one). So such a build compiles the slice made anew from the TU in its
 * private copy (regenerateSlice), whatever the file holds, and a candidate carrying a slice kerncap
 * did not make from its TU is refused before any build (foreignSlice).
 */
import { resolve } from "node:path";
import type { Manifest } from "../../format/manifest.ts";
import { MANIFEST_MAX_BYTES, readInCapture, writeInCapture } from "../../format/paths.ts";
import { log } from "../../log.ts";
import { checkSliceMeta, notMadeText, projectHeaders, sliceEditedByHand, sliceMetaOf, sliceProblem, sliceText } from "./slice.ts";

/** Why a confined build compiles the whole TU where the user's own validate compiles a prefix slice. */
export const CONFINED_WHOLE_TU = "a build for an agent, an eval or a received capture compiles the whole TU: a prefix slice is the user's own edit loop's";

/**
 * Make the slice of `dir`'s src/<tu> anew from that TU, whatever the slice file holds (stale,
 * edited by hand, or stamped as the TU's): `dir` is a confined build's private copy
 * (src/frontends/build.ts). A TU that can no longer be sliced gets the "not made" slice (build.sh
 * compiles the whole TU); with no TU the slice is left (build.sh then compiles the missing TU and fails).
 * @returns what was done: "fresh" (the slice was kerncap's for this TU already), "remade", "removed" (not made, `reason`), "no-tu";
 *   `wholeTu`: the slice is the "not made" one, so build.sh compiles the whole TU (and says "no usable slice");
 *   `replaced`: why the slice replaced would have been compiled although kerncap did not make it from the TU (sliceProblem: edited by hand, or stamped as this TU's)
 * @throws KerncapError E_MANIFEST (meta), E_UNSAFE_PATH (src/<tu> or the slice a link, a FIFO …)
 */
export function regenerateSlice(
  dir: string,
  metaIn: unknown,
): { action: "fresh" | "remade" | "removed" | "no-tu"; reason?: string; replaced?: string; wholeTu?: boolean } {
  const meta = checkSliceMeta(metaIn);
  const tuBytes = readInCapture(dir, `src/${meta.tu}`, MANIFEST_MAX_BYTES);
  if (!tuBytes) return { action: "no-tu" };
  const tuText = tuBytes.toString("utf8");
  const slicePath = `src/${meta.slice}`;
  const old = readInCapture(dir, slicePath, MANIFEST_MAX_BYTES)?.toString("utf8");
  const context = projectHeaders(dir, meta);
  // a prefix slice leaves code out that cicc's whole-program optimizations see in the TU (another call of a helper
  // the kernel calls: adversary 44), so that its machine code can differ with nothing declared after the kernel: what
  // is built for an agent, an eval or a received capture is the whole TU; the one instantiation is its own TU's
  const s: ReturnType<typeof sliceText> = meta.kind === "prefix" ? { ok: false, reason: CONFINED_WHOLE_TU } : sliceText(meta, tuText, context);
  const text = s.ok ? s.text : notMadeText(meta, s.reason);
  if (old === text) return { action: "fresh", ...(s.ok ? {} : { wholeTu: true }) };
  const replaced = old === undefined ? undefined : sliceProblem(meta, old, tuText, context);
  writeInCapture(dir, slicePath, text);
  return { action: s.ok ? "remade" : "removed", ...(s.ok ? {} : { reason: s.reason, wholeTu: true }), ...(replaced ? { replaced } : {}) };
}

/**
 * Frontend.generatedProblem of CUDA: why the slice under `dir`'s src/ (an eval candidate's private
 * copy) is not one kerncap made from the TU there (sliceProblem), or undefined (no slice, or one
 * kerncap made: for this text of the TU, or another).
 * @throws KerncapError E_MANIFEST (meta), E_UNSAFE_PATH
 */
export function foreignSlice(dir: string, m: Manifest): string | undefined {
  const metaIn = sliceMetaOf(m);
  if (!metaIn) return undefined;
  const meta = checkSliceMeta(metaIn);
  const slice = readInCapture(dir, `src/${meta.slice}`, MANIFEST_MAX_BYTES)?.toString("utf8");
  if (slice === undefined) return undefined;
  return sliceProblem(meta, slice, readInCapture(dir, `src/${meta.tu}`, MANIFEST_MAX_BYTES)?.toString("utf8"), projectHeaders(dir, meta));
}

/** A name of src/ as a pattern: the build's messages give it as `src/NAME`, or (on the user's own command line) with the capture's path before it. */
const srcName = (name: string) => `(?:\\S*/)?src/${name.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}`;

/**
 * Frontend.buildNotes of CUDA: the notes templates/cuda/build.sh.hbs writes about the slice, word
 * for word but the names (the capture's slice and TU) and the slice log's path; none for an unsliced project.
 */
export function cudaBuildNotes(m: Manifest): RegExp[] {
  const meta = sliceMetaOf(m);
  if (!meta) return [];
  const [S, T] = [srcName(checkSliceMeta(meta).slice), srcName(meta.tu)];
  return [
    `no usable slice \\(${S}\\): compiling the whole TU ${T}`,
    `${T} changed since the slice was made \\(kerncap validate remakes it\\): compiling the whole TU`,
    `the slice ${S} was edited by hand: compiling it as it is \\(it is generated from ${T}: once that file changes, validate refuses to remake it over your edit; delete the slice to compile the whole TU\\)`,
    `the slice did not build for this text of ${T}: compiling the whole TU`,
    `the slice ${S}, edited by hand, does not build \\(its messages above\\); the whole TU is not compiled in its place`,
    `the slice ${S} does not build \\(nvcc failed on it: [^\\s():]*slice-build\\.log\\): compiled the whole TU ${T} in its place`,
  ].map((p) => new RegExp(`^kerncap: ${p}$`));
}

/**
 * Frontend.generatedState of CUDA: `dir`'s slice "edited" by hand (sliceEditedByHand: its body=
 * stamp names another text), which the user's own build compiles as it is; "not-made" (notMadeText:
 * an agent's build, or a TU that cannot be sliced), its reason; else "made" (kerncap's, none, or one
 * that does not read: the build says why).
 */
export function sliceStateInCapture(dir: string, m: Manifest): { state: "made" | "edited" | "not-made"; reason?: string } {
  const meta = sliceMetaOf(m);
  if (!meta) return { state: "made" };
  try {
    const slice = readInCapture(dir, `src/${checkSliceMeta(meta).slice}`, MANIFEST_MAX_BYTES)?.toString("utf8");
    if (slice !== undefined && sliceEditedByHand(slice)) return { state: "edited" };
    const notMade = slice?.split("\n", 2);
    if (notMade?.[0]?.endsWith(" sha256=none")) return { state: "not-made", reason: notMade[1]?.replace(/^\/\/ not made: /, "") ?? "" };
  } catch {
    // the build reads it again and says what is wrong
  }
  return { state: "made" };
}

/**
 * Frontend.remakeGenerated of CUDA: the slice of a confined build's private copy `dir` made anew
 * from its TU (regenerateSlice), whatever the copy's slice holds; a slice that would have been
 * compiled as it was is said. No-op for an unsliced project.
 * @returns [NO_SLICE_NOTE] when build.sh will compile the whole TU (its note expected), else []
 * @throws KerncapError E_MANIFEST, E_UNSAFE_PATH
 */
export function remakeSliceForConfinedBuild(dir: string, m: Manifest): string[] {
  const meta = sliceMetaOf(m);
  if (!meta) return [];
  const r = regenerateSlice(resolve(dir), meta);
  if (r.replaced)
    log.info(
      `${r.replaced}: a confined build compiles ${r.action === "removed" ? `the whole TU (no slice can be made: ${r.reason})` : `the slice kerncap makes from src/${meta.tu}`}, never the one found`,
    );
  else if (r.action === "removed" && !saidNoSlice.has(`${meta.tu}\0${r.reason}`)) {
    // once per process and reason: an eval of many candidates builds many copies (nu14: one line per candidate); with
    // --verbose only: the whole TU is what such a build compiles, nothing to act on (nu15: it read as a problem)
    saidNoSlice.add(`${meta.tu}\0${r.reason}`);
    log.debug(`no slice for src/${meta.tu} (${r.reason}): the whole TU is compiled`);
  }
  // build.sh's "no usable slice" note is then what this build means to do, not a problem to show (said at debug level)
  return r.wholeTu ? [NO_SLICE_NOTE] : [];
}

/** The start of build.sh's note when it finds no slice it can compile (templates/cuda/build.sh.hbs). */
export const NO_SLICE_NOTE = "kerncap: no usable slice (";

/** The TUs and reasons remakeSliceForConfinedBuild said "no slice" for in this process. */
const saidNoSlice = new Set<string>();
