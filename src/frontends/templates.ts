/**
 * Reproducer templates (templates/<frontend>/), each frontend's embedded in the executable as text
 * by its own folder (src/frontends/<name>/templates.ts). In a source checkout the folder itself is
 * used; inside the compiled binary the embedded copies are written once to a content-hashed
 * folder of the cache (with their mode bits), so the renderers can walk a real folder either way.
 */
import Handlebars from "handlebars";
import { chmodSync, copyFileSync, existsSync, mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { join, relative, resolve } from "node:path";
import { cachedFolder, type CacheFile } from "../cache.ts";
import { shellQuote } from "../util/shell-quote.ts";
import { escapeForTerminal } from "../escape.ts";

/** One template file of a frontend: path under templates/<frontend>/, text, mode bits. */
export interface TemplateFile {
  path: string;
  text: string;
  mode: number;
}

/** The checkout's templates/ (absent inside the compiled binary). */
export const CHECKOUT_TEMPLATES = resolve(import.meta.dir, "../../templates");

const roots = new Map<string, string>();

export const cacheFiles = (files: readonly TemplateFile[]): CacheFile[] => files.map((t) => ({ path: t.path, bytes: t.text, mode: t.mode }));

/**
 * The folder of frontend `name`'s templates: the checkout's templates/<name>, or the cache's copy
 * of `files` (written at first use: importing a frontend writes nothing to the cache).
 */
export function templatesFolder(name: string, files: readonly TemplateFile[]): string {
  let dir = roots.get(name);
  if (dir) return dir;
  const checkout = join(CHECKOUT_TEMPLATES, name);
  dir = existsSync(checkout) ? checkout : cachedFolder(`templates-${name}`, cacheFiles(files));
  roots.set(name, dir);
  return dir;
}

let engine: typeof Handlebars | undefined;

/** A helper's text arguments joined (Handlebars passes its options object last). */
const joined = (args: unknown[]): string => args.slice(0, -1).map(String).join("");

/** One line of text with no control character, bidi control or line separator (src/escape.ts): the base of every language's escape below. */
const line = (s: string): string => escapeForTerminal(s, { oneLine: true });

/**
 * Escapes of text from a manifest (kernel names, paths, the command line, versions) for each
 * language a template writes; every template puts manifest text through one of them, so that a
 * name cannot end a comment, a string or a line and become code (a newline in a kernel name was
 * a command line of build.sh).
 * - shq A B…: one shell word (single-quoted when needed: src/util/shell-quote.ts).
 * - shComment A B…: text in a shell comment: one line.
 * - dq A B…: text inside a double-quoted shell string: one line, $ ` \ " escaped.
 * - heredocYaml A: the inside of a YAML double-quoted scalar within an unquoted bash heredoc
 *   (JSON string escapes, then $ ` \ escaped for the heredoc): one line, whatever it holds.
 * - mdCode A B…: a Markdown code span, fenced with more backticks than the text holds.
 * - mdCodeCell A B…: mdCode in a table row (its `|` escaped, as GFM reads a cell).
 * - mdText A B…: Markdown text: one line, the punctuation that Markdown reads backslash-escaped (no code, link, emphasis, table cell end, HTML; no heading or list at the line's start).
 * - mdBlock A B…: text in a fenced code block: one line (a fence cannot close mid-line).
 * - pyStr A B…: a Python string literal (double-quoted, every non-printable or non-ASCII character escaped).
 * - cStr A B…: a C string literal (", \, ? and every byte outside printable ASCII as an octal escape).
 * - cComment A B…: text in a C block comment: one line, its star-slash broken.
 */
/** A Markdown code span of `text` (one line), fenced with more backticks than it holds. */
function codeSpan(text: string): string {
  const fence = "`".repeat(Math.max(0, ...[...text.matchAll(/`+/g)].map((m) => m[0].length)) + 1);
  const pad = text.startsWith("`") || text.endsWith("`") ? " " : "";
  return `${fence}${pad}${text}${pad}${fence}`;
}

export const TEMPLATE_ESCAPES: Record<string, (s: string) => string> = {
  shq: (s) => shellQuote(s),
  shComment: (s) => line(s),
  dq: (s) => line(s).replace(/([$`"\\])/g, "\\$1"),
  heredocYaml: (s) =>
    JSON.stringify(s)
      .slice(1, -1)
      .replace(/[\u007f-\u009f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`)
      .replace(/([$`\\])/g, "\\$1"),
  mdCode: (s) => codeSpan(line(s)),
  // in a table row: GFM splits the row at each `|` before it reads code spans, so a `|` in the text is written `\|`
  // (GFM shows it as `|`); unescaped, a crafted compile flag ended the cell and the rest was read as links and HTML (adversary 74)
  mdCodeCell: (s) => codeSpan(line(s).replace(/\|/g, "\\|")),
  // only what makes Markdown inline (code, emphasis, links, HTML, a table cell's end) or, at the line's start, a heading or list: `source-root` stays as written
  mdText: (s) =>
    line(s)
      .replace(/([\\`*_{}\[\]#|<>~&])/g, "\\$1") // & too: `&ZeroWidthSpace;` read as the character it names (adversary 74)
      .replace(/^([-+])/, "\\$1")
      .replace(/^(\d+)([.)])/, "$1\\$2"),
  mdBlock: (s) => line(s),
  pyStr: (s) =>
    `"${[...s]
      .map((c) => {
        const n = c.codePointAt(0)!;
        if (c === "\\" || c === '"') return `\\${c}`;
        if (n >= 0x20 && n < 0x7f) return c;
        return n < 0x100
          ? `\\x${n.toString(16).padStart(2, "0")}`
          : n < 0x10000
            ? `\\u${n.toString(16).padStart(4, "0")}`
            : `\\U${n.toString(16).padStart(8, "0")}`;
      })
      .join("")}"`,
  cStr: (s) =>
    `"${[...Buffer.from(s)].map((b) => (b === 0x22 || b === 0x5c || b === 0x3f ? `\\${String.fromCharCode(b)}` : b >= 0x20 && b < 0x7f ? String.fromCharCode(b) : `\\${b.toString(8).padStart(3, "0")}`)).join("")}"`,
  cComment: (s) => line(s).replace(/\*\//g, "*\\/"),
};

/**
 * The one Handlebars instance for reproducer templates: isolated (`Handlebars.create()`), the
 * escapes of TEMPLATE_ESCAPES registered once as helpers. Compile with strict (a missing field
 * throws) and noEscape (no HTML escaping in shell, C++ or Python): every field from a manifest is
 * put through the helper of its language instead.
 */
export function templateEngine(): typeof Handlebars {
  if (engine) return engine;
  engine = Handlebars.create();
  for (const [name, f] of Object.entries(TEMPLATE_ESCAPES)) engine.registerHelper(name, (...args: unknown[]) => f(joined(args)));
  return engine;
}

/**
 * Render a template folder into outDir: `*.hbs` files rendered with ctx (the suffix dropped),
 * every other file copied; each keeps its mode bits.
 * @returns the paths written, relative to outDir.
 */
export function renderTemplateDir(templateDir: string, outDir: string, ctx: Record<string, unknown>): string[] {
  const hb = templateEngine();
  const files: string[] = [];
  const walk = (dir: string): void => {
    for (const name of readdirSync(dir)) {
      const src = join(dir, name);
      const st = statSync(src);
      const rel = relative(templateDir, src);
      if (st.isDirectory()) {
        mkdirSync(join(outDir, rel), { recursive: true });
        walk(src);
        continue;
      }
      const dest = join(outDir, rel.endsWith(".hbs") ? rel.slice(0, -4) : rel);
      if (rel.endsWith(".hbs")) writeFileSync(dest, hb.compile(readFileSync(src, "utf8"), { strict: true, noEscape: true })(ctx));
      else copyFileSync(src, dest);
      chmodSync(dest, st.mode & 0o777);
      files.push(relative(outDir, dest));
    }
  };
  walk(templateDir);
  return files;
}
