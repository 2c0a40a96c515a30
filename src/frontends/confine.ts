/**
 * The confined build of `kerncap mcp`'s validate (validate --confine): an MCP agent may edit src/
 * and ask for validate, and nothing else (docs/security.md), so its edits must not make the build
 * read a file elsewhere (`#include "/home/u/.ssh/id_rsa"`) and hand the file's lines back in the
 * compiler's messages.
 *
 * The compiler says what it read: build.sh's nvcc gets `-MD -MF build/kerncap-deps.d` through
 * EXTRA_FLAGS (templates/cuda/build.sh.hbs appends it to every compile; nvcc writes the list in its
 * own preprocessing step, before compiling, so a failing compile leaves it too: seen with nvcc 13.0).
 * Every file in it must lie in the capture's src/, be one of the project's files the capture recorded
 * as read (source.cuda.referencedOutsideRoot, readInPlace: by name, never the whole projectRoot), or lie in the toolchain's and
 * the system's include folders (toolchainHeader); links are resolved first. A build that read
 * another file is refused without a line of its output; a failed build's messages are reduced to
 * the diagnostics (file, line, the error's own text) of the capture's own files.
 */
import { listForTerminal } from "../escape.ts";
import { realpathSync } from "node:fs";
import { isAbsolute, relative, resolve, sep } from "node:path";
import { KerncapError } from "../errors.ts";
import type { Manifest } from "../format/manifest.ts";
import { receivedReasons } from "../format/received.ts";
import { findNvcc, parseDeps } from "./cuda/nvcc.ts";
import { toolchainHeader } from "./cuda/repro.ts";

/** The dependency list a confined build asks the compiler for, relative to the capture folder (bash splits EXTRA_FLAGS into words: no quoting). */
export const DEPS_FILE = "build/kerncap-deps.d";
/** What a confined build appends to EXTRA_FLAGS (nvcc and gcc spell it alike). */
export const CONFINE_FLAGS = `-MD -MF ${DEPS_FILE}`;

function real(p: string): string {
  try {
    return realpathSync(p);
  } catch {
    return p;
  }
}

const under = (p: string, root: string) => p === root || p.startsWith(root.endsWith(sep) ? root : root + sep);

/**
 * The files of a dependency list (make syntax, as `-MD -MF` writes it: ./cuda/nvcc.ts parseDeps)
 * that a confined build may not read, as the list names them. Allowed: the capture's src/, the
 * project's files the capture recorded (recordedSources), the toolchain's and the system's
 * include folders; and the build's own folders' sources: `ran.cwd`'s src/, the folder it ran in (default `dir`; a
 * build's private copy of the capture, src/format/staged-build.ts), against which a relative path
 * is read, and `ran.tmp`, its private TMPDIR (made for it alone, 0700), whose files build.sh and
 * nvcc made from those (a folder of links to the copy's src/ and build/, removed when build.sh
 * ends: judged by its path, written without `..`, which after a link climbs elsewhere than it says).
 */
export function outsideReads(dir: string, m: Pick<Manifest, "source">, depsText: string, ran: { cwd?: string; tmp?: string } = {}): string[] {
  const readable = confinedReadable(dir, m);
  const cwd = ran.cwd ?? dir;
  // of the folders the build ran in, the sources only: build/ holds earlier builds' logs, which quote what they read
  const own = [real(resolve(cwd, "src"))];
  const tmp = ran.tmp === undefined ? [] : [ran.tmp, real(ran.tmp)];
  const notBuild = (t: string, p: string) => !relative(t, p).split("/").includes("build");
  return parseDeps(depsText).filter((d) => {
    const p = resolve(cwd, d);
    const inTmp = !d.split("/").includes("..") && tmp.some((t) => (under(p, t) && notBuild(t, p)) || (under(real(p), t) && notBuild(t, real(p))));
    return !own.some((f) => under(real(p), f)) && !inTmp && !readable(p);
  });
}

/**
 * Whether a confined build may read the file at absolute path `p` (links resolved): it lies in the
 * capture's src/, is one of the project's files the capture recorded (recordedSources: by name, not
 * the project root's folder), or lies in the toolchain's or the system's include folders. A received
 * capture's manifest is the sender's: its lists widen nothing (a trial's named /home/victim).
 */
