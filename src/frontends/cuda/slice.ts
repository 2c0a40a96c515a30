/**
 * Slices of a CUDA TU: the source that build.sh compiles instead of the whole TU, so that an edit
 * rebuilds only what the captured kernel needs.
 *
 * Two kinds (SliceMeta.kind):
 * - "instantiation" (a kernel template defined in a header): the TU's preprocessor lines, then an
 *   odr-use `&qualified<args>` that makes nvcc instantiate and emit exactly that kernel. Made only
 *   where the TU's own code, which it leaves out, adds nothing the kernel can see
 *   (./slice-lookup.ts instantiationHazard).
 * - "prefix" (a non-template kernel, or a template defined in the TU itself): the TU's text up to
 *   and including the kernel's definition (when the TU defines it) or the `#include` that brings
 *   the definition file in (when a header does), with the bodies of the other `__global__`
 *   functions in that text blanked to declarations, open `#if` blocks and braces (namespaces,
 *   `extern "C" {`) closed again, and for a template the same odr-use line.
 *   Why a prefix: C++ needs every name declared before its use, so nothing after the definition
 *   can be needed by a non-template kernel (a `__device__` function only declared before it and
 *   defined after it is the exception: that slice does not build and build.sh falls back). A
 *   template's dependent call is looked up again where the TU ends, a specialization after a
 *   template's use changes what it instantiates, a class completed after it changes a trait: a TU
 *   whose text after the kernel (or a project header only that text includes) declares a name the
 *   code before names is not sliced (./slice-lookup.ts sliceHazard), lest the slice compile another
 *   kernel than the TU. Why blank the other kernels: a non-template `__global__` is always
 *   emitted, so every kernel left in the text costs front-end, NVVM and ptxas time; a body stays
 *   where the text after it declares what it names (bodyStays: the templates it instantiates
 *   first would be instantiated later in the slice). Kernels inside included headers stay (the
 *   headers are the editable copies under src/ and are compiled as they are). The slice's
 *   `__FILE__` (its `#line`) and `__BASE_FILE__` (build.sh's -D) are the TU's.
 *
 * The slice is made from the TU copy under src/ and carries that text's SHA-256 on its first
 * line (`// kerncap slice of src/<tu> sha256=<hex> body=<hex>`: body is the SHA-256 of the lines
 * after it, so an edit by hand shows: sliceEditedByHand), then `#line 1 "src/<tu>"` so that compiler
 * messages name the editable file with its own line numbers (blanked bodies keep their newlines).
 * build.sh compiles the slice only while that hash matches the TU copy (otherwise the whole TU,
 * saying why); `kerncap validate` remakes a stale slice first (refreshSlice). A slice edited by
 * hand is never remade over the edit (E_SLICE_EDITED), and build.sh compiles it with no fallback to
 * the whole TU (its error is the edit's). The two hashes have no key, so they tell kerncap's slice
 * only from an honest edit: a confined build (validate --confine, kerncap mcp; every eval candidate)
 * compiles the slice made anew from the TU in its private copy, and an eval candidate carrying
 * another is refused (./slice-confined.ts).
 */
import { escapeForTerminal } from "../../escape.ts";
import { existsSync, lstatSync, lutimesSync, readdirSync, readFileSync } from "node:fs";
import { dirname, isAbsolute, join, relative, resolve } from "node:path";
import * as v from "valibot";
import { KerncapError } from "../../errors.ts";
import type { Manifest } from "../../format/manifest.ts";
import { MANIFEST_MAX_BYTES, readInCapture, relativePathProblem, writeInCapture } from "../../format/paths.ts";
import { log } from "../../log.ts";
import { sayBeforeBuild } from "../build-notes.ts";
import { kernelNameParts, type KernelNameParts } from "./kernel-name.ts";
import { bodyStays, instantiationHazard, sliceHazard, type SliceContext } from "./slice-lookup.ts";
import { flagDefinesOf, systemHeaders } from "./slice-directives.ts";
import { codeMask } from "./code-mask.ts";
import { withSystemFacts } from "./system-facts.ts";

