/**
 * A candidate patch read as `git apply` reads it, before git runs (src/eval/candidates.ts): every
 * header line parsed, names decoded the way git decodes them, and anything not understood refused.
 *
 * Why parse rather than match a few patterns: git apply decodes C-quoted names
 * (`"b/src/x\056sh"` is src/x.sh), takes the names of a header-only diff (a new empty file: no
 * `---`/`+++` lines) from its `diff --git` line, and reads a mode with strtoul (`new file mode
 * 120000` with two spaces is a symbolic link). A check that misses one spelling lets a patch write
 * a file no agent may write, or a link. So this reads the patch whole, as a state machine of git's
 * own grammar (apply.c: find_header, parse_git_diff_header, parse_fragment):
 *  - between files: a `diff --git A B` header, a `--- A` / `+++ B` pair followed by a hunk, the
 *    lines `diff -r` prints between files (`diff …`, `Only in …`) and empty lines; anything else
 *    is refused;
 *  - a git header's lines: `---`, `+++`, `new file mode`, `deleted file mode`, `old mode`, `new
 *    mode`, `index`, `similarity index`, `dissimilarity index`, `copy from/to`, `rename
 *    from/to/old/new`; then hunks, the next `diff --git`, or the end; any other line is refused;
 *  - a hunk's lines counted by its `@@ -a,b +c,d @@` header, as git counts them, so no line of
 *    content is read as a header or the other way round;
 *  - names: C-quoted (`"…"`, escapes `\\ \" \a \b \f \n \r \t \v` and three octal digits, UTF-8)
 *    decoded; unquoted ones end at a tab or space, after which only `diff -u`'s timestamp may follow;
 *  - modes: git's strtoul (leading white space, a sign, octal digits), held to 100644 for a new
 *    file and 100644 or 100755 elsewhere; an old/new mode pair (a mode change), a copy or a rename,
 *    a binary patch, refused.
 * What the names then must be (edit_file's rule, applied by the callers) and the tree git wrote
 * (checked after it ran: src/eval/candidates.ts) are the callers'.
 */

import { escapeForTerminal } from "../escape.ts";

/** Patch text quoted for a message: on one line, controls and bidi overrides escaped (the patch is untrusted). */
const quoted = (t: string) => escapeForTerminal(JSON.stringify(t), { oneLine: true });

/** What a patch touches, as read: each name every header gives (decoded; /dev/null left out), for the callers' path rule. */
export interface PatchRead {
  names: string[];
  /**
   * Each traditional diff's pair (a `--- A` / `+++ B` not under `diff --git`), both names given
   * (neither /dev/null): `plus` the 0-based line of its `+++`. `diff -u FILE EDITED` names the
   * edited copy B, which src/ does not hold; patch(1) then patches A (patch-apply.ts).
   */
  pairs: { plus: number; old: string; new: string }[];
}

/** A patch refused while read: `problem` is a phrase to end "the patch …". */
export class PatchProblem extends Error {}

const MODES_NEW = new Set([0o100644]);
const MODES_ANY = new Set([0o100644, 0o100755]);

/** A mode as git's strtoul reads it after the header's prefix: white space, a sign, octal digits, then only white space. */
function readMode(rest: string, what: string, allowed: Set<number>, line: number): void {
  const m = /^[ \t\n\v\f\r]*([+-]?)([0-7]+)[ \t\n\v\f\r]*$/.exec(rest);
  if (!m) throw new PatchProblem(`has a mode kerncap does not read (line ${line}: ${quoted(`${what} ${rest}`)})`);
  const value = Number.parseInt(m[2]!, 8) * (m[1] === "-" ? -1 : 1);
  if (value === 0o120000) throw new PatchProblem(`makes or changes a symbolic link (line ${line}: ${what} ${rest.trim()})`);
  if (!allowed.has(value))
    throw new PatchProblem(
      `gives mode ${rest.trim()} (line ${line}: ${what}; a candidate's files are regular files of mode 100644${allowed.size > 1 ? " or 100755" : ""})`,
    );
}

const ESCAPES: Record<string, number> = { '"': 0x22, "\\": 0x5c, a: 7, b: 8, f: 12, n: 10, r: 13, t: 9, v: 11 };

