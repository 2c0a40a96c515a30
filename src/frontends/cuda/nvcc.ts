/**
 * The nvcc kerncap runs (findNvcc) and nvcc's dependency listing of a TU with a command's flags
 * (dependencyArgv, parseDeps): shared by the locator, the reproducer, the includers' search and
 * the confined build.
 */
import { existsSync } from "node:fs";
import { buildChildEnv, reproducerBuildEnv, whichAbsolute } from "../../env.ts";
import { KerncapError } from "../../errors.ts";
import { type CudaFlags, flagArgv } from "./flags.ts";

/** Path of the nvcc that will compile ($NVCC, /usr/local/cuda/bin/nvcc, /usr/local/bin/nvcc, PATH; its toolkit root is two levels up). */
export function findNvcc(): string {
  const p = [process.env.NVCC, "/usr/local/cuda/bin/nvcc", "/usr/local/bin/nvcc", whichAbsolute("nvcc")].find((x): x is string => !!x && existsSync(x));
  if (!p) throw new KerncapError("E_NO_NVCC", "nvcc not found", { hint: "Install the CUDA toolkit or set NVCC to its nvcc." });
  return p;
}

/**
 * The nvcc a CUDA capture's build.sh (templates/cuda/build.sh.hbs) runs in the capture folder
 * `dir`: NVCC, else the first nvcc on the build's PATH (buildChildEnv's: no relative entry, none
 * inside the capture), else /usr/local/cuda/bin/nvcc. What validate --build-only names (Frontend.buildCompiler).
 */
export function buildShNvcc(dir: string): string {
  const env = buildChildEnv(reproducerBuildEnv({ force: false }), [dir]);
  return env.NVCC || whichAbsolute("nvcc", env.PATH) || "/usr/local/cuda/bin/nvcc";
}

/** `nvcc -M` of a TU with these flags, device pass for the arch (sm_90): make-style output on stdout. */
export function dependencyArgv(nvcc: string, tu: string, flags: CudaFlags, arch: string): string[] {
  return [nvcc, "-M", "-x", "cu", `-arch=${arch}`, ...flagArgv(flags), tu];
}

/**
 * The prerequisites of make-style dependency rules (`target: a b \` …: what `nvcc -M`, `-MD -MF`
 * and `gcc -M` write), as paths, each once, in order; targets are left out. Read as Make reads
 * them, with the escapes the compilers write:
 * - a backslash before a newline continues the line;
 * - a space or tab after 2N+1 backslashes is N backslashes and that character, part of the name
 *   (after 2N: N backslashes, and the space separates); a backslash before anything else is itself;
 * - `\#` is `#`; a `#` alone is part of a name, never a comment (neither compiler writes one, and
 *   nvcc writes a `#` of a name as it is);
 * - `$$` is `$` in gcc's list; nvcc (13.0) writes `$` as it is, so in its list (known by the space
 *   before its rule's colon: `k.cubin : k.cu \`) `$$` stays two.
 * A rule's colon is the first `:` of a line (outside an escape) followed by whitespace or the
 * line's end; a line without one names no prerequisite. nvcc writes a backslash of a path as `/`
 * and gcc cannot write a newline of one: such names are not read back as they are on disk.
 */
export function parseDeps(text: string): string[] {
  const out: string[] = [];
  let makeDollars: boolean | undefined; // `$$` for `$` (gcc); undefined until the first rule's colon says whose list it is
  for (const line of text.replace(/\\\r?\n/g, " ").split(/\r?\n/)) {
    let name = "";
    let rule = false;
    const end = () => {
      if (rule && name) out.push(name);
      name = "";
    };
    for (let i = 0; i < line.length; i++) {
      const c = line[i]!;
      if (c === "\\") {
        let n = 1;
        while (line[i + n] === "\\") n++;
        const next = line[i + n];
        if (next === " " || next === "\t") {
          name += "\\".repeat(n >> 1);
          if (n % 2) {
            name += next;
            i += n; // the escaped space, consumed
          } else i += n - 1; // the space separates: read next
        } else if (next === "#") {
          name += `${"\\".repeat(n - 1)}#`;
          i += n;
        } else {
          name += "\\".repeat(n);
          i += n - 1;
        }
      } else if (c === " " || c === "\t") end();
      else if (!rule && c === ":" && (i + 1 === line.length || /\s/.test(line[i + 1]!))) {
        makeDollars ??= !(name === "" && /[ \t]/.test(line[i - 1] ?? ""));
        name = ""; // a target
        rule = true;
      } else if (c === "$" && line[i + 1] === "$" && makeDollars) {
        name += "$";
        i++;
      } else name += c;
    }
    end();
  }
  return [...new Set(out)];
}
