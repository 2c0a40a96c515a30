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
 * character) in bash's $'…' with that escape, so that what is shown, pasted, is the same word
 * (adversary 67: U+202E shown as \u202e inside '…' named another folder when pasted). Not for
 * scripts kerncap writes (their words are read by bash as written: shellQuote).
 */
export function shownWord(word: string): string {
  return hasEscapedCharacters(word) ? ansiC(word) : shellQuote(word);
}

/**
 * `word` as bash's $'…' (zsh and ksh read it too): \\ and \' escaped, every character
 * escapeForTerminal escapes as its UTF-8 bytes, each \xHH, the rest as it is. Bytes, not \uNNNN:
 * bash expands \u only where the locale can encode the character, and in the C/POSIX locale (cron,
 * ssh without AcceptEnv, many containers) leaves the six characters `\u202E`, another name
 * (adversary 68); \xHH is the same byte in every locale.
 */
function ansiC(word: string): string {
  let out = "";
  for (const c of word) {
    if (c === "\\" || c === "'") out += `\\${c}`;
    else if (!hasEscapedCharacters(c)) out += c;
    else for (const b of new TextEncoder().encode(c)) out += `\\x${b.toString(16).padStart(2, "0")}`;
  }
  return `$'${out}'`;
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
