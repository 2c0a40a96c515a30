/**
 * Whether a failed build is a missing toolchain or a compile error of the source (buildFailureHint),
 * read from its messages (./build.ts): a program build.sh could not run, as the shell that ran it
 * says (bash's `build.sh: line 39: /x/nvcc: No such file or directory`, also "command not found",
 * "Permission denied"; env's `/usr/bin/env: 'python3': No such file or directory`), is the
 * toolchain's; a compiler's own "No such file or directory" about a header (`src/k.cu:8:10: fatal
 * error: h.h: No such file or directory`, nu10 #30) is the source's error.
 */
import { parseDiagnostics } from "./confine.ts";

/** The end of a shell's line saying it could not run a program. */
const NOT_RUN_END = /: (?:not found|No such file or directory|Permission denied)$/;

/**
 * Whether one line of a build's output is the shell saying it could not run a program (nvcc, the
 * capture's Python): bash's "command not found" in any form (not a source line a compiler quotes,
 * indented), bash running a script ("F: line N: P: No such file…"), bash -c and dash, a #! line's
 * interpreter, timeout's. Each test reads the line in linear time: no pattern with two unbounded
 * parts that backtrack (adversary 65: `^.+: line \d+: .+: …$` over a 90 KB line of ": line 1: "
 * took minutes of CPU after a build that failed at once).
 */
function programNotRun(l: string): boolean {
  if (/^\S/.test(l) && l.endsWith(": command not found")) return true;
  if (l.startsWith("timeout: failed to run command ")) return true;
  if ((l.startsWith("/bin/env: ") || l.startsWith("/usr/bin/env: ")) && l.endsWith(": No such file or directory")) return true;
  const end = NOT_RUN_END.exec(l.slice(-40));
  if (!end) return false;
  const body = l.slice(0, l.length - end[0].length); // "F: line N: P" or "[/…/](ba|da)sh: [N: ]P"
  const line = /: line \d+: /.exec(body);
  if (line && line.index > 0 && line.index + line[0].length < body.length) return true;
  const sh = body.indexOf("sh: ");
  return sh >= 0 && /^(?:[^\n]*\/)?(?:ba|da)?sh$/.test(body.slice(0, sh + 2)) && body.length > sh + 4;
}

/**
 * What to do about a failed build.sh: exit 126/127, or the shell saying it could not run a program
 * (programNotRun: nvcc, the capture's Python), is a toolchain that is missing; anything else
 * (the compiler's messages) is a compile error of the source, to fix.
 */
export function buildFailureHint(code: number, output: string): string {
  if (code === 127 || code === 126 || output.split("\n").some((l) => programNotRun(l) && !isDiagnosticLine(l))) {
    return (
      "build.sh could not run a program it calls (exit " +
      code +
      "): the toolchain the reproducer names is missing here. Install it or point the reproducer at it (NVCC=/path/to/nvcc for a CUDA reproducer, KERNCAP_PYTHON for a Triton one; kerncap doctor checks them)."
    );
  }
  return FIX_AND_VALIDATE;
}

/** A compiler's diagnostic line (either form: parseDiagnostics), which no program-not-run test may match. */
const isDiagnosticLine = (l: string) => parseDiagnostics("/", l, { captureOnly: false }).length > 0;

/** buildFailureHint's for a compile error; the watch says "save again" instead (src/rebuild/watch.ts: it rebuilds at each save). */
export const FIX_AND_VALIDATE = "Fix the compile error in the edited source and run validate again.";

/** The most characters of one message line an error's text carries (a longer one is cut, saying how much more). */
export const MESSAGE_LINE_MAX = 2000;

/**
 * The last 30 of a failed build's message `lines`, each cut to MESSAGE_LINE_MAX characters, as one
 * text: what an error (and an eval record's reason, an MCP progress notification) carries of them
 * (adversary 65 06: 2.5 KB sources whose every error line EDG printed at megabytes made 25 MB records).
 */
export function lastLines(lines: readonly string[]): string {
  return lines
    .slice(-30)
    .map((l) => (l.length > MESSAGE_LINE_MAX ? `${l.slice(0, MESSAGE_LINE_MAX)}… (${l.length - MESSAGE_LINE_MAX} characters more)` : l))
    .join("\n");
}
