/**
 * Whether a received capture's build.sh (and repro.py) is the one this kerncap's templates write,
 * and which programs, plugins and option files it names (docs/security.md, "What build.sh names").
 *
 * A build.sh rendered from a frontend's `build.sh.hbs` runs nvcc (hipcc, the capture's Python)
 * with text from the manifest only in the template's slots, each put through the escape of its
 * language (src/frontends/templates.ts). Matching a script against the template's structure (its
 * Handlebars parse, each slot a pattern of what that escape can produce) therefore says what it
 * can run: the template's own commands, plus whatever its `flags` words (the captured compile
 * command's) or its `python` name. Those words are read with the compiler's option syntax
 * (codeLoadingWords) so that a flag that runs a program or loads code (`-ccbin DIR`,
 * `-Xcompiler -fplugin=P`, `-B`, `--options-file`, `@file` in every spelling, …) is named with its path.
 *
 * A script that does not match is read only lexically (a best effort: shell words, variables that
 * name the build's folder dropped), for the flags it names and the capture files it mentions; the
 * trust gate then treats everything the build can reach as what runs (src/format/trust.ts).
 */
import Handlebars from "handlebars";
import type { BuildScriptReading, NamedProgram, RunFile } from "../format/what-runs.ts";
import type { TemplateFile } from "./templates.ts";
import { firstNonSetting, readsResponseFile } from "./compile-settings.ts";
import { escapeForTerminal } from "../escape.ts";

/** What each escape helper of src/frontends/templates.ts can produce, as a regular expression (no capture groups). */
const SLOT: Record<string, string> = {
  // shellQuote: a plain word, or single quotes with ' written '\''
  shq: String.raw`(?:[A-Za-z0-9_@%+=:,./-]+|'(?:[^']|'\\'')*')`,
  // one line of a comment: whatever it holds, it does not run
  shComment: String.raw`[^\n]*`,
  // inside "…": no $, `, \ or " but escaped
  dq: String.raw`(?:[^\n"$\x60\\]|\\[$\x60"\\])*`,
  // inside an unquoted heredoc, the image of its escape: a JSON string's body (printable ASCII but " and \; an escape
  // \" \\ \/ \b \f \n \r \t \uXXXX) with \, $ and ` escaped for the heredoc. A quote only after the escaped backslash
  // (a bare one ended the YAML string: adversary 62); ASCII only (a line that runs: slotsAgree's rule, here in the pattern
  // since {{#each}}'s slots are not captured)
  heredocYaml: String.raw`(?:[\x20\x21\x23\x25-\x5b\x5d-\x5f\x61-\x7e]|\\[$\x60]|\\\\(?:["/bfnrt]|\\\\|u[0-9a-fA-F]{4}))*`,
};
/**
 * The slots a compiler driver pastes into the shell lines of its steps (nvcc's and hipcc's `sh -c`,
 * inside double quotes: a source named `$(id).cu` runs `id`, whether or not the file exists) and
 * their pattern in kerncap's own build.sh: a plain word only (letters, digits and `._+/:-`, which a
 * shell leaves as they are; no `@`, `=` or `,`, which a driver may read as a file of options or a
 * list), every occurrence. The names of src/ are portable and an architecture is `sm_90` or
 * `gfx90a:xnack-`; a build.sh holding any other is no rendering of the template (adversary 55:
 * `tu="src/"'$(…).cu'` read as kerncap's own).
 */
const PASTED = new Set(["tuSource", "compiledSource", "originalSource", "arch"]);
const PLAIN_WORD = String.raw`[A-Za-z0-9_.+/:-]+`;
/** One word of the flags slot: shellQuote'd parts and the reproducer's `"$here/src"` (src/frontends/cuda/repro.ts word()). */
const FLAG_WORD = String.raw`(?:[A-Za-z0-9_@%+=:,./-]|'[^']*'|\\'|"\$here/src")+`;
/** The bare fields a build.sh template may print unescaped, and their patterns. */
const BARE: Record<string, string> = { flags: `(?:${FLAG_WORD}(?: ${FLAG_WORD})*)?` };
/** Slots whose text the reading returns (the first occurrence of each). */
const CAPTURED = new Set(["flags", "python"]);
/**
 * Slots whose value follows from another's in every rendering (src/frontends/cuda/repro.ts): the
 * slice's `-D__BASE_FILE__` names the TU. A slot any word fits is no check until it is tied to
 * what the template puts there (adversary 60: `{{shq sliceBaseFile}}` holding
 * `-Xcompiler=@src/x.rsp`, a file of gcc options that ran a wrapper, was read as kerncap's own).
 */
