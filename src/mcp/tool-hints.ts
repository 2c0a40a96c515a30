/**
 * What a verb's error and its last lines advise, in the words of the MCP tools: a verb run by
 * `kerncap mcp` speaks of command-line options (`--build-only`, `--jsonl FILE` then `--resume`,
 * `kerncap doctor`) that an agent cannot give (nu89 #2): its tools are build, buildOnly: true and
 * another call. Applied to each tool child's document and stderr tail (./children.ts spawnVerb).
 */
import { FIX_AND_VALIDATE } from "../frontends/build.ts";
import { NO_GPU_KEEP, RERUN_RESUME } from "../eval/report.ts";

/** The hint of E_NO_GPU over MCP, whichever tool met it. */
export const MCP_NO_GPU_HINT =
  "The machine kerncap mcp runs on has no usable GPU (or driver): the build tool compiles an edit without one, and evaluate and tune take buildOnly: true (each candidate compiled, none judged); replay, validate, profile and judging need the server on a machine with the capture's GPU.";

/**
 * `hint` of an error of code `code` from the verb run as `argv`, in the tools' words where the
 * verb's speaks of options; otherwise `hint` as it is.
 */
export function toolHint(argv: readonly string[], code: unknown, hint: unknown): unknown {
  if (code === "E_NO_GPU") return MCP_NO_GPU_HINT;
  if (code === "E_BUILD" && hint === FIX_AND_VALIDATE)
    return argv.includes("--build-only")
      ? "Fix the compile error in the edited source (edit_file; error.details.diagnostics give each file and line) and call build again."
      : "Fix the compile error in the edited source (edit_file; error.details.diagnostics give each file and line) and call validate again (build compiles without judging).";
  return hint;
}

/** A tool child's stderr `text` with eval's advice in the tools' words. */
export function toolText(text: string): string {
  return text
    .split(NO_GPU_KEEP)
    .join("here, evaluate's buildOnly: true compiles them without a GPU")
    .split(RERUN_RESUME)
    .join("calling evaluate again tries them again");
}

/** `doc` (a tool child's JSON document) with its error's hint in the tools' words (toolHint); the same object when it holds no error. */
export function withToolHint(argv: readonly string[], doc: Record<string, unknown>): Record<string, unknown> {
  const error = doc.error as { code?: unknown; hint?: unknown } | undefined;
  if (!error || typeof error !== "object") return doc;
  const hint = toolHint(argv, error.code, error.hint);
  return hint === error.hint ? doc : { ...doc, error: { ...error, hint } };
}
