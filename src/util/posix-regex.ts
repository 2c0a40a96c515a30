/**
 * The --kernel pattern as the capture library reads it: a POSIX extended regular expression
 * (glibc regcomp(REG_EXTENDED|REG_NOSUB), the same call c/cuda/kerncap_cuda.c makes), so that the CLI
 * checks and the "matched / closest names" messages agree with what the library matches.
 * JavaScript's RegExp differs (\d, \b, (?:…) and lookarounds are not ERE).
 */
import { KerncapError } from "../errors.ts";
import { libc } from "../native/libc.ts";

const REG_EXTENDED = 1;
const REG_NOSUB = 8;

const cstr = (s: string) => Buffer.from(s + "\0");

/** A compiled ERE; `test` matches like regexec. Call `free` when done. */
export interface PosixRegex {
  test(s: string): boolean;
  free(): void;
}

/**
 * Compile an extended regular expression with glibc's regcomp.
 * @throws KerncapError E_USAGE with regcomp's own message for an invalid pattern.
 */
export function compileEre(pattern: string): PosixRegex {
  const lib = libc();
  const re = new Uint8Array(256); // regex_t is 64 bytes on glibc x86-64; room to spare
  const r = lib.regcomp(re, cstr(pattern), REG_EXTENDED | REG_NOSUB);
  if (r !== 0) {
    const msg = new Uint8Array(256);
    lib.regerror(r, re, msg, 256);
    const text = new TextDecoder().decode(msg.subarray(0, msg.indexOf(0)));
    throw new KerncapError("E_USAGE", `--kernel ${JSON.stringify(pattern)} is not a valid POSIX extended regex: ${text}`, {
      hint: "The pattern is matched with regcomp(REG_EXTENDED): use [0-9] for \\d, no (?:…) or lookarounds; quote it for the shell.",
    });
  }
  return {
    test: (s: string) => lib.regexec(re, cstr(s), 0, null, 0) === 0,
    free: () => lib.regfree(re),
  };
}
