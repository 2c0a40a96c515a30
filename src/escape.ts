/**
 * The one escape of untrusted text before a terminal: names and messages that came from a manifest,
 * an archive, a results file or a compiler may carry escape sequences (ESC [2J clears the screen,
 * OSC sets the window title or writes the clipboard), C1 controls (U+009B is a CSI by itself on some
 * terminals), bidi overrides (U+202E shows text reversed: a build.sh line that reads harmless) and
 * line separators, and invisible format characters (U+200B zero-width space, U+FEFF, U+00AD soft
 * hyphen, the tag characters U+E0000–U+E007F: a name that prints the same as another, or a hidden
 * message to a reader or a model). Every one is shown as its escape instead: C0, DEL and C1 as \xNN;
 * every Unicode format character (general category Cf, which holds the bidi controls U+061C,
 * U+200E/F, U+202A–U+202E, U+2066–U+2069, and the zero-width ones U+200B–U+200D, U+2060–U+2064),
 * the tag block U+E0000–U+E007F (U+E0000 is unassigned, so not Cf), every other default-ignorable
 * code point (U+034F, variation selectors, Hangul fillers: drawn as nothing) and U+2028/U+2029 as
 * \uNNNN (\u{NNNNN} past U+FFFF).
 * Newlines and tabs are kept (a multi-line message, a script shown whole) unless `oneLine`, which
 * shows them as \n, \t (a name inside one line of output).
 * The log (src/log.ts) runs every string it prints through it; the CLI's text printer too
 * (src/cli/args.ts printText). JSON documents on stdout go through jsonText: the same characters as
 * JSON escapes (\uNNNN), so the text a terminal shows is inert and the value a parser reads is the same.
 */

/**
 * Format characters (Cf: bidi controls, zero-width and invisible ones, tags), the tag block, every
 * other default-ignorable code point (Unicode's Default_Ignorable_Code_Point: U+034F combining
 * grapheme joiner, the variation selectors U+FE00–U+FE0F, U+17B4/U+17B5, the Hangul fillers
 * U+115F, U+1160, U+3164, U+FFA0: drawn as nothing, so `sa\u034fx\ufe0fpy` printed as "saxpy"),
 * line and paragraph separators.
 */
const INVISIBLE = "\\p{Cf}\\p{Default_Ignorable_Code_Point}\u{e0000}-\u{e007f}\u2028\u2029";
/** Every C0 control (newline and tab too), DEL, C1, format character and line separator. */
const ONE_LINE = new RegExp(`[\x00-\x1f\x7f-\x9f${INVISIBLE}]`, "gu");
/** The same but newline and tab. */
const KEEP_LINES = new RegExp(`[\x00-\x08\x0b-\x1f\x7f-\x9f${INVISIBLE}]`, "gu");

function escaped(c: string): string {
  const n = c.codePointAt(0)!;
  if (c === "\n") return "\\n";
  if (c === "\t") return "\\t";
  if (n < 0x100) return `\\x${n.toString(16).padStart(2, "0")}`;
  return n > 0xffff ? `\\u{${n.toString(16)}}` : `\\u${n.toString(16).padStart(4, "0")}`;
}

const INVISIBLE_ONLY = new RegExp(`[${INVISIBLE}]`, "gu");

/**
 * `text` with only the format characters (bidi controls, zero-width and invisible ones, tags) and
 * line/paragraph separators escaped as \uNNNN, the same set escapeForTerminal escapes: for files
 * whose own escaping handles the rest (JUnit XML, HTML reports, CSV) but that a viewer renders,
 * where U+202E would show a name reversed, U+200B make two names look alike and U+2028 break a line.
 */
export function escapeBidi(text: string): string {
  return text.replace(INVISIBLE_ONLY, escaped);
}

/** Whether `text` holds a character escapeForTerminal escapes in one line (a control, DEL, C1, a format character, a line separator). */
export function hasEscapedCharacters(text: string): boolean {
  return new RegExp(ONE_LINE.source, "u").test(text);
}