const DERIVED: Record<string, (v: ReadonlyMap<string, string>) => string | undefined> = {
  sliceBaseFile: (v) => (v.has("tuSource") ? `-D__BASE_FILE__="src/${v.get("tuSource")}"` : undefined),
};
/**
 * A character no rendering holds: every escape of src/frontends/templates.ts writes C0 controls
 * (but the newline), DEL, C1, format characters and line separators as text, and the templates hold
 * none (adversary 60: ESC and OSC 52 in a `dq` slot's echo reached the terminal of `make` in an export).
 */
const NOT_RENDERED = /[\x00-\x09\x0b-\x1f\x7f-\x9f\p{Cf}\p{Default_Ignorable_Code_Point}\u2028\u2029]/u;
/** A line longer than this is no template's (bytes): the matcher stays linear in practice. */
const MAX_LINE = 1 << 16;

const escapeRe = (s: string) => s.replace(/[.*+?^${}()|[\]\\/]/g, "\\$&");

/** One slot of the template outside `{{#each}}`: its capture group, the field it prints and the escape it prints it with. */
interface Slot {
  group: number;
  field: string;
  helper: string;
}
interface Compiled {
  re: RegExp;
  /** CAPTURED field → the group of its first slot. */
  groups: Map<string, number>;
  slots: Slot[];
}
const compiled = new Map<string, Compiled>();

/**
 * The regular expression of every text a Handlebars template can render to, with each slot the
 * pattern of its escape (SLOT, BARE); `{{#if}}` optional or alternative, `{{#each}}` repeated.
 * @throws Error for a slot the matcher does not know (a template changed without this file: a kerncap bug, caught by the tests)
 */
export function templatePattern(template: string, pasted: "plain" | "any" = "plain"): Compiled {
  const key = `${pasted}\0${template}`;
  const hit = compiled.get(key);
  if (hit) return hit;
  const groups = new Map<string, number>();
  const slots: Slot[] = [];
  let group = 0;
  let inEach = 0;
  // every slot outside {{#each}} is captured, to be decoded and compared with the others of its field (slotsAgree)
  const slot = (name: string, pattern: string, helper: string) => {
    if (inEach) return pattern;
    slots.push({ group: ++group, field: name, helper });
    if (CAPTURED.has(name) && !groups.has(name)) groups.set(name, group);
    return `(${pattern})`;
  };
  const walk = (program: hbs.AST.Program | undefined): string => {
    let out = "";
    for (const s of program?.body ?? []) {
      if (s.type === "ContentStatement") out += escapeRe((s as hbs.AST.ContentStatement).value);
      else if (s.type === "CommentStatement") continue;
      else if (s.type === "MustacheStatement") {
        const m = s as hbs.AST.MustacheStatement;
        const name = (m.path as hbs.AST.PathExpression).original;
        if (m.params.length) {
          const field = (m.params[0] as hbs.AST.PathExpression).original ?? "";
          const pattern = name === "shq" && pasted === "plain" && PASTED.has(field) ? PLAIN_WORD : SLOT[name];
          if (!pattern) throw new Error(`build.sh template: unknown helper ${name}`);
          out += slot(field, pattern, name);
        } else {
          const pattern = BARE[name];
          if (!pattern) throw new Error(`build.sh template: unescaped field ${name}`);
          out += slot(name, pattern, "bare");
        }
      } else if (s.type === "BlockStatement") {
        const b = s as hbs.AST.BlockStatement;
        const kind = (b.path as hbs.AST.PathExpression).original;
        if (kind === "each") inEach++;
        const body = walk(b.program);
        if (kind === "each") inEach--;
        if (kind === "each") out += `(?:${body})*`;
        else if (kind === "if" || kind === "unless") out += b.inverse ? `(?:${body}|${walk(b.inverse)})` : `(?:${body})?`;
        else throw new Error(`build.sh template: unknown block ${kind}`);
      } else throw new Error(`build.sh template: unknown statement ${s.type}`);
    }
    return out;
  };
  const c = { re: new RegExp(`^${walk(Handlebars.parse(template))}$`), groups, slots };
  compiled.set(key, c);
  return c;
}