export interface SliceMeta {
  kind: "instantiation" | "prefix";
  /** The TU copy the slice is made from and the slice file, relative to src/. */
  tu: string;
  slice: string;
  /** Kernel base name (`tiled_apply`) and, for templates, the qualified instantiation to odr-use. */
  base: string;
  odrUse?: string;
  /** prefix kind, kernel defined in a header: the TU's `#include` line that brings it in (trimmed). */
  cutInclude?: string;
  /** Basename of the definition file, for the comment at the top. */
  definitionName: string;
}

/** The end of a slice file's name (sliceFileFor). */
const SLICE_SUFFIX = ".kerncap-slice.cu";

/** The slice file of a TU copy (relative to src/): `main.cu` → `main.kerncap-slice.cu`, beside it. */
export function sliceFileFor(tuRel: string): string {
  return tuRel.replace(/(\.[^./]+)?$/, SLICE_SUFFIX);
}

/** Whether a path (relative to src/ or to the capture folder) names a slice file kerncap generates from its TU: `*.kerncap-slice.cu`. */
export function isSliceFile(rel: string): boolean {
  const name = rel.split("/").pop() ?? "";
  return name.endsWith(SLICE_SUFFIX) && name.length > SLICE_SUFFIX.length;
}

/** A file name under src/ that can be pasted into a `#line "…"` directive and a `//` comment. */
const SrcPath = v.pipe(
  v.string(),
  v.regex(/^[^\x00-\x1f\x7f"\\]+$/, "expected a file name without quotes, backslashes or control characters"),
  v.check((p) => relativePathProblem(p) === undefined, "expected a path relative to src/, inside it"),
);
/** Balanced `<>`, `()` and `[]`, as a demangled name has them. */
function balanced(s: string): boolean {
  const open = "<([",
    close = ">)]";
  const stack: string[] = [];
  for (const c of s) {
    if (open.includes(c)) stack.push(close[open.indexOf(c)]!);
    else if (close.includes(c) && stack.pop() !== c) return false;
  }
  return stack.length === 0;
}
/**
 * What kerncap itself writes as SliceMeta (planSliceMeta): every field that a slice or its comments
 * paste is held to it, so that a received manifest cannot write outside src/ or put a line of its
 * own (a `#include`, a directive) into a generated source.
 */
const SliceMetaSchema = v.pipe(
  v.object({
    kind: v.picklist(["instantiation", "prefix"]),
    tu: SrcPath,
    slice: SrcPath,
    base: v.pipe(v.string(), v.regex(/^[A-Za-z_][A-Za-z0-9_]*$/, "expected a C++ identifier")),
    // a demangled qualified name on one line: identifiers, ::, template arguments (types, numbers, casts)
    odrUse: v.optional(
      v.pipe(
        v.string(),
        v.regex(/^[A-Za-z0-9_:<>,()*&[\]. +-]+$/, "expected a qualified C++ name with template arguments"),
        v.check(balanced, "expected balanced <>, () and []"),
      ),
    ),
    cutInclude: v.optional(
      v.pipe(v.string(), v.regex(/^#[ \t]*include[ \t]*(?:"[^"\x00-\x1f\x7f\\]+"|<[^>\x00-\x1f\x7f\\]+>)[^\x00-\x1f\x7f\\]*$/, "expected one #include line")),
    ),
    definitionName: v.pipe(
      v.string(),
      v.regex(/^[^\x00-\x1f\x7f/\\]+$/, "expected a file name"),
      v.check((n) => n !== "." && n !== "..", "expected a file name"),
    ),
  }),
  v.check((m) => m.slice === sliceFileFor(m.tu), "slice is not the name kerncap gives a TU's slice (<tu>.kerncap-slice.cu beside it)"),
  v.check((m) => m.odrUse === undefined || kernelNameParts(m.odrUse).base === m.base, "odrUse does not name the kernel base names"),
);

/**
 * A slice's meta as a manifest records it (source.cuda.slice.meta), checked against what
 * planSliceMeta writes: file names under src/ without quotes or control characters, the slice
 * beside its TU, an identifier, a one-line qualified name and #include line.
 * @throws KerncapError E_MANIFEST (exit 2) naming the field
 */
export function checkSliceMeta(meta: unknown, where = "kerncap.json"): SliceMeta {
  const r = v.safeParse(SliceMetaSchema, meta, { abortEarly: true });
  if (r.success) return r.output;
  const i = r.issues[0]!;
  const field = `source.cuda.slice.meta${v.getDotPath(i) ? `.${v.getDotPath(i)}` : ""}`;
  throw new KerncapError(
    "E_MANIFEST",
    // the issue's message quotes the received value as it is (adversary 90 #05: a newline in meta.kind printed a line of its own)
    `${where} is malformed: ${escapeForTerminal(field, { oneLine: true })} ${i.input === undefined ? "is missing" : `is ${escapeForTerminal(JSON.stringify(i.input).slice(0, 120), { oneLine: true })}`}: ${escapeForTerminal(i.message, { oneLine: true })}`,
    {
      hint: "kerncap writes no such value; the manifest was edited or made elsewhere. Capture again, or remove source.cuda.slice from kerncap.json (build.sh then compiles the whole TU).",
    },
  );
}

export type SliceText = { ok: true; text: string } | { ok: false; reason: string };

/** SHA-256 (hex) of a text as UTF-8, the value `sha256sum` prints for the file. */
export function sha256Text(text: string): string {
  return new Bun.CryptoHasher("sha256").update(text).digest("hex");
}

// lexing: ./code-mask.ts
export { codeMask } from "./code-mask.ts";

/** A `__global__` function definition: its name, and the offsets of its body's `{` and `}`. */
export interface KernelDef {
  name: string;
  start: number;
  open: number;
  close: number;
}

/**
 * Every `__global__` function definition written out in the text (not those a macro expands to):
 * the name is the identifier before the last parenthesised group ahead of the body (so
 * `__launch_bounds__(256)` is skipped). Declarations (`…);`) are not listed.
 */
export function kernelDefinitions(text: string, mask = codeMask(text)): KernelDef[] {
  const defs: KernelDef[] = [];
  const re = /\b__global__\b/g;
  for (let m = re.exec(mask); m; m = re.exec(mask)) {
    let i = m.index + m[0].length;
    let depth = 0;
    let lastGroup = -1;
    for (; i < mask.length; i++) {
      const c = mask[i]!;
      if (c === "(") {
        if (depth === 0) lastGroup = i;
        depth++;
      } else if (c === ")") depth--;
      else if (depth === 0 && (c === "{" || c === ";" || c === "}")) break;
    }
    if (mask[i] !== "{" || lastGroup < 0) continue;
    const name = /([A-Za-z_][A-Za-z0-9_]*)\s*(?:<[^()]*>)?\s*$/.exec(mask.slice(Math.max(0, lastGroup - 400), lastGroup))?.[1];
    const open = i;
    let d = 0;
    for (; i < mask.length; i++) {
      if (mask[i] === "{") d++;
      else if (mask[i] === "}" && --d === 0) break;
    }
    if (!name || i >= mask.length) continue;
    defs.push({ name, start: m.index, open, close: i });
    re.lastIndex = i;
  }
  return defs;
}

/** The text with each body replaced by `;` (its newlines kept, so line numbers do not move). */
export function blankBodies(text: string, defs: KernelDef[]): string {
  let out = "";
  let at = 0;
  for (const d of [...defs].sort((a, b) => a.open - b.open)) {
    out += text.slice(at, d.open) + ";" + text.slice(d.open, d.close + 1).replace(/[^\n]/g, "");
    at = d.close + 1;
  }
  return out + text.slice(at);
}

/** `#endif`s and `}`s that close what is still open at the end of a prefix (in that order). */
function closers(prefix: string, mask: string): string {
  let ifs = 0;
  for (const line of prefix.split("\n")) {
    if (/^\s*#\s*if(n?def)?\b/.test(line)) ifs++;
    else if (/^\s*#\s*endif\b/.test(line)) ifs = Math.max(0, ifs - 1);
  }
  let braces = 0;
  for (const c of mask) {
    if (c === "{") braces++;
    else if (c === "}") braces = Math.max(0, braces - 1);
  }
  return [...Array(braces).fill("}"), ...Array(ifs).fill("#endif")].join("\n");
}

// ───────────────────────────── slices ─────────────────────────────

/** Can a qualified name be written in source (no lambdas, anonymous namespaces, unnamed types)? */
export function writableName(qualified: string): boolean {
  return !/\{lambda|\(anonymous namespace\)|\{unnamed|'lambda|\$_/.test(qualified);
}

/** The meta of a slice for a located kernel, or why there is none. */
export function planSliceMeta(
  names: KernelNameParts,
  tuRel: string,
  definitionIsTu: boolean,
  definitionName: string,
  cutInclude: string | undefined,
): { meta?: SliceMeta; reason?: string } {
  const slice = sliceFileFor(tuRel);
  // its name is pasted into the slice's __BASE_FILE__ (build.sh), which nvcc passes through a shell
  if (!/^[A-Za-z0-9._+/-]+$/.test(tuRel)) return { reason: `the TU's path (${tuRel}) holds characters other than letters, digits and ._+/-` };
  const template = names.templateArgs !== undefined;
  if (template && !writableName(names.qualified)) return { reason: `its template arguments name types that cannot be written in source (${names.qualified})` };
  const odrUse = template ? names.qualified : undefined;
  if (template && !definitionIsTu) return { meta: { kind: "instantiation", tu: tuRel, slice, base: names.base, odrUse, definitionName } };
  if (!definitionIsTu && !cutInclude) return { reason: `no #include of the TU was found to lead to ${definitionName}` };
  return { meta: { kind: "prefix", tu: tuRel, slice, base: names.base, odrUse, definitionName, ...(definitionIsTu ? {} : { cutInclude }) } };
}

/**
 * The slice text for the TU's current text, or why it cannot be made. `context`: the project's
 * headers (projectHeaders), which the prefix kind's hazards read (./slice-lookup.ts sliceHazard).
 */
export function sliceText(meta: SliceMeta, tuText: string, context?: SliceContext): SliceText {
  const made = sliceBody(meta, tuText, context);
  if (!made.ok) return made;
  return { ok: true, text: `// kerncap slice of src/${meta.tu} sha256=${sha256Text(tuText)} body=${sha256Text(made.text)}\n${made.text}` };
}

/**
 * Whether the slice text `text` was changed after kerncap made it: its first line's body= hash
 * differs from the SHA-256 of the lines after it. A slice with no body= (made by an older kerncap)
 * or with no first line: false.
 */
export function sliceEditedByHand(text: string): boolean {
  const nl = text.indexOf("\n");
  const body = /^\/\/ kerncap slice of .* body=([0-9a-f]{64})$/.exec(nl < 0 ? text : text.slice(0, nl))?.[1];
  return body !== undefined && sha256Text(nl < 0 ? "" : text.slice(nl + 1)) !== body;
}

/** The slice's text after its first line (sliceText adds that line with both hashes). */
function sliceBody(meta: SliceMeta, tuText: string, context: SliceContext | undefined): SliceText {
  const head: string[] = [];
  const odr = meta.odrUse
    ? ["", `// taking its address makes nvcc instantiate and emit exactly the captured kernel`, `void* kerncap_captured_kernel = (void*)&${meta.odrUse};`]
    : [];
  if (meta.kind === "instantiation") {
    // the TU's own code is left out: it must add nothing the kernel can see (./slice-lookup.ts instantiationHazard)
    const hazard = instantiationHazard(tuText, codeMask(tuText), context);
    if (hazard) return { ok: false, reason: `src/${meta.tu} ${hazard}: a slice of the one instantiation could compile another kernel than the TU` };
    const lines = tuText.split("\n");
    const keep: string[] = [];
    for (let i = 0; i < lines.length; i++) {
      if (!/^\s*#/.test(lines[i]!)) continue;
      keep.push(lines[i]!);
      while (lines[i]!.endsWith("\\") && i + 1 < lines.length) keep.push(lines[++i]!);
    }
    return {
      ok: true,
      text: [
        ...head,
        `// Generated by kerncap: the preprocessor lines of src/${meta.tu}, then the one instantiation that was captured.`,
        `// Edit the kernel in its definition file (src/…/${meta.definitionName}), not here.`,
        ...keep,
        ...odr,
        "",
      ].join("\n"),
    };
  }
  const mask = codeMask(tuText);
  const defs = kernelDefinitions(tuText, mask);
  let end: number;
  if (meta.cutInclude === undefined) {
    const own = defs.filter((d) => d.name === meta.base);
    if (!own.length) return { ok: false, reason: `src/${meta.tu} no longer defines __global__ ${meta.base} in its own text` };
    end = own[own.length - 1]!.close + 1;
  } else {
    const lines = tuText.split("\n");
    let at = 0;
    let found = -1;
    for (const line of lines) {
      if (line.trim() === meta.cutInclude && mask.slice(at, at + line.length).trim() === "") {
        found = at + line.length;
        break;
      }
      at += line.length + 1;
    }
    if (found < 0) return { ok: false, reason: `src/${meta.tu} no longer has the line ${meta.cutInclude}` };
    end = found;
  }
  // what comes after the cut and could change the kernel the TU compiles (a template's dependent call is looked up
  // again where the TU ends; a specialization after its use): no slice, the whole TU (adversaries 39, 40)
  const hazard = sliceHazard(tuText, mask, end, context);
  if (hazard) return { ok: false, reason: `src/${meta.tu} ${hazard}: a slice cut at the kernel could compile another kernel than the TU` };
  // a kernel that the captured one launches (dynamic parallelism) keeps its body
  const ownBodies = defs.filter((d) => d.name === meta.base).map((d) => mask.slice(d.open, d.close));
  const launched = (name: string) => ownBodies.some((b) => new RegExp(`\\b${name}\\b`).test(b));
  // a body whose templates' first instantiation could differ at the kernel's point stays (./slice-lookup.ts bodyStays)
  const others = defs.filter((d) => d.name !== meta.base && d.close < end && !launched(d.name) && !bodyStays(tuText, mask, d.open, d.close + 1, end));
  const prefix = blankBodies(tuText.slice(0, end), others);
  const close = closers(tuText.slice(0, end), mask.slice(0, end));
  return {
    ok: true,
    text: [
      ...head,
      `#line 1 "src/${meta.tu}"`,
      prefix,
      `// ── kerncap: src/${meta.tu} ends here for the slice; ${others.length} other kernel bodies above were left out ──`,
      ...(close ? [close] : []),
      ...odr,
      "",
    ].join("\n"),
  };
}

/** What refreshSlice did; `later` (with `defer`): the check of an unchanged slice, still to run (what it did then). */
export interface SliceRefresh {
  action: "fresh" | "remade" | "removed" | "no-tu";
  reason?: string;
  editedByHand?: boolean;
  later?: () => SliceRefresh;
}

/**
 * Remake the slice of a reproducer when its TU copy changed since (first-line hash): called by
 * `kerncap validate` before build.sh. A slice that can no longer be made is removed, so build.sh
 * compiles the whole TU (and says so). `meta` is checked first (checkSliceMeta); the TU is read and
 * the slice written through the capture path rule (src/format/paths.ts: no link followed, the
 * slice written to a temporary file and renamed). A slice stamped with the TU's hash is checked
 * to be what kerncap makes from it (else replaced); with `defer`, that check (0.1–0.5 s for llm.c)
 * is returned as `later`, for the caller to run while a compiler runs, before build.sh starts and
 * before a build that began meanwhile is used (src/rebuild/rebuilder.ts).
 * @returns what was done, for the log.
 * @throws KerncapError E_MANIFEST (meta), E_UNSAFE_PATH (src/<tu> or the slice a link, a FIFO …)
 */
export function refreshSlice(dir: string, metaIn: unknown, o: { defer?: boolean } = {}): SliceRefresh {
  const meta = checkSliceMeta(metaIn);
  const tuBytes = readInCapture(dir, `src/${meta.tu}`, MANIFEST_MAX_BYTES);
  if (!tuBytes) return { action: "no-tu" };
  const tuText = tuBytes.toString("utf8");
  const want = sha256Text(tuText);
  const slicePath = `src/${meta.slice}`;
  const old = readInCapture(dir, slicePath, MANIFEST_MAX_BYTES);
  const head = old?.subarray(0, 200).toString("utf8");
  // `sha256=… ` (body= after it) or an older kerncap's slice (no body=)
  if (old && head && (head.includes(`sha256=${want} `) || head.includes(`sha256=${want}\n`))) {
    // kerncap's slice of this text: build.sh compiles it (an edit by hand, its body= stamp differing, is said by build.sh)
    const text = old.toString("utf8");
    sameTimestamp(dir, meta);
    if (sliceEditedByHand(text)) return { action: "fresh", editedByHand: true };
    const check = (): SliceRefresh => {
      const problem = withSystemFacts(() => sliceProblem(meta, text, tuText, projectHeaders(dir, meta)));
      if (!problem) return { action: "fresh" };
      // its stamps say kerncap made it from this TU, and it is not what kerncap makes: stamps written over another text,
      // never an edit by hand (that one's body= differs): replaced
      const r = remakeSlice(dir, meta, tuText, true); // said once done (a write that fails replaced nothing: adversary 72)
      log.warn(
        `${problem}: replaced by ${r.action === "remade" ? "the slice kerncap makes from" : "a slice not made, so build.sh compiles the whole"} src/${meta.tu}`,
      );
      return r;
    };
    return o.defer ? { action: "fresh", later: check } : check();
  }
  if (old && sliceEditedByHand(old.toString("utf8")))
    throw new KerncapError(
      "E_SLICE_EDITED",
      `src/${meta.slice} was edited by hand, and src/${meta.tu} changed since the slice was made from it: remaking the slice (as validate does after a change of its TU) would lose that edit; nothing was built`,
      {
        hint: `Keep one of the two edits: carry the slice's edit over to src/${meta.tu}${meta.definitionName !== meta.tu ? ` (or to the kernel's definition file, ${meta.definitionName})` : ""} and delete src/${meta.slice} (the next validate makes it again), or undo the change of src/${meta.tu}.`,
      },
    );
  return remakeSlice(dir, meta, tuText, Boolean(old));
}

/** The slice kerncap makes from `tuText` written in place of src/<slice> (`old`: there is one), or a "not made" one where it cannot be made. */
function remakeSlice(dir: string, meta: SliceMeta, tuText: string, old: boolean): SliceRefresh {
  const slicePath = `src/${meta.slice}`;
  const s = withSystemFacts(() => sliceText(meta, tuText, projectHeaders(dir, meta)));
  if (!s.ok) {
    if (old) writeInCapture(dir, slicePath, notMadeText(meta, s.reason));
    return { action: "removed", reason: s.reason };
  }
  writeInCapture(dir, slicePath, s.text);
  sameTimestamp(dir, meta);
  return { action: "remade" };
}

/**
 * The slice's modification time set to its TU's, so that `__TIMESTAMP__` (the main file's time)
 * reads the same in the slice as in the whole TU (adversary 44). No link followed (lutimes); a
 * failure leaves the time as it is.
 */
function sameTimestamp(dir: string, meta: SliceMeta): void {
  try {
    const tu = lstatSync(join(dir, "src", meta.tu));
    if (tu.isFile()) lutimesSync(join(dir, "src", meta.slice), tu.atime, tu.mtime);
  } catch {
    // the slice's own time: __TIMESTAMP__ then differs, nothing else
  }
}

/** The most bytes of headers projectHeaders reads (past it, no slice: see there). */
const HEADERS_MAX_BYTES = 64 << 20;

/**
 * The project's headers under `dir`'s src/ as a slice's hazards read them (SliceContext): every
 * regular file there but the TU and the slices, by the capture path rule (no link followed); past
 * HEADERS_MAX_BYTES in all, `incomplete` (no slice: what was not read could change the kernel).
 */
export function projectHeaders(dir: string, meta: Pick<SliceMeta, "tu">): SliceContext {
  const headers: SliceContext["headers"] = [];
  let bytes = 0;
  let names: string[] = [];
  try {
    names = readdirSync(join(dir, "src"), { recursive: true, encoding: "utf8" }).sort();
  } catch {
    return { headers };
  }
  for (const rel of names) {
    if (rel === meta.tu || isSliceFile(rel)) continue;
    let b: Buffer | undefined;
    try {
      if (!lstatSync(join(dir, "src", rel)).isFile()) continue;
      b = readInCapture(dir, `src/${rel}`, HEADERS_MAX_BYTES);
    } catch {
      continue; // a link, a FIFO, another user's file: build.sh's rules say what it reads
    }
    if (!b) continue;
    bytes += b.length;
    if (bytes > HEADERS_MAX_BYTES) return { headers, incomplete: true };
    const text = b.toString("utf8");
    headers.push({ rel, text, mask: codeMask(text) });
  }
  return { headers, system: systemHeaders, flagDefines: flagDefinesOf(dir) };
}

/** The slice file kerncap leaves where a TU cannot be sliced: a first line whose sha256= names no TU (build.sh then compiles the whole TU), and why. */
export function notMadeText(meta: SliceMeta, reason: string): string {
  return `// kerncap slice of src/${meta.tu} sha256=none\n// not made: ${reason}\n`;
}

/**
 * Why the slice text `slice` would be compiled although kerncap did not make it from `tuText`, as a
 * phrase (or undefined): its first line is not kerncap's, it was edited by hand (sliceEditedByHand),
 * or it is stamped with the TU's sha256 (build.sh's test) but is not what kerncap makes from that
 * text. A slice kerncap made from another text of the TU (stale: the build makes it again, as
 * validate does) and the "not made" slice are not problems.
 */
export function sliceProblem(meta: SliceMeta, slice: string, tuText: string | undefined, context?: SliceContext): string | undefined {
  const nl = slice.indexOf("\n");
  const first = nl < 0 ? slice : slice.slice(0, nl);
  const head = `// kerncap slice of src/${meta.tu} sha256=`;
  const stamp = first.startsWith(head) ? /^(none|[0-9a-f]{64})(?: body=[0-9a-f]{64})?$/.exec(first.slice(head.length))?.[1] : undefined;
  if (stamp === undefined) return `src/${meta.slice} does not start with the line kerncap writes (// kerncap slice of src/${meta.tu} sha256=…)`;
  if (sliceEditedByHand(slice)) return `src/${meta.slice} was edited by hand (its text is not the one the body= on its first line names)`;
  if (tuText === undefined || stamp !== sha256Text(tuText)) return undefined;
  const made = sliceText(meta, tuText, context);
  if (!made.ok) return `src/${meta.slice} is stamped as made from src/${meta.tu}, which kerncap cannot slice (${made.reason})`;
  const body = (t: string) => t.slice(t.indexOf("\n") + 1);
  return body(made.text) === body(slice) ? undefined : `src/${meta.slice} is stamped as made from src/${meta.tu} but is not what kerncap makes from it`;
}

/**
 * The files of src/ a CUDA reproducer's build.sh compiles whatever the edit (relative to src/): the
 * TU and the kernel's definition file (manifest.source.cuda: tu and definition, relative to its
 * projectRoot, which src/ mirrors); [] for a capture that records none.
 */
export function builtCudaSources(m: Pick<Manifest, "source">): string[] {
  const c = m.source?.cuda as { tu?: unknown; definition?: unknown; projectRoot?: unknown } | undefined;
  if (!c || typeof c.projectRoot !== "string") return [];
  const root = c.projectRoot;
  const rel = (f: unknown) => (typeof f === "string" ? relative(root, f) : "");
  return [...new Set([sliceMetaOf(m)?.tu ?? rel(c.tu), rel(c.definition)])].filter((f) => f && !f.startsWith("..") && !isAbsolute(f));
}

/** The slice a CUDA capture's reproducer was made with (manifest.source.cuda.slice.meta), if any. */
export function sliceMetaOf(m: Pick<Manifest, "source">): SliceMeta | undefined {
  return (m.source?.cuda as { slice?: { meta?: SliceMeta } } | undefined)?.slice?.meta;
}

/**
 * Frontend.beforeBuild of CUDA: remake the reproducer's slice when src/<tu>
 * was edited since it was made (the slice records its TU's sha256), or leave a "not made" slice
 * (build.sh then compiles the whole TU, said here) when the edited TU cannot be sliced. No-op for
 * an unsliced project. `confined` (a build for an agent: it compiles the whole TU of a prefix slice,
 * src/frontends/cuda/slice-confined.ts): a prefix slice in the capture becomes a "not made" one
 * (unless edited by hand), so that the capture's own build.sh compiles the whole TU, the kernel the
 * agent's build was judged by (adversary 48: a slice leaves out a later kernel's call of a helper the
 * kernel calls, and cicc specialises the helper for the one call it sees); the user's next validate
 * makes it again. A slice edited by hand is said here, before any build (the pruned build compiles
 * it without build.sh, whose note said it: a new user's finding), once (../build-notes.ts).
 * `defer`: the check of an unchanged slice (refreshSlice's `later`) returned, to run later; it
 * returns whether it changed the slice (a build begun before it must not be used then).
 */
export function remakeStaleSlice(dir: string, m: Manifest, o: { confined?: boolean; defer?: boolean } = {}): void | (() => boolean) {
  const meta = sliceMetaOf(m);
  if (!meta) return;
  if (o.confined && meta.kind === "prefix") {
    const slicePath = `src/${checkSliceMeta(meta).slice}`;
    const old = readInCapture(resolve(dir), slicePath, MANIFEST_MAX_BYTES);
    const why = "the last build was an agent's (confined): it compiled the whole TU, and so does build.sh here until validate makes the slice again";
    if (old && !sliceEditedByHand(old.toString("utf8")) && !old.subarray(0, 200).toString("utf8").includes("sha256=none"))
      writeInCapture(resolve(dir), slicePath, notMadeText(meta, why));
    return;
  }
  const said = (r: SliceRefresh) => {
    if (r.editedByHand)
      sayBeforeBuild(
        `kerncap: the slice src/${meta.slice} was edited by hand`,
        `the slice src/${meta.slice} was edited by hand: compiling it as it is (it is generated from src/${meta.tu}: once that file changes, validate refuses to remake it over your edit; delete the slice to compile the whole TU)`,
      );
    if (r.action === "remade") log.debug(`slice src/${meta.slice} remade from the edited src/${meta.tu}`);
    if (r.action === "removed") log.info(`no slice for the edited src/${meta.tu} (${r.reason}): the whole TU is compiled`);
    return r;
  };
  const r = said(refreshSlice(resolve(dir), meta, { defer: o.defer }));
  const later = r.later;
  if (later) return () => said(later()).action !== "fresh";
}
