/**
 * `kerncap eval`'s inputs (./eval.ts): the capture folders, or a capture set's members, all of one
 * kernel, each with a name that tells it apart (resolveInputs), their files checked once before
 * any build (verifyInputs).
 */
import { existsSync, realpathSync, statSync } from "node:fs";
import { basename, join, resolve } from "node:path";
import { isKerncapError, KerncapError } from "../errors.ts";
import { openCapture, verifyFiles } from "../format/capture-dir.ts";
import { readCaptureSet } from "../format/capture-set.ts";
import { captureSetMember } from "../format/paths.ts";
import { checksumsChecked } from "../format/received.ts";
import { BUILD_INPUT } from "./report.ts";
import type { Manifest } from "../format/manifest.ts";

export interface EvalInput {
  id: string;
  dir: string;
  manifest: Manifest;
}

/**
 * The inputs: each folder a capture, or a capture set's members; all of one kernel.
 * @throws KerncapError E_USAGE (no capture there, two kernels, two inputs of one identity, one named "(build)"), the manifest's errors
 */
export function resolveInputs(dirs: string[]): EvalInput[] {
  const out: EvalInput[] = [];
  // a folder given twice is refused before any is opened, and the captures counted before any is read (adversary 65 04: one
  // set of 20 named 20 000 times made 400 000 openings, 2.9 GB, no answer in a minute)
  const named = new Set<string>();
  let count = 0;
  const sets = new Map<string, ReturnType<typeof readCaptureSet>>();
  for (const d of dirs) {
    const dir = resolve(d);
    if (!existsSync(dir) || !statSync(dir).isDirectory())
      throw new KerncapError("E_USAGE", `${dir} is not a folder`, { hint: "Give capture folders (kerncap run --out) or a capture set's folder (run -c N)." });
    const real = realOrSame(dir);
    if (named.has(real)) throw twice(dir);
    named.add(real);
    const set = existsSync(join(dir, "kerncap.json")) ? undefined : readCaptureSet(dir);
    sets.set(dir, set);
    count += set ? set.captures.length : 1;
    if (count > EVAL_INPUTS_MAX)
      throw new KerncapError("E_USAGE", `the inputs hold more than ${EVAL_INPUTS_MAX} captures: an eval judges each candidate on at most that many`, {
        hint: "Give fewer capture folders or sets (a few launches of the kernel judge a candidate as well as many).",
      });
  }
  for (const d of dirs) {
    const dir = resolve(d);
    const set = sets.get(dir);
    if (set)
      for (const c of set.captures) {
        const member = captureSetMember(dir, c.dir); // a real folder inside the set, never a link out of it
        out.push({ id: `${basename(dir)}/${c.dir}`, dir: member, manifest: openCapture(member).manifest });
      }
    else out.push({ id: basename(dir), dir, manifest: openCapture(dir).manifest });
  }
  const first = out[0]!;
  for (const i of out) {
    if (i.manifest.kernel.name !== first.manifest.kernel.name) {
      throw new KerncapError(
        "E_USAGE",
        `${i.dir} is a capture of ${i.manifest.kernel.demangled || i.manifest.kernel.name}, ${first.dir} of ${first.manifest.kernel.demangled || first.manifest.kernel.name}: the inputs of an eval are captures of one kernel`,
        { hint: "Give captures of the same kernel (its launches in a capture set from run -c N, or from several runs)." },
      );
    }
  }
  const given = new Set<string>();
  for (const i of out) {
    // a failed build's record names this input (./report.ts BUILD_INPUT): no capture may be named so
    if (i.id === BUILD_INPUT)
      throw new KerncapError("E_USAGE", `${i.dir}: an input may not be named ${BUILD_INPUT}, which the records give a candidate that never reached a GPU`, {
        hint: "Rename the capture folder.",
      });
    const real = realOrSame(i.dir);
    if (given.has(real)) throw twice(i.dir);
    given.add(real);
  }
  return distinctInputNames(out);
}

/** The most captures an eval's inputs may hold (its sets' members counted): each is opened, restored and replayed for every candidate. */
export const EVAL_INPUTS_MAX = 1024;

/** E_USAGE: the capture folder `dir` given twice as an input. */
function twice(dir: string): KerncapError {
  return new KerncapError("E_USAGE", `the capture ${dir} is given twice as an input`, {
    hint: "Give each capture folder once (a capture set once, not beside its members).",
  });
}

function realOrSame(p: string): string {
  try {
    return realpathSync(p);
  } catch {
    return p;
  }
}

/**
 * The inputs with names that tell them apart: those that share one (run1/cap, run2/cap: both
 * "cap"; nu7 #15 was refused) each named by the shortest end of its folder's path that ends no
 * other of them (run1/cap, run2/cap), as candidates' labels are (./candidates.ts distinctLabels).
 */
function distinctInputNames(inputs: EvalInput[]): EvalInput[] {
  const byId = new Map<string, EvalInput[]>();
  for (const i of inputs) byId.set(i.id, [...(byId.get(i.id) ?? []), i]);
  return inputs.map((i) => {
    const group = byId.get(i.id)!;
    if (group.length < 2) return i;
    const parts = group.map((g) => g.dir.split("/").filter(Boolean));
    const me = group.indexOf(i);
    const p = parts[me]!;
    const end = (q: string[], k: number) => q.slice(-k).join("/");
    let k = i.id.split("/").length + 1;
    while (k < p.length && parts.some((q, j) => j !== me && end(q, k) === end(p, k))) k++;
    return { ...i, id: end(p, k) };
  });
}

/**
 * Each input's files checked as replay checks them (src/format/capture-dir.ts verifyFiles: the
 * small files' SHA-256, unless `verify` is false for a capture of the user's own, and the memory
 * images' sizes), once, before any build: a damaged input is said naming it (nu7 #12: every
 * candidate was built first, each record then E_CHECKSUM, with a --resume that cannot help). The
 * memory chunks' checksums are checked as the workers restore them.
 * `verb`: the command that judges them (eval; kerncap tune, whose one input is its capture), as said.
 * @throws KerncapError E_CHECKSUM naming the input and the file, E_UNSAFE_PATH
 */
export function verifyInputs(inputs: EvalInput[], verify: boolean, verb = "eval"): void {
  for (const i of inputs) {
    const m = i.manifest;
    try {
      verifyFiles(i.dir, checksumsChecked(i.dir, m, verify, i.id) ? m : { ...m, files: [] });
    } catch (e) {
      if (!isKerncapError(e) || e.code !== "E_CHECKSUM") throw e;
      // kerncap tune's one input is the capture itself: no input to leave out, no candidates but its configs (nu #8)
      if (inputs.length === 1 && verb !== "eval")
        throw new KerncapError("E_CHECKSUM", `${i.dir} is damaged: ${e.message}; nothing was built`, { hint: e.hint ?? "Capture again." });
      throw new KerncapError("E_CHECKSUM", `input ${i.id} (${i.dir}) is damaged: ${e.message}; no candidate was built`, {
        hint: `${e.hint ?? "Capture again."} Or leave this input out of the ${verb}; a rerun as it is fails alike.`,
      });
    }
  }
}