/** git's unquote_c_style: `s` starts with a quote; @returns the decoded name and what follows the closing quote. */
function unquote(s: string, line: number): { name: string; rest: string } {
  const bytes: number[] = [];
  const raw = Buffer.from(s.slice(1), "utf8");
  for (let i = 0; i < raw.length; i++) {
    const c = raw[i]!;
    if (c === 0x22) {
      const name = new TextDecoder("utf-8", { fatal: false }).decode(new Uint8Array(bytes));
      return { name, rest: raw.subarray(i + 1).toString("utf8") };
    }
    if (c !== 0x5c) {
      bytes.push(c);
      continue;
    }
    const e = String.fromCharCode(raw[++i] ?? 0);
    if (e in ESCAPES) bytes.push(ESCAPES[e]!);
    else if (/[0-3]/.test(e) && /^[0-7]{2}$/.test(String.fromCharCode(raw[i + 1] ?? 0, raw[i + 2] ?? 0))) {
      bytes.push(Number.parseInt(e + String.fromCharCode(raw[i + 1]!, raw[i + 2]!), 8));
      i += 2;
    } else throw new PatchProblem(`has a quoted name with an escape git does not read (line ${line})`);
  }
  throw new PatchProblem(`has a quoted name without its closing quote (line ${line})`);
}

/** diff -u's timestamp after a name (GNU: 2024-01-02 03:04:05.000000000 +0000; ctime: Thu Jan  1 00:00:00 1970). */
const TIMESTAMP = /^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(\.\d+)?( [+-]\d{4})?|[A-Z][a-z]{2} [A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d \d{4})\r?$/;
/** The ctime form, which git does not take for a date: it ends the name at a tab only, so after a space the date is part of the name to git. */
const CTIME = /^[A-Z][a-z]{2} [A-Z][a-z]{2} /;

/** The name of a `---`/`+++` line (after the prefix): quoted and decoded, or up to a tab or space; what follows may only be a timestamp. */
function fileName(rest: string, line: number): string | undefined {
  let name: string;
  let after: string;
  if (rest.startsWith('"')) ({ name, rest: after } = unquote(rest, line));
  else {
    const end = rest.search(/[\t ]/);
    [name, after] = end < 0 ? [rest, ""] : [rest.slice(0, end), rest.slice(end)];
  }
  const tail = after.replace(/^[\t ]+/, "");
  if (tail && !TIMESTAMP.test(tail)) throw new PatchProblem(`has a file name followed by ${quoted(tail)} (line ${line}), which kerncap does not read`);
  // kerncap and git read one name: a ctime date after a space is the name's to git (adversary 79 #15: "new.cu Thu Jan  1 …")
  if (tail && CTIME.test(tail) && !after.startsWith("\t"))
    throw new PatchProblem(
      `has a file name followed by a space and ${quoted(tail)} (line ${line}), which git reads as part of the name (it ends a name at a tab)`,
    );
  return name === "/dev/null" ? undefined : name;
}

