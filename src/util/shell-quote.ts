/** Quoting for the shell: the commands kerncap suggests in its messages, the words of generated build scripts. */
import { hasEscapedCharacters } from "../escape.ts";

/**
 * A word as a POSIX shell reads it back unchanged: as it is when it holds only characters no shell
 * treats specially, else in single quotes (a ' inside as '\''). For the words of the scripts kerncap
 * writes and the commands it suggests (`next: kerncap replay 'my cap'`; a path: shellPath, a word
 * shown to paste: shownWord).
 */
export function shellQuote(word: string): string {
  if (word !== "" && /^[A-Za-z0-9_@%+=:,./-]+$/.test(word)) return word;
  return `'${word.replaceAll("'", `'\\''`)}'`;
}

/**
 * A word of a command shown to a person to paste (a message, a hint): shellQuote's, but a word with
 * a character the terminal escaping shows as an escape (a control, a bidi or invisible format
 * character) as printfWord writes it, all printable ASCII, so that what is shown, pasted, is the same word
 * (adversary 67: U+202E shown as \u202e inside '…' named another folder when pasted). Not for
 * scripts kerncap writes (their words are read by bash as written: shellQuote).
 */
export function shownWord(word: string): string {
  return hasEscapedCharacters(word) ? printfWord(word) : shellQuote(word);
}

/**
 * `word` as every POSIX shell reads it back, in every locale: `"$(printf 'FORMAT')"`, each byte
 * that is not printable ASCII (and `'`, `\`, `%`) as its octal escape `\ooo`, the rest as it is
 * (adversary 68: `\u202e` in bash's $'…' is six characters in the C locale; adversary 69: dash, a
 * POSIX sh, reads $'…' as `$` and a quoted word, another folder). A word ending in a newline, which
 * the command substitution would drop, is written as bash's, zsh's and ksh's $'…' with the same
 * escapes instead.
 */
function printfWord(word: string): string {
  let out = "";
  for (const b of new TextEncoder().encode(word)) {
    const safe = b >= 0x20 && b < 0x7f && b !== 0x27 && b !== 0x5c && b !== 0x25;
    out += safe ? String.fromCharCode(b) : `\\${b.toString(8).padStart(3, "0")}`;
  }
  if (word.endsWith("\n")) return `$'${out}'`;
  return `"$(printf '${out}')"`;
}

/** A path as a word of a suggested command: shownWord's, and a relative path starting with "-" (read as an option) written ./-x. */
export function shellPath(path: string): string {
  return shownWord(path.startsWith("-") ? `./${path}` : path);
}

/**
 * Whether `path` may stand unquoted in a shell line that someone else writes (nvcc pastes the
 * source's absolute path into the `sh -c` lines it runs; the pruned build runs nvcc's `--dryrun`
 * lines as written): `/`-separated parts of letters, digits and `._+-`, none starting with `-`.
 * The set of archive names kerncap unpacks (src/format/archive.ts); build.sh's own test of its
 * folder (templates/cuda/build.sh.hbs) is the same but for a part starting with `-`, harmless inside
 * an absolute path.
 */
export function isPlainPath(path: string): boolean {
  return path.split("/").every((part) => part === "" || /^(?!-)[A-Za-z0-9._+-]+$/.test(part));
}
