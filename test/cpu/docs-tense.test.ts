/**
 * The documents (README.md, docs/*.md) say what kerncap is and why, not what happened to it: no
 * issue numbers, no "last session", "we fixed", "used to", "the first version", "a month ago".
 * The history is in git; a measured figure keeps its date, commit and command (docs/benchmarks.md).
 * The list is short on purpose: phrases that are diary in any sentence, never a description.
 */
import { expect, test } from "bun:test";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";

const ROOT = join(import.meta.dir, "../..");

/** Diary phrasing, each with what to write instead. */
export const DIARY: [RegExp, string][] = [
  [/\bissues? #?\d+/i, "an issue number: say what the design is and why"],
  [/#[\w-]*-issue-\d+\b|\(#\d+\)/i, "an issue number in a link or a heading"],
  [/\b(this|last|previous|next|earlier|later|one|a) (work )?session\b/i, "a work session: say what is"],
  [/\bwe\b|\bour\b/i, '"we": say what kerncap does'],
  [/(?<!\b(is|are|be|been|being) )\bused to\b/i, '"used to": say what is, and why'],
  [/\b(the|its) (first|earlier|old|previous) (version|form|implementation|design)\b/i, "an earlier version: the reason, in the present"],
  [/\b(was|were) once\b|\bonce became\b/i, "what once happened: say what is refused and why"],
  [/\b(a|one|two|three|last|this) (day|week|month|year)s? ago\b|\byesterday\b/i, "a time in the past"],
  [/\b(until|since|before|after) (this|that) (change|commit|fix)\b|\bwas fixed\b|\bwe fixed\b/i, "a change or a fix: say what is"],
];

function documents(): string[] {
  return [
    "README.md",
    ...readdirSync(join(ROOT, "docs"))
      .filter((f) => f.endsWith(".md"))
      .map((f) => `docs/${f}`),
  ];
}

/** Every diary phrase of `text`, as "LINE: phrase (what instead)". */
export function diaryIn(text: string): string[] {
  const found: string[] = [];
  text.split("\n").forEach((line, i) => {
    for (const [re, why] of DIARY) {
      const m = re.exec(line);
      if (m) found.push(`${i + 1}: "${m[0]}" (${why})`);
    }
  });
  return found;
}

test("README.md and docs/*.md describe kerncap as it is (no diary phrasing)", () => {
  const found = documents().flatMap((f) => diaryIn(readFileSync(join(ROOT, f), "utf8")).map((x) => `${f}:${x}`));
  expect(found).toEqual([]);
});

test("the diary check finds what it is meant to find, and leaves descriptions alone", () => {
  for (const s of [
    "The first version lost every global (issue 12)",
    "fixed last session",
    "we fixed the hang",
    "replay used to fail",
    "see design-notes.md#the-source-layout-issue-24",
    "folders were once 0777",
    "measured a month ago",
  ]) {
    expect(diaryIn(s).length, s).toBeGreaterThan(0);
  }
  for (const s of [
    "the SDK's transport then ends the session",
    'SUITES="session share"',
    "the first launch of the kernel",
    "a digest that no longer matches",
    "the issued order of launches",
    "the reader is used to check modules",
    "capture again after the change",
  ]) {
    expect(diaryIn(s), s).toEqual([]);
  }
});