/** The two names of `diff --git A B` (after the prefix), each quoted and decoded or a word without white space. */
function gitNames(rest: string, line: number): string[] {
  const names: string[] = [];
  let s = rest;
  for (let k = 0; k < 2; k++) {
    if (s.startsWith('"')) {
      const u = unquote(s, line);
      names.push(u.name);
      s = u.rest;
    } else {
      const m = /^[^ \t"]+/.exec(s);
      if (!m) break;
      names.push(m[0]);
      s = s.slice(m[0].length);
    }
    if (k === 0) {
      if (!s.startsWith(" ")) break;
      s = s.slice(1);
    }
  }
  if (names.length !== 2 || s.replace(/\r$/, "") !== "")
    throw new PatchProblem(`has a diff --git line kerncap does not read (line ${line}: two names, each a word or quoted)`);
  return names;
}

/** A hunk header's old and new line counts (a count left out is 1), or undefined for a line that is no hunk header. */
function hunkCounts(l: string): [number, number] | undefined {
  const m = /^@@ -\d+(?:,(\d+))? \+\d+(?:,(\d+))? @@/.exec(l);
  return m ? [m[1] === undefined ? 1 : Number(m[1]), m[2] === undefined ? 1 : Number(m[2])] : undefined;
}

/**
 * Read a candidate patch (see the file's comment).
 * @returns every name its headers give, decoded
 * @throws PatchProblem naming the line and what is refused
 */
export function readPatch(text: string): PatchRead {
  const lines = text.split("\n");
  if (lines.at(-1) === "") lines.pop();
  const names: string[] = [];
  const pairs: PatchRead["pairs"] = [];
  let files = 0;
  let i = 0;
  /** Hunks from line i on (as many as follow), their lines counted as git counts them. */
  const hunks = (): number => {
    let n = 0;
    for (let counts = hunkCounts(lines[i] ?? ""); counts; counts = hunkCounts(lines[i] ?? "")) {
      const at = ++i;
      let [old, now] = counts;
      while (old > 0 || now > 0) {
        const l = lines[i];
        if (l === undefined) throw new PatchProblem(`ends inside the hunk of line ${at}`);
        const c = l[0] ?? " "; // an empty line is a context line (GNU diff)
        if (c === " ") old--, now--;
        else if (c === "-") old--;
        else if (c === "+") now--;
        else if (c !== "\\") throw new PatchProblem(`has a line that is no part of the hunk of line ${at} (line ${i + 1})`);
        i++;
      }
      if (old < 0 || now < 0) throw new PatchProblem(`has a hunk whose lines do not match its counts (line ${at})`);
      while (lines[i]?.startsWith("\\")) i++; // "\ No newline at end of file"
      n++;
    }
    return n;
  };
  while (i < lines.length) {
    const l = lines[i]!;
    const at = i + 1;
    if (l.startsWith("diff --git ")) {
      names.push(...gitNames(l.slice(11), at));
      i++;
      gitHeader(lines, i, names, (next) => (i = next));
      const l2 = lines[i] ?? "";
      if (l2.startsWith("Binary files ") || l2.startsWith("GIT binary patch"))
        throw new PatchProblem(`is a binary patch (line ${i + 1}); a candidate's files are text`);
      hunks();
      files++;
    } else if (l.startsWith("--- ")) {
      const next = lines[i + 1] ?? "";
      if (!next.startsWith("+++ ")) throw new PatchProblem(`has a --- line without its +++ line (line ${at})`);
      const pair = [l, next].map((x, k) => fileName(x.slice(4), at + k));
      for (const n of pair) if (n !== undefined) names.push(n);
      if (pair[0] !== undefined && pair[1] !== undefined) pairs.push({ plus: i + 1, old: pair[0], new: pair[1] });
      i += 2;
      if (!hunks()) throw new PatchProblem(`has file names without a hunk (line ${at})`);
      files++;
    } else if (l === "" || l === "\r" || /^diff /.test(l) || l.startsWith("Only in ")) {
      i++; // what diff -r prints between files (git apply skips it)
    } else if (l.startsWith("Binary files ") || l.startsWith("GIT binary patch")) {
      throw new PatchProblem(`is a binary patch (line ${at}); a candidate's files are text`);
    } else {
      throw new PatchProblem(`has a line kerncap does not read between files (line ${at}: ${quoted(l.slice(0, 40))})`);
    }
  }
  if (!files) throw new PatchProblem("holds no file's diff");
  return { names, pairs };
}

/** The header lines of a `diff --git` from line `from` to the first hunk, binary marker, next diff or end; `done(i)` gets where they end. */
function gitHeader(lines: string[], from: number, names: string[], done: (i: number) => void): void {
  let i = from;
  for (; i < lines.length; i++) {
    const l = lines[i]!;
    const at = i + 1;
    if (l.startsWith("@@ -") || l.startsWith("diff --git ") || l.startsWith("Binary files ") || l.startsWith("GIT binary patch")) break;
    const kind =
      /^(---|\+\+\+|new file mode|deleted file mode|old mode|new mode|copy from|copy to|rename from|rename to|rename old|rename new|similarity index|dissimilarity index|index) (.*)$/.exec(
        l,
      );
    if (!kind) throw new PatchProblem(`has a header line kerncap does not read (line ${at}: ${quoted(l.slice(0, 40))})`);
    const [, what, rest] = kind as unknown as [string, string, string];
    if (what === "---" || what === "+++") {
      const n = fileName(rest, at);
      if (n !== undefined) names.push(n);
    } else if (what === "new file mode") readMode(rest, what, MODES_NEW, at);
    else if (what === "deleted file mode") readMode(rest, what, MODES_ANY, at);
    else if (what === "old mode" || what === "new mode") throw new PatchProblem(`changes a file's mode (line ${at}: ${quoted(`${what} ${rest.trim()}`)})`);
    else if (/^(copy|rename) /.test(what))
      throw new PatchProblem(`copies or renames a file (${what}: a candidate's patch edits, adds and deletes files of src/ only)`);
    else if (what === "index") {
      // `index OLD..NEW[ MODE]`: git takes the mode as the file's (a link's 120000 included)
      const m = /^[0-9a-f]+\.\.[0-9a-f]+(?: (.*))?$/.exec(rest.replace(/\r$/, ""));
      if (!m) throw new PatchProblem(`has an index line kerncap does not read (line ${at})`);
      if (m[1] !== undefined) readMode(m[1], "index", MODES_ANY, at);
    } else if (!/^\d+%\r?$/.test(rest)) throw new PatchProblem(`has a ${what} line kerncap does not read (line ${at})`);
  }
  done(i);
}

/**
 * The paths, relative to src/, that git apply writes for `names` (readPatch's): with -p2 when
 * every name is `x/src/…` and src/ holds no src/ of its own (a `git diff` from the capture
 * folder); with -p0 when the names are src/'s own paths as they are (`diff -u` run inside src/,
 * or what many a model writes: `--- kernel.cu` / `+++ kernel.cu`), that is when every name is
 * bare (-p1 leaves nothing of any), or when -p1 leaves a name empty or names no file src/ holds
 * and the names as they are name one (`holds`, a path relative to src/); else -p1 (`git diff` inside src/, `diff -ru src edited`).
 * @returns the strip count for git apply's -p and each name stripped of that many parts ("" when it has no more)
 */
export function patchPaths(names: string[], srcHoldsSrc: boolean, holds: (rel: string) => boolean = () => false): { strip: number; paths: string[] } {
  const stripped = (strip: number) => names.map((n) => n.split("/").slice(strip).join("/"));
  const two = names.length > 0 && !srcHoldsSrc && names.every((n) => n.split("/")[1] === "src" && n.split("/").length > 2);
  if (two) return { strip: 2, paths: stripped(2) };
  const one = stripped(1);
  // -p1 leaves nothing of every name (bare names: kernel.cu), or leaves an empty name or none src/ holds where the names as they are name a file of src/
  const bare = names.length > 0 && one.every((p) => p === "");
  const p1Fails = one.some((p) => p === "") || !one.some(holds);
  if (bare || (names.length > 0 && p1Fails && names.some(holds))) return { strip: 0, paths: stripped(0) };
  return { strip: 1, paths: one };
}

/**
 * The patch as it is given to git apply (`text`, read as `read`), and as read then: each
 * traditional pair whose `---` names a file src/ holds (`holds`, with patchPaths' strip taken off)
 * and whose `+++` names one it does not gets its `---` name on the `+++` line. That is what
 * `diff -u FILE EDITED` writes inside src/ (`+++ EDITED`, the edited copy's name, even an absolute
 * one): patch(1) patches the file that exists, git apply the `+++` name, which is not there (nu12
 * #1: the documented recipe was refused). The names checked, by eval and by kerncap mcp's
 * evaluate before it writes anything, are these (nu16 #1: MCP refused such a patch eval built).
 */
export function patchAsApplied(text: string, read: PatchRead, srcHoldsSrc: boolean, holds: (rel: string) => boolean): { text: string; read: PatchRead } {
  const strip = patchPaths(read.names, srcHoldsSrc, holds).strip;
  const rel = (n: string) => n.split("/").slice(strip).join("/");
  const edited = read.pairs.filter((p) => holds(rel(p.old)) && !holds(rel(p.new)));
  if (!edited.length) return { text, read };
  const lines = text.split("\n");
  for (const p of edited) lines[p.plus] = `+++ ${lines[p.plus - 1]!.slice(4)}`;
  const out = lines.join("\n");
  return { text: out, read: readPatch(out) };
}

/**
 * How a patch's names were read (`strip`: patchPaths'), for a refusal whose names lead outside
 * src/'s files: "its file names are read with their first folder taken off (as git apply -p1)".
 */
export function stripRule(strip: number): string {
  return strip === 0
    ? "its file names are read as paths inside src/ as they are (as git apply -p0: they name files src/ holds)"
    : `its file names are read with their first ${strip > 1 ? `${strip} folders` : "folder"} taken off (as git apply -p${strip})`;
}

/** What names a patch of src/ gives, said after stripRule's clause and what it led to. */
export const PATCH_NAMES_EXAMPLE =
  "(a name as git diff writes it inside src/, a/kernel.cu, is src/kernel.cu; a bare kernel.cu, as diff -u writes it there, is read as it is)";
