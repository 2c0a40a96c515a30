/** Quoting for the shell: the commands kerncap suggests in its messages, the words of generated build scripts. */

/**
 * A word as a POSIX shell reads it back unchanged: as it is when it holds only characters no shell
 * treats specially, else in single quotes (a ' inside as '\''). For the commands kerncap suggests
 * (`next: kerncap replay 'my cap'`), so that they can be pasted.
 */
export function shellQuote(word: string): string {
  if (word !== "" && /^[A-Za-z0-9_@%+=:,./-]+$/.test(word)) return word;
  return `'${word.replaceAll("'", `'\\''`)}'`;
}

/** A path as a word of a suggested command: shellQuote'd, and a relative path starting with "-" (read as an option) written ./-x. */
export function shellPath(path: string): string {
  return shellQuote(path.startsWith("-") ? `./${path}` : path);
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
