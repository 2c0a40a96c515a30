/**
 * The one escape of untrusted text before a terminal: names and messages that came from a manifest,
 * an archive, a results file or a compiler may carry escape sequences (ESC [2J clears the screen,
 * OSC sets the window title or writes the clipboard), C1 controls (U+009B is a CSI by itself on some
 * terminals), bidi overrides (U+202E shows text reversed: a build.sh line that reads harmless) and
 * line separators. Every one is shown as its escape instead: C0, DEL and C1 as \xNN; the bidi
 * controls (U+061C, U+200E/F, U+202A–U+202E, U+2066–U+2069) and U+2028/U+2029 as \uNNNN.
 * Newlines and tabs are kept (a multi-line message, a script shown whole) unless `oneLine`, which
 * shows them as \n, \t (a name inside one line of output).
 * The log (src/log.ts) runs every string it prints through it; the CLI's text printer too
 * (src/cli/args.ts printText). JSON documents are not escaped: JSON.stringify escapes C0 and they
 * are data.
 */

const BIDI_AND_SEPARATORS = "\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069";
/** Every C0 control (newline and tab too), DEL, C1, bidi control and line separator. */
const ONE_LINE = new RegExp(`[\x00-\x1f\x7f-\x9f${BIDI_AND_SEPARATORS}]`, "g");
/** The same but newline and tab. */
const KEEP_LINES = new RegExp(`[\x00-\x08\x0b-\x1f\x7f-\x9f${BIDI_AND_SEPARATORS}]`, "g");

function escaped(c: string): string {
  const n = c.charCodeAt(0);
  if (c === "\n") return "\\n";
  if (c === "\t") return "\\t";
  return n < 0x100 ? `\\x${n.toString(16).padStart(2, "0")}` : `\\u${n.toString(16).padStart(4, "0")}`;
}

const BIDI_ONLY = new RegExp(`[${BIDI_AND_SEPARATORS}]`, "g");

/**
 * `text` with only the bidi controls and line/paragraph separators escaped as \uNNNN: for files
 * whose own escaping handles the rest (JUnit XML, HTML reports) but that a viewer renders, where
 * U+202E would show a name reversed and U+2028 break a line.
 */
export function escapeBidi(text: string): string {
  return text.replace(BIDI_ONLY, escaped);
}

/** `text` with every control character, bidi control and line separator escaped (see above); `oneLine`: newlines and tabs too. */
export function escapeForTerminal(text: string, o: { oneLine?: boolean } = {}): string {
  return text.replace(o.oneLine ? ONE_LINE : KEEP_LINES, escaped);
}
