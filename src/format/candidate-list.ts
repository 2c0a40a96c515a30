/**
 * A candidate list (`kerncap eval --candidate-list FILE`): the candidates of an eval as a JSON file,
 * each with its own label; what kerncap mcp's evaluate writes, and a harness may write too
 * (`kerncap schema candidate-list` prints its JSON Schema). Read by src/eval/candidates.ts
 * listedCandidates.
 */
import * as v from "valibot";

/**
 * The codes of a candidate that does not fit the capture's src/, never built: a patch that does not
 * apply (E_PATCH), a replacement file or tree that does not fit, a config for a capture that is
 * not Triton's (E_CANDIDATE), a path no candidate may write (E_NOT_SOURCE: not a source file;
 * E_PACK_NAME: a name pack refuses). No rerun changes them (src/eval/report.ts CANDIDATE_FAULTS).
 */
export const CANDIDATE_FAULT_CODES = ["E_PATCH", "E_CANDIDATE", "E_NOT_SOURCE", "E_PACK_NAME"] as const;

/** A candidate's label in a candidate list: a name as kerncap mcp's evaluate takes it. */
const LABEL = /^[A-Za-z0-9_][A-Za-z0-9._-]{0,63}$/;

/** The kinds a refused entry of a candidate list may name. */
export const LISTED_KINDS = ["tree", "overlay", "patch", "file", "config"] as const;

const Label = v.pipe(
  v.string(),
  v.regex(LABEL),
  v.description("The candidate's name in the records and the ranking, verbatim: letters, digits, . _ - (at most 64, not starting with . or -)"),
);

/** Each form of a candidate list's entry, by the key that tells it (listProblem picks one by it). */
export const LIST_FORMS = {
  spec: v.strictObject({
    label: Label,
    spec: v.pipe(
      v.string(),
      v.minLength(1),
      v.description(
        "A path as the command line gives a candidate: an edited src/ folder, a .patch/.diff file, or a replacement file (relative to the working folder)",
      ),
    ),
  }),
  overlay: v.strictObject({
    label: Label,
    overlay: v.pipe(v.string(), v.minLength(1), v.description("A folder holding src/… with only the files that replace or add files of the capture's src/")),
  }),
  config: v.strictObject({
    label: Label,
    config: v.pipe(v.string(), v.regex(/^[A-Za-z_]\w*=/), v.description("A Triton config, e.g. 'BLOCK_M=64 num_warps=4' (never looked up as a file)")),
  }),
  refused: v.strictObject({
    label: Label,
    refused: v.pipe(
      v.strictObject({
        kind: v.picklist(LISTED_KINDS),
        code: v.picklist(CANDIDATE_FAULT_CODES),
        reason: v.pipe(v.string(), v.minLength(1), v.maxLength(4000)),
      }),
      v.description("A candidate refused before the eval: never built, its record an error with this code and reason"),
    ),
  }),
};

/**
 * A candidate list (`kerncap eval --candidate-list FILE`, what kerncap mcp's evaluate writes): each
 * candidate's label (the agent's name, verbatim) and one of: its spec (a path as the command line
 * gives a candidate: a folder, a .patch file, a replacement file), an overlay (a folder holding
 * src/… with only the files that replace or add files of src/: overlayCandidate), its Triton
 * config (text, never looked up as a file), or why it was refused before eval (its kind, code and
 * reason: never written, never built).
 */
export const CandidateList = v.strictObject({
  candidates: v.pipe(v.array(v.union([LIST_FORMS.spec, LIST_FORMS.overlay, LIST_FORMS.config, LIST_FORMS.refused])), v.minLength(1)),
});

export type CandidateList = v.InferOutput<typeof CandidateList>;
