/**
 * What a Triton reproducer's build runs besides build.sh (Frontend.runFiles; the trust gate,
 * src/format/trust.ts, shows, hashes and stages them): pinned.json (it names the interpreter, and
 * its constexpr expressions are evaluated), repro.py, and the kernel file pinned.json names
 * (`src/<kernelFile>`, which repro.py imports) run by that interpreter. A Triton capture runs only
 * files under src/; the interpreter may not lie in the capture or in a folder others can write.
 */
import { escapeForTerminal } from "../../escape.ts";
import { KerncapError } from "../../errors.ts";
import { MANIFEST_MAX_BYTES, readInCapture, relativePathProblem } from "../../format/paths.ts";
import type { RunFiles } from "../../format/run-files.ts";
import { interpreterProblem } from "../../format/what-runs.ts";
import { shownInterpreterName } from "../../format/trust-prompt.ts";
import { parsePinned, PINNED_FILE, PinnedRuns } from "./pinned.ts";

/** pinned.json's kernel file, relative to src/ (what repro.py imports), as a list; [] where pinned.json names none or cannot be read. */
export function tritonKernelFile(dir: string): string[] {
  try {
    const bytes = readInCapture(dir, PINNED_FILE, MANIFEST_MAX_BYTES);
    const pin = bytes ? parsePinned(dir, bytes, PinnedRuns) : undefined;
    return pin && relativePathProblem(pin.kernelFile) === undefined ? [pin.kernelFile] : [];
  } catch {
    return []; // no pinned.json, or one the trust gate refuses by name before any build
  }
}

export const tritonRunFiles: RunFiles = {
  files: [PINNED_FILE, "repro.py"],
  /**
   * pinned.json's kernel file (under src/) and interpreter, checked against its schema before
   * anything is shown or trusted: a crafted one is E_MANIFEST naming the field.
   * @throws KerncapError E_MANIFEST (pinned.json), E_UNSAFE_PATH (a kernelFile outside src/)
   */
  follow(dir, read) {
    const pinned = read.get(PINNED_FILE);
    const pin = pinned ? parsePinned(dir, pinned, PinnedRuns) : undefined;
    if (!pin) return { files: [], interpreter: null };
    const problem = relativePathProblem(pin.kernelFile);
    if (problem) {
      throw new KerncapError(
        "E_UNSAFE_PATH",
        `${dir}/pinned.json names the kernel file ${escapeForTerminal(JSON.stringify(pin.kernelFile), { oneLine: true })}, which ${problem}: a Triton reproducer runs only files under src/`,
        {
          hint: "The capture was altered (kerncap writes src/<function>.py); nothing was run. Capture again, or ask for a clean copy.",
        },
      );
    }
    return { files: [`src/${pin.kernelFile}`], interpreter: pin.python ?? null };
  },
  interpreter: {
    named: "the interpreter pinned.json names",
    /** What the refusal says about the interpreter: a Triton compile runs it on repro.py. */
    shown(present, interpreter) {
      if (!present.has(PINNED_FILE)) return "";
      return `──── the interpreter pinned.json names (run with ${present.has("repro.py") ? "the folder's" : "kerncap's"} repro.py) ────\n${shownInterpreterName(interpreter ?? "(none named: the capture's Python)")}\n`;
    },
    /** @throws KerncapError E_UNSAFE_PATH (src/format/what-runs.ts interpreterProblem) */
    check(dir, interpreter) {
      const problem = interpreterProblem(dir, interpreter);
      if (problem) {
        throw new KerncapError(
          "E_UNSAFE_PATH",
          `${dir}/pinned.json names the interpreter ${escapeForTerminal(JSON.stringify(interpreter))}, which ${problem}: its bytes are not shown or hashed, so whoever can change it would run code with your rights`,
          {
            hint: "Nothing was run. Point pinned.json's \"python\" at an interpreter of your own (or root's) outside the capture, e.g. the output of `command -v python3`.",
          },
        );
      }
    },
  },
  uncollected: ["triton-cache"],
};