/** `text` with every control character, format character and line separator escaped (see above); `oneLine`: newlines and tabs too. */
export function escapeForTerminal(text: string, o: { oneLine?: boolean } = {}): string {
  return text.replace(o.oneLine ? ONE_LINE : KEEP_LINES, escaped);
}

/** DEL, C1, format characters and line separators: what JSON.stringify leaves raw that a terminal may act on. */
const JSON_RAW = new RegExp(`[\x7f-\x9f${INVISIBLE}]`, "gu");

/**
 * JSON.stringify(value, null, indent), with every DEL, C1 control, format character (bidi
 * overrides, zero-width ones, tags), default-ignorable code point and line separator written as a
 * JSON escape (\uNNNN; a pair of them past U+FFFF): a document printed on a terminal can't act on
 * it (U+009B is a CSI on some terminals, U+202E reverses what follows), and a JSON parser reads the
 * same value. (JSON.stringify escapes C0 itself.) The writer of kerncap's documents on stdout and
 * of the JSON files it writes beside them (manifests, records, the archive index, pinned.json): a
 * value a sender stored escaped stays escaped (adversary 76 #09).
 */
export function jsonText(value: unknown, indent?: number): string {
  return JSON.stringify(value, null, indent).replace(JSON_RAW, (c) =>
    [...c]
      .flatMap((x) => (x.length === 2 ? [x.charCodeAt(0), x.charCodeAt(1)] : [x.charCodeAt(0)]))
      .map((u) => `\\u${u.toString(16).padStart(4, "0")}`)
      .join(""),
  );
}

/** A UTF-16 surrogate without its pair: such a string has no UTF-8 form (each file-system call would name the file with U+FFFD in its place). */
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/**
 * Where in `value` (a parsed JSON document: MCP tool arguments, a candidate list) the first string
 * (a value or a key) for which `test` holds lies, as a dotted path ("" for the value itself), or
 * undefined when none does.
 */
export function stringWhere(value: unknown, test: (s: string) => boolean, at = ""): string | undefined {
  // a stack, not recursion: a list nested 200 000 levels deep overflowed the call stack (adversary 73)
  const stack: [unknown, string][] = [[value, at]];
  for (let top = stack.pop(); top; top = stack.pop()) {
    const [x, path] = top;
    if (typeof x === "string") {
      if (test(x)) return path;
    } else if (Array.isArray(x)) {
      for (let i = x.length - 1; i >= 0; i--) stack.push([x[i], `${path}[${i}]`]);
    } else if (x !== null && typeof x === "object") {
      const entries = Object.entries(x);
      for (let i = entries.length - 1; i >= 0; i--) {
        const [k, y] = entries[i]!;
        const p = path ? `${path}.${k}` : k;
        stack.push([y, p], [k, p]); // the key first, then its value (popped in that order)
      }
    }
  }
  return undefined;
}

/** stringWhere of a string holding a lone surrogate (JSON's `"\udcff"`): such a path names another file than the one written (adversary 69). */
export function illFormedStringAt(value: unknown): string | undefined {
  return stringWhere(value, (s) => LONE_SURROGATE.test(s));
}

/**
 * `text` as one escaped line (escapeForTerminal with oneLine: a newline is written `\n`): for what
 * a received file or another user put into a message (a schema error quotes the value it refused),
 * so no line of theirs can stand as one of kerncap's own (adversary 80: `[kerncap] ✔ …` after a newline).
 */
export const oneLine = (text: string): string => escapeForTerminal(text, { oneLine: true });

/**
 * The first `max` of `items` for a message, each on one line with its controls escaped
 * (escapeForTerminal oneLine), joined by ", ", with ", …" after them when there are more: a name
 * from a received capture, a patch, a module or a shared folder cannot start a line of its own
 * that reads as kerncap's (adversary 89 #02: a file named `notes\n[kerncap] ✔ …`).
 */
export function listForTerminal(items: readonly string[], max: number): string {
  return (
    items
      .slice(0, max)
      .map((s) => escapeForTerminal(s, { oneLine: true }))
      .join(", ") + (items.length > max ? ", …" : "")
  );
}