/** A slot's text as the value its escape was given (SLOT's escapes undone). */
function decodeSlot(helper: string, raw: string): string {
  if (helper === "shq") return raw.startsWith("'") ? raw.slice(1, -1).replaceAll("'\\''", "'") : raw;
  if (helper === "dq") return raw.replace(/\\([$`"\\])/g, "$1");
  return raw;
}

/**
 * Whether the slots of a match could come from one rendering: every slot of a field holds the same
 * value (a source named one way in the compile and another in the message echoed), and each DERIVED
 * slot the value its field's rule gives.
 */
function slotsAgree(slots: readonly Slot[], m: RegExpExecArray, ascii: boolean): boolean {
  const values = new Map<string, string>();
  for (const s of slots) {
    const raw = m[s.group];
    if (raw === undefined) continue; // in an {{#if}} branch the text does not hold
    // a slot of a line that runs holds ASCII in every rendering of kerncap's (sources, architecture, flags, a version):
    // past it, a shell in a multi-byte locale reads a byte and the backslash or quote after it as one character
    if (ascii && s.helper !== "shComment" && /[^\x00-\x7f]/.test(raw)) return false;
    const v = decodeSlot(s.helper, raw);
    if (values.has(s.field) && values.get(s.field) !== v) return false;
    values.set(s.field, v);
  }
  return Object.entries(DERIVED).every(([field, rule]) => !values.has(field) || values.get(field) === rule(values));
}

/**
 * The slots of `text` when it is a rendering of `template` (CAPTURED slot → its text), else
 * undefined: a text with a character no rendering holds (NOT_RENDERED), or whose slots could not
 * come from one rendering (slotsAgree), is none.
 */
export function matchTemplate(
  template: string,
  text: string,
  pasted: "plain" | "any" = "plain",
  o: { ascii?: boolean } = {},
): Record<string, string> | undefined {
  if (text.split("\n").some((l) => l.length > MAX_LINE) || NOT_RENDERED.test(text)) return undefined;
  const { re, groups, slots } = templatePattern(template, pasted);
  const m = re.exec(text);
  if (!m || !slotsAgree(slots, m, o.ascii ?? true)) return undefined;
  return Object.fromEntries([...groups].map(([name, i]) => [name, m[i] ?? ""]));
}

/** The words of the flags slot (FLAG_WORD syntax) with their quotes removed; `"$here/src"` read as `./src` (the build's folder: the capture's src/). */
export function flagWords(text: string): string[] {
  const words: string[] = [];
  for (const w of text.match(new RegExp(FLAG_WORD, "g")) ?? []) {
    let v = "";
    for (const part of w.match(/'[^']*'|\\'|"\$here\/src"|[^'"\\]+/g) ?? []) {
      if (part.startsWith("'")) v += part.slice(1, -1);
      else if (part === "\\'") v += "'";
      else if (part === '"$here/src"') v += "./src";
      else v += part;
    }
    words.push(v);
  }
  return words;
}

/** Options that name a program to run (a bare name is looked up on PATH). `=`: also as `--opt=VALUE`; attached: `-BVALUE`. */
const PROGRAM_OPTS = new Set([
  "-ccbin",
  "--compiler-bindir",
  "-arbin",
  "--archiver-binary",
  "--ld-path",
  "-fuse-ld",
  "--gcc-toolchain",
  "-gcc-toolchain",
  "--hip-path",
  "--rocm-path",
  "-ccc-install-dir",
]);
/** Options that name a file the compiler loads as code or finds programs in (a relative path is the build's folder's); gcc reads `--prefix` as -B, `--plugin` as -fplugin. */
const FILE_OPTS = new Set(["-fplugin", "-fpass-plugin", "-load", "-plugin", "--plugin", "-iplugindir", "-B", "--prefix"]);
/** Options that name a file of more options (or gcc's specs, which name the programs it runs): refused wherever it lies, as `@file` is. */
const OPTIONS_FILE_OPTS = new Set(["-optf", "--options-file", "--config", "-specs", "--specs"]);
/** Options whose value is more options, for another program (nvcc: comma-separated; the -W?, forms too). */
const PASS_OPTS = new Set([
  "-Xcompiler",
  "--compiler-options",
  "-Xlinker",
  "--linker-options",
  "-Xarchive",
  "--archive-options",
  "-Xclang",
  "-mllvm",
  "-Xpreprocessor",
  "-Xassembler",
  "-Xnvlink",
  "--nvlink-options",
  "-Xptxas",
  "--ptxas-options",
  "-Xcudafe",
  // gcc's long spellings of -Xlinker and -Wa,
  "--for-linker",
  "--for-assembler",
]);
/** Options with no use in a reproducer's module build that run something else (nvcc -run runs the program it built). */
const RUN_OPTS = new Set([
  "-run",
  "--run",
  "-run-args",
  "--run-args",
  "-idp",
  "--input-drive-prefix",
  "-ddp",
  "--dependency-drive-prefix",
  "-dp",
  "--drive-prefix",
  // gcc -wrapper P,ARGS runs every compiler step as P ARGS …: `sh,src/x.cuh` runs a source as a script
  "-wrapper",
  "--wrapper",
]);

/** The file a word's response-file reference names (readsResponseFile): the text after its `@` up to a comma or space, quotes removed. */
function responseFileName(w: string): string {
  const m = /(?:^|[=,\s"'])@(?!$|[,\s])([^,\s]*)|^--?[A-Za-z][A-Za-z0-9_-]*@([^,\s]*)/.exec(w);
  return (m?.[1] ?? m?.[2] ?? "").replace(/["']/g, "");
}

/**
 * The programs, plugins and option files a compiler command's words name (nvcc's, gcc's and
 * clang's option syntax, into -Xcompiler/-Xlinker/-Wl,/-Wp,/-Xclang values), each with the option
 * that names it. `kind`: "program" (a bare name is looked up on PATH), "file" (a path, relative
 * to the build's folder), "options" (a file of more options: `@file` in every spelling, as the
 * value of any option too, `-isystem=@F`, `-DX=1,@F`, `-I@F`; `--options-file`, `-specs`),
 * "run" (an option a module build has no use for: refused as such). gcc's `--NAME` spelling of
 * `-fNAME` (`--plugin=P`) is read as it.
 */
export function codeLoadingWords(words: string[]): NamedProgram[] {
  const out: NamedProgram[] = [];
  const walk = (ws: string[]) => {
    for (let i = 0; i < ws.length; i++) {
      const w = ws[i]!;
      const eq = w.indexOf("=");
      const [given, inline] = w.startsWith("-") && eq > 0 ? [w.slice(0, eq), w.slice(eq + 1)] : [w, undefined];
      // gcc reads --NAME as -fNAME where -fNAME is an option (--plugin=P loads P)
      const opt = /^--[a-z]/.test(given) && [PROGRAM_OPTS, FILE_OPTS].some((s) => s.has(`-f${given.slice(2)}`)) ? `-f${given.slice(2)}` : given;
      const next = () => (inline !== undefined ? inline : ws[++i]);
      if (readsResponseFile(w)) {
        out.push({ flag: "@file", value: responseFileName(w), kind: "options" });
        if (w.startsWith("@")) continue;
      }
      if (RUN_OPTS.has(opt)) out.push({ flag: opt, value: inline ?? "", kind: "run" });
      else if (PROGRAM_OPTS.has(opt)) {
        const v = next();
        if (v !== undefined) out.push({ flag: opt, value: v, kind: "program" });
      } else if (FILE_OPTS.has(opt) || OPTIONS_FILE_OPTS.has(opt)) {
        const v = next();
        if (v !== undefined) out.push({ flag: opt, value: v, kind: FILE_OPTS.has(opt) ? "file" : "options" });
      } else if (PASS_OPTS.has(opt)) {
        // every value of this option in a row (clang's -Xclang -load -Xclang P.so), split at commas and spaces as nvcc and the shell do
        const values: string[] = [];
        for (let v: string | undefined = next(); v !== undefined; v = ws[i + 1] === opt ? ws[(i += 2)] : undefined)
          values.push(...v.split(/[,\s]+/).filter(Boolean));
        walk(values);
      } else if (/^-W[pla],/.test(w)) walk(w.slice(4).split(","));
      else if (/^-B./.test(w) && !/^-B(static|dynamic|symbolic.*|shareable|group|no-symbolic)$/.test(w))
        out.push({ flag: "-B", value: w.slice(2), kind: "file" }); // gcc's program prefix, not the linker's -Bstatic
    }
  };
  walk(words);
  // a value is read as a word and then as its option's list (`-Xcompiler=-I,@F`): each named once
  return out.filter((p, i) => out.findIndex((q) => q.flag === p.flag && q.value === p.value && q.kind === p.kind) === i);
}

/** Environment variables that make a program load code or find programs, as a build.sh may set them (`LD_PRELOAD=… nvcc`). */
const CODE_ENV = new Set([
  "LD_PRELOAD",
  "LD_AUDIT",
  "LD_LIBRARY_PATH",
  "PATH",
  "BASH_ENV",
  "ENV",
  "PYTHONPATH",
  "PYTHONSTARTUP",
  "PYTHONHOME",
  "NVCC_CCBIN",
  "COMPILER_PATH",
  "GCC_EXEC_PREFIX",
  "CC",
  "CXX",
  "NVCC",
  "HIPCC",
  "KERNCAP_PYTHON",
  "GCONV_PATH",
]);
const FLAG_ENV = new Set(["NVCC_PREPEND_FLAGS", "NVCC_APPEND_FLAGS", "EXTRA_FLAGS", "CFLAGS", "CXXFLAGS", "HIPCC_COMPILE_FLAGS_APPEND"]);

/**
 * The words of a shell script, read lexically (comments dropped; quotes removed; `$here/`,
 * `${here}/`, `$dir/` and the like, which name the script's folder, read as `./`). A best effort:
 * what a script computes at run time is not seen.
 */
export function scriptWords(text: string): string[] {
  const words: string[] = [];
  let cur = "";
  let has = false;
  const end = () => {
    if (has)
      words.push(
        cur
          .replace(/(^|[=:,])\$\{?(here|dir|DIR|HERE|PWD|root|ROOT|SCRIPT_DIR|script_dir)\}?\//g, "$1./")
          .replace(/(^|[=:,])\$\((dirname|cd|pwd)[^)]*\)\//g, "$1./"),
      );
    cur = "";
    has = false;
  };
  for (let i = 0; i < text.length; i++) {
    const c = text[i]!;
    if (c === "\\" && i + 1 < text.length) {
      if (text[i + 1] !== "\n") (cur += text[i + 1]), (has = true);
      i++;
    } else if (c === "'") {
      const j = text.indexOf("'", i + 1);
      cur += text.slice(i + 1, j < 0 ? undefined : j);
      has = true;
      i = j < 0 ? text.length : j;
    } else if (c === '"') {
      let j = i + 1;
      for (; j < text.length && text[j] !== '"'; j++) if (text[j] === "\\") j++;
      cur += text.slice(i + 1, j).replace(/\\([$`"\\])/g, "$1");
      has = true;
      i = j;
    } else if (c === "#" && !has) {
      const j = text.indexOf("\n", i);
      i = j < 0 ? text.length : j - 1;
    } else if (/[\s;&|()<>`]/.test(c)) end();
    else (cur += c), (has = true);
  }
  end();
  return words;
}

/**
 * What a non-template script names: the code-loading options among its words (codeLoadingWords),
 * the environment it sets for its commands (`VAR=VALUE`: CODE_ENV values as programs or paths,
 * FLAG_ENV values as more options), and every word that may be a path inside the build's folder.
 */
export function readScript(text: string): { programs: NamedProgram[]; named: string[] } {
  const words = scriptWords(text);
  const programs = codeLoadingWords(words);
  const named = new Set<string>();
  for (const w of words) {
    const a = /^(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)=(.*)$/s.exec(w);
    if (a && CODE_ENV.has(a[1]!))
      for (const v of a[2]!.split(":"))
        if (v) programs.push({ flag: `${a[1]}=`, value: v, kind: /^(CC|CXX|NVCC|HIPCC|NVCC_CCBIN|KERNCAP_PYTHON)$/.test(a[1]!) ? "program" : "file" });
    if (a && FLAG_ENV.has(a[1]!)) programs.push(...codeLoadingWords(scriptWords(a[2]!)));
    for (const part of (a ? a[2]! : w).split(/[=,:]/))
      if (part && !part.startsWith("-") && !part.startsWith("/") && !part.includes("$")) named.add(part.replace(/^(\.\/)+/, ""));
  }
  return { programs, named: [...named] };
}

/**
 * Why `bytes` (a build.sh) is no text kerncap writes, or undefined: bytes that are no UTF-8. In a
 * multi-byte locale (GBK, GB18030, Big5, Shift JIS) a byte of 0x81–0xFE and the `\` after it are
 * one character, so an escaped quote (`\x95\"`) ends the string and what follows is code
 * (adversary 61: a Triton build.sh read as kerncap's own ran its tritonVersion under
 * LANG=zh_CN.GBK); read as UTF-8, 0x95 was U+FFFD and the quote escaped. (Valid UTF-8 past ASCII
 * in a slot of a line that runs is refused by the matcher: slotsAgree.)
 */
function notUtf8(bytes: Buffer): string | undefined {
  try {
    new TextDecoder("utf-8", { fatal: true }).decode(bytes);
    return undefined;
  } catch {
    return "build.sh is not UTF-8 text, which every build.sh this kerncap writes is (a shell in a multi-byte locale such as GBK reads such bytes with the quote or backslash after them as one character)";
  }
}

/**
 * The reading of the files a build runs against a frontend's templates (the trust gate's hook,
 * src/format/what-runs.ts setBuildScriptReader): `stock` when build.sh is a rendering of its
 * `build.sh.hbs` whose flags are compile settings only (./compile-settings.ts) and every raw
 * template file present (Triton's repro.py) is the template's own bytes; the programs the stock slots name (the flags' code-loading options; the Python it runs);
 * otherwise why not, and what a lexical reading of build.sh names.
 */
export function readBuildScripts(templates: readonly TemplateFile[] | undefined, files: readonly RunFile[]): BuildScriptReading {
  const build = files.find((f) => f.name === "build.sh");
  const tpl = templates?.find((t) => t.path === "build.sh.hbs");
  const lexical = (why: string): BuildScriptReading => ({
    stock: false,
    why,
    ...(build ? readScript(build.bytes.toString("utf8")) : { programs: [], named: [] }),
  });
  for (const t of templates ?? []) {
    if (t.path.endsWith(".hbs")) continue;
    const f = files.find((x) => x.name === t.path);
    if (f && !f.bytes.equals(Buffer.from(t.text))) return lexical(`${t.path} is not the one this kerncap writes`);
  }
  if (!build) return { stock: true, programs: [], named: [] }; // Triton's files without a build.sh: kerncap's own repro.py runs them
  if (!tpl) return lexical("this kerncap has no build.sh template for the capture's frontend");
  const multibyte = notUtf8(build.bytes);
  if (multibyte) return lexical(multibyte);
  const control = NOT_RENDERED.exec(build.bytes.toString("utf8"));
  if (control)
    return lexical(
      `build.sh holds ${escapeForTerminal(control[0], { oneLine: true })}, a control or format character no build.sh this kerncap writes holds (its escapes write them as text: a terminal acts on them when the script echoes them)`,
    );
  const slots = matchTemplate(tpl.text, build.bytes.toString("utf8"));
  if (!slots && matchTemplate(tpl.text, build.bytes.toString("utf8"), "plain", { ascii: false }))
    return lexical(
      "build.sh holds a character past ASCII in a line that runs, which no build.sh this kerncap writes holds (a shell in a multi-byte locale such as GBK or Shift JIS may read it and the backslash or quote after it as one character)",
    );
  if (!slots)
    return lexical(
      matchTemplate(tpl.text, build.bytes.toString("utf8"), "any")
        ? "build.sh names a source or an architecture holding a character the compiler driver would paste into a shell line ($, a quote, a space…: nvcc and hipcc run their steps through sh -c), which no build.sh this kerncap writes holds"
        : "build.sh is not the one this kerncap writes (it does not match the frontend's build.sh template)",
    );
  const words = flagWords(slots.flags ?? "");
  const odd = firstNonSetting(words);
  if (odd !== undefined)
    return lexical(
      `build.sh's compile flags pass ${JSON.stringify(odd)}, an option kerncap does not know to be only a compile setting (it may write, run or read files of its own choosing)`,
    );
  const programs = codeLoadingWords(words);
  const py = slots.python !== undefined ? (flagWords(slots.python)[0] ?? "") : undefined;
  if (py) programs.push({ flag: "build.sh's Python", value: py, kind: "program" });
  return { stock: true, programs, named: [], flags: slots.flags ?? "", ...(py !== undefined ? { interpreter: py } : {}) };
}
