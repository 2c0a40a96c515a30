/**
 * src/util/shell-quote.ts shownWord (and shellPath): a suggested command's word, shown through the terminal escaping
 * (src/escape.ts) and pasted into bash, is the same word (adversary 67: a folder named with U+202E
 * was shown as '…\u202e…' inside single quotes, and the pasted command named another folder), in
 * every locale (adversary 68: $'\u202e' is six characters to bash in the C locale).
 */
import { expect, test } from "bun:test";
import { escapeForTerminal } from "../../../src/escape.ts";
import { shellPath, shellQuote, shownWord } from "../../../src/util/shell-quote.ts";

/** What `shell` (bash, or sh: dash where it is Debian's), in the locale `locale`, makes of `quoted` as one word of a command line. */
function bashReads(quoted: string, locale = "C.UTF-8", shell = "bash"): string {
  const p = Bun.spawnSync([shell, "-c", `printf '%s' ${quoted}`], { env: { ...process.env, LC_ALL: locale, LANG: locale }, stdout: "pipe" });
  return p.stdout.toString();
}

test("every word, shown on a terminal and pasted into bash, reads back as itself", () => {
  for (const word of [
    "plain",
    "my cap",
    "it's",
    "c\u202eodd",
    "a\nb",
    "tab\there",
    "esc\x1b[2Jx",
    "zw\u200bsp",
    "c1\u009bx",
    "tag\u{e0041}x",
    "back\\slash'\u202e",
    "$(id)`id`",
    "pct%s\u202e'q\\$(id)`id`\"",
    "nl-end\u202e\n",
  ]) {
    const shown = escapeForTerminal(shownWord(word), { oneLine: true });
    expect(shown, JSON.stringify(word)).toBe(shownWord(word)); // nothing left for the terminal escaping to change
    expect(bashReads(shown), JSON.stringify(word)).toBe(word);
    // the C/POSIX locale (cron, ssh without AcceptEnv, containers) too: bash leaves \u202E there as six characters, another
    // name (adversary 68); the character's UTF-8 bytes as \xHH are the same word in every locale
    expect(bashReads(shown, "C"), JSON.stringify(word)).toBe(word);
    // and a POSIX sh (dash): $'…' is bash's, zsh's and ksh's only; $(printf …) every shell's (adversary 69); a word ending in a newline excepted
    if (!word.endsWith("\n")) expect(bashReads(shown, "C", "sh"), JSON.stringify(word)).toBe(word);
  }
  expect(shownWord("c\u202eodd")).toBe(`"$(printf 'c\\342\\200\\256odd')"`);
  expect(shellPath("-c\u202e")).toBe(`"$(printf './-c\\342\\200\\256')"`); // a path shown to paste, as a word
  expect(shownWord("x\u202e%d'\\$(id)\n")).toBe("$'x\\342\\200\\256\\045d\\047\\134$(id)\\012'"); // ending in a newline: bash's $'…'
  expect(shownWord("my cap")).toBe("'my cap'"); // plain characters keep single quotes
  expect(shellQuote("a\nb")).toBe("'a\nb'"); // a script's word: as bash reads it written
});
