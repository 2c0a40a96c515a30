/**
 * An edited module judged against the captured kernel's nondeterminism, not its own. Runs that
 * differ among themselves are judged against their run-to-run envelope (./envelope.ts); were that
 * envelope the edit's own, an edit whose runs differ on purpose (a launch counter flipping the
 * output's sign) would widen it until the app's values lie inside and read MATCH. So the checked
 * runs of a rebuilt module (validate, eval, the watch, tune) may differ only where, and by about
 * as much as, the captured kernel's own runs differ in this session. Pure functions, no GPU.
 */
import { isFloatType } from "./envelope.ts";
import type { Judged } from "./judging.ts";
import type { ElementType } from "./tolerance.ts";

/** What the captured module's checked runs showed (one per session: ReplaySession). */
export interface ReferenceNoise {
  /** Its checked runs. */
  runs: number;
  /** Indices of the ranges whose runs differed among themselves. */
  varied: number[];
  /** Per float element type: the largest run-to-run spread over its varying ranges (ulp at the element's magnitude). */
  ulp: Partial<Record<ElementType, number>>;
}

/**
 * An edit's runs may spread up to EDIT_SPREAD_FACTOR times the captured kernel's spread of the
 * same element type, plus EDIT_SPREAD_ULP ulp: another order of the same atomics moves a sum by a
 * few ulp more or less than the captured order did, garbage by millions.
 */
export const EDIT_SPREAD_FACTOR = 4;
export const EDIT_SPREAD_ULP = 8;

/** The reference of a judged run of the captured module. */
export function referenceOf(j: Pick<Judged, "varied" | "noise">, runs: number): ReferenceNoise {
  return { runs, varied: [...j.varied], ulp: Object.fromEntries([...j.noise].map(([t, k]) => [t, k.ulp])) };
}

/**
 * Why an edited module's checked runs differ beyond the captured kernel's nondeterminism, or
 * undefined when they do not: runs that differ where the captured kernel's are bit-identical; a
 * float range varying with no range of its element type varying in the captured kernel, or
 * spreading more than EDIT_SPREAD_FACTOR × its spread + EDIT_SPREAD_ULP, or by NaN, infinities
 * or signed zeros (no finite spread, which the envelope would let pass); a non-float range varying
 * where the captured kernel's same range never did.
 * @param edit the edit's judging (./judging.ts judgeRuns) and its checked runs
 * @param dtypes each range's element type; names: each range's name for the message ("region 2 0x7f…")
 */
export function beyondReference(
  edit: Pick<Judged, "varied" | "noise" | "runsDiffering"> & { runs: number },
  dtypes: ElementType[],
  names: string[],
  ref: ReferenceNoise,
): string | undefined {
  if (!edit.varied.length) return undefined;
  const first = edit.varied[0]!;
  if (!ref.varied.length) {
    return (
      `the edited kernel's checked runs differ among themselves (${edit.runsDiffering.size} of ${edit.runs - 1} later runs differ from the first, ` +
      `first in ${names[first]}) where the captured kernel's ${ref.runs} runs are bit-identical: nondeterminism the edit brought in`
    );
  }
  for (const i of edit.varied) {
    const t = dtypes[i]!;
    if (!isFloatType(t)) {
      if (!ref.varied.includes(i)) return `${names[i]} (${t}) differs among the edited kernel's checked runs, never among the captured kernel's ${ref.runs}`;
      continue;
    }
    const refUlp = ref.ulp[t];
    const editNoise = edit.noise.get(t);
    // varied with no finite spread: NaN, infinities or the sign of a zero change from run to run
    if (!editNoise?.regions.includes(i))
      return `${names[i]} (${t}) differs among the edited kernel's checked runs by NaN, infinities or signed zeros, which the captured kernel's ${ref.runs} runs never gave`;
    const editUlp = editNoise.ulp;
    if (refUlp === undefined)
      return `${names[i]} (${t}) differs among the edited kernel's checked runs, while no ${t} range differed among the captured kernel's ${ref.runs}`;
    if (editUlp > EDIT_SPREAD_FACTOR * refUlp + EDIT_SPREAD_ULP)
      return (
        `the edited kernel's ${t} results spread ${editUlp} ulp across its checked runs (${names[i]}), the captured kernel's at most ${refUlp} ulp ` +
        `across its ${ref.runs}: more than ${EDIT_SPREAD_FACTOR}× + ${EDIT_SPREAD_ULP} ulp of the captured kernel's nondeterminism`
      );
  }
  return undefined;
}

/**
 * A rebuilt module's judging against the captured kernel's nondeterminism: nothing when its runs
 * did not differ; else the reference (`reference()`: the captured kernel's checked runs in this
 * session, taken when first needed) and why its runs differ beyond it (beyondReference), unless a
 * tolerance judges each of its runs on its own within it (`eachRunWithin`: an edit that brings
 * atomics in, a split-K reduction). A `beyond` makes the verdict a mismatch.
 */
export async function editAgainstReference(
  edit: Pick<Judged, "varied" | "noise" | "runsDiffering"> & { runs: number },
  dtypes: ElementType[],
  names: string[],
  reference: () => Promise<ReferenceNoise>,
  eachRunWithin: () => boolean,
): Promise<{ runs: number; nondeterministic: boolean; beyond?: string; eachRunWithinTolerance?: boolean } | undefined> {
  if (!edit.varied.length) return undefined;
  const ref = await reference();
  const beyond = beyondReference(edit, dtypes, names, ref);
  const r = { runs: ref.runs, nondeterministic: ref.varied.length > 0 };
  if (!beyond) return r;
  if (eachRunWithin()) return { ...r, eachRunWithinTolerance: true };
  return { ...r, beyond };
}