export function confinedReadable(dir: string, m: Pick<Manifest, "source">): (p: string) => boolean {
  // of the capture, its sources only: build/ holds what earlier builds wrote (a log that quotes the files a refused
  // build read), which an #include of it would hand back in the compiler's messages (a trial's two-step read)
  const roots = [real(resolve(dir, "src"))];
  const files = new Set(recordedSources(dir, m).files);
  let nvcc: string | undefined;
  try {
    nvcc = findNvcc();
  } catch {
    /* no toolkit: the system folders only */
  }
  const toolchain = toolchainHeader(nvcc);
  return (path: string) => {
    const p = real(path);
    return roots.some((r) => under(p, r)) || files.has(p) || toolchain(p);
  };
}

/**
 * What a confined build may read of the captured project, outside the capture (links resolved): the
 * files the capture recorded that the captured build read there, by name, never a folder:
 * source.cuda.referencedOutsideRoot (headers outside the project root) and source.cuda.readInPlace
 * (overlay mode: the project's headers read from the original tree). Not source.cuda.projectRoot:
 * the common folder of the TU and its headers, which can be the user's home (a TU in ~/proj and a
 * header in ~/include), all of which an #include would hand to the agent. None for a received
 * capture (its manifest is the sender's: a trial's named /home/victim).
 * @returns `files`, absolute and resolved
 */
export function recordedSources(dir: string, m: Pick<Manifest, "source">): { files: string[] } {
  const theirs = "kernel" in m && receivedReasons(dir, m as Manifest).length > 0;
  const cuda = (theirs ? {} : (m.source?.cuda ?? {})) as { referencedOutsideRoot?: unknown; readInPlace?: unknown };
  const list = (v: unknown) => (Array.isArray(v) ? v.filter((f): f is string => typeof f === "string" && isAbsolute(f)).map(real) : []);
  return { files: [...new Set([...list(cuda.referencedOutsideRoot), ...list(cuda.readInPlace)])] };
}

/** EDG (nvcc's front end: `f.cu(12): error: …`) and GCC (`f.cu:12:5: error: …`) diagnostics: file, line, column (GCC's), kind, text. */
/** The most characters of a diagnostic's text kept (a longer one is cut, ending in …). */
export const DIAGNOSTIC_TEXT_MAX = 2000;

const DIAGNOSTIC = [/^(.+?)\((\d+)\)(): ((?:catastrophic )?error|warning)(?: #[\w-]+)?: (.*)$/, /^(.+?):(\d+):(?:(\d+):)? ((?:fatal )?error|warning): (.*)$/];

/**
 * One compiler diagnostic of a failed build (kerncap.error/1 `error.details.diagnostics[]` of
 * E_BUILD, an eval record's `diagnostics`): `file` relative to the capture folder (src/k.cu) when it
 * lies inside, else absolute (an unconfined build's header elsewhere); `line` 1-based; `column`
 * 1-based (GCC's form) or null (nvcc's EDG form gives none); `severity` fatal for GCC's "fatal
 * error" and EDG's "catastrophic error" (the compile stopped there); `text` the message after it, one line.
 */
export interface Diagnostic {
  file: string;
  line: number;
  column: number | null;
  severity: "error" | "warning" | "fatal";
  text: string;
}

/** The most diagnostics a build error gives (kerncap.error/1 details.diagnostics). */
export const DIAGNOSTICS_MAX = 1000;

/**
 * The diagnostics in a build's output, in order, in both compilers' forms (EDG's `f.cu(12): error:
 * …`, nvcc's front end; GCC's `f.cu:12:5: fatal error: …`, its preprocessor and host compiler),
 * paths read against `dir` (the capture folder). `captureOnly` (a confined build): only those of
 * files under the capture's src/, so that nothing names or quotes a file elsewhere. At most
 * DIAGNOSTICS_MAX, the first (a line that warns 100 000 times filled a document with them:
 * adversary 63); each file's path resolved once.
 */
export function parseDiagnostics(dir: string, output: string, o: { captureOnly: boolean }): Diagnostic[] {
  const root = real(dir);
  const src = real(resolve(dir, "src"));
  const out: Diagnostic[] = [];
  const resolved = new Map<string, string>();
  for (const line of output.split("\n")) {
    if (out.length >= DIAGNOSTICS_MAX) break;
    for (const re of DIAGNOSTIC) {
      const d = re.exec(line);
      if (!d || d[1]!.length > 4096) continue; // a file name past PATH_MAX is none
      let p = resolved.get(d[1]!);
      if (p === undefined) resolved.set(d[1]!, (p = real(resolve(dir, d[1]!))));
      if (o.captureOnly && !under(p, src)) break;
      const kind = d[4]!;
      out.push({
        file: under(p, root) ? relative(root, p) : p,
        line: Number(d[2]),
        column: d[3] ? Number(d[3]) : null,
        severity: kind === "warning" ? "warning" : kind === "error" ? "error" : "fatal",
        // one line of the compiler's, cut where it runs on (a macro's expansion quoted whole: adversary 65 06)
        text: d[5]!.length > DIAGNOSTIC_TEXT_MAX ? `${d[5]!.slice(0, DIAGNOSTIC_TEXT_MAX)}…` : d[5]!,
      });
      break;
    }
  }
  return out;
}

/** A note of build.sh's that points at a log a confined build's reader cannot open: said what to read instead. */
const SLICE_LOG_NOTE = /\(its messages: [^)]*\)|\(nvcc failed on it: [^)]*\)/;

