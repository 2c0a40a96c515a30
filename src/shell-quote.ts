/** Quoting for the shell commands kerncap suggests in its messages (src/cli/format.ts re-exports it). */

/**
 * A word as a POSIX shell reads it back unchanged: as it is when it holds only characters no shell
 * treats specially, else in single quotes (a ' inside as '\''). For the commands kerncap suggests
 * (`next: kerncap replay 'my cap'`), so that they can be pasted.
 */
export function shellQuote(word: string): string {
  // a relative path that starts with "-" would be read as an option: ./-dashcap
  if (word.startsWith("-")) return shellQuote(`./${word}`);
  if (word !== "" && /^[A-Za-z0-9_@%+=:,./-]+$/.test(word)) return word;
  return `'${word.replaceAll("'", `'\\''`)}'`;
}