/**
 * A failed build's messages as the agent may see them: each diagnostic of a file under the capture's
 * src/ as `path:line: kind: text` (path relative to the folder), and build.sh's own `kerncap:`
 * notes; everything else (source lines quoted under a diagnostic, files elsewhere or under build/,
 * other output) is left out.
 */
export function captureDiagnostics(dir: string, output: string): string[] {
  const root = real(dir);
  const src = real(resolve(dir, "src"));
  const out: string[] = [];
  for (const line of output.split("\n")) {
    if (line.startsWith("kerncap: ")) {
      // the slice's own log is a build output, which MCP read_file does not read: the whole TU's messages, which
      // follow it when that fails too, are the ones to fix (nu10 #16: it sent the agent to a command line it has not)
      out.push(line.replace(SLICE_LOG_NOTE, "(its messages are not shown to a confined build: the whole TU's build, next, says any error to fix)"));
      continue;
    }
    for (const re of DIAGNOSTIC) {
      const d = re.exec(line);
      if (!d || d[1]!.length > 4096) continue; // a file name past PATH_MAX is none
      const p = real(resolve(dir, d[1]!));
      if (under(p, src)) out.push(`${relative(root, p)}:${d[2]}: ${d[4]}: ${d[5]}`);
      break;
    }
  }
  return out;
}

/**
 * E_CONFINED: the build read files outside what a confined build may read; names them, never their
 * content. `by`: what confined the build, in the caller's words ("kerncap eval", "validate
 * --confine"; default "a confined build"); `includedAt`: the #include lines under src/ that name
 * one of them (./confine-sources.ts includesNaming), which the hint points at; none: the hint says
 * the build reached them another way (a header it includes, build.sh's flags).
 */
export function confinedError(files: string[], o: { by?: string; includedAt?: string[] } = {}): KerncapError {
  const them = files.length > 1 ? "them" : "it";
  const readable =
    "files under src/, the toolchain's headers and, of the captured project, only the headers its capture recorded as read (not the rest of its source root)";
  return new KerncapError(
    "E_CONFINED",
    `the build read ${files.length} file${files.length > 1 ? "s" : ""} outside the capture folder, the project's recorded headers and the toolchain (${listForTerminal(files, 5)}), which ${o.by ?? "a confined build"} does not allow: the build was refused, its module is not used and none of its output is shown`,
    {
      hint: o.includedAt?.length
        ? `Remove the #include at ${listForTerminal(o.includedAt.slice(0, 3), 3)}: include only ${readable}.`
        : `No #include under src/ names ${them}: the build reached ${them} another way (a header it includes, a flag of build.sh), and a confined build reads only ${readable}. \`kerncap validate DIR\` (not confined) builds it on the command line.`,
    },
  );
}
