/**
 * How the trust gate (src/format/trust.ts) shows what a build runs: each file escaped between
 * `──── NAME ────` rulers, with its size and SHA-256, what is not kerncap's own build, and the
 * interpreter as each frontend shows it.
 */
import { escapeForTerminal } from "../escape.ts";
import { runFileSpecs } from "./run-files.ts";
import type { WhatRuns } from "./what-runs.ts";

/** The most of the files an error message carries (bytes, kerncap mcp: its agent reads the message, not stderr); the rest is read with read_file. */
export const BUILD_SH_IN_MESSAGE = 64 << 10;

/**
 * The most of the files the command line's refusal prints (bytes, in all): a received archive's
 * 500 MiB "script" printed whole flooded the terminal and took 3 GB (a trial); the rest is said as
 * a count, each file's size and SHA-256 still shown, and all of it still in the digest.
 */
export const SHOWN_ON_TERMINAL = 256 << 10;

/** build.sh as text to show: control characters but newline and tab escaped as \xNN (no terminal escapes). */
function shownScript(script: Buffer): string {
  return escapeForTerminal(script.toString("utf8")); // C0, C1, bidi overrides, U+2028/9 (src/escape.ts)
}

/**
 * The files of `runs` as the user is shown them: each between `──── NAME (N bytes, sha256 H) ────` and
 * `──── end of NAME ────`, escaped (shownScript); `budget`: the most bytes shown in all (the
 * terminal's SHOWN_ON_TERMINAL, kerncap mcp's message BUILD_SH_IN_MESSAGE), the rest said as a count.
 * A received capture's build.sh that is kerncap's own (a rendering of its frontend's template whose
 * flags are compile settings only: src/frontends/stock-build.ts readBuildScripts; `runs.stockFlags`)
 * is one line, its name, size, SHA-256 and compile flags, not its ~140 lines of kerncap's own text
 * (validate and check alike: a new user read 140 lines of kerncap's template to learn nothing).
 */
export function shownFiles(runs: WhatRuns, budget = SHOWN_ON_TERMINAL): string {
  let out = "";
  let left = budget;
  for (const f of runs.files) {
    if (f.name === "build.sh" && runs.notStock === undefined && runs.stockFlags !== undefined && !f.listedOnly) {
      const flags = escapeForTerminal(runs.stockFlags, { oneLine: true }) || "none";
      out += `──── build.sh (${f.bytes.length} bytes, sha256 ${new Bun.CryptoHasher("sha256").update(f.bytes).digest("hex")}): kerncap's own build.sh, not printed: its template's text, its compile flags ${flags} ────\n`;
      continue;
    }
    if (f.listedOnly) {
      out += `──── ${escapeForTerminal(f.name, { oneLine: true })} (${f.bytes.length} bytes, sha256 ${new Bun.CryptoHasher("sha256").update(f.bytes).digest("hex")}; build.sh can reach it: part of the digest, not printed) ────\n`;
      continue;
    }
    const n = Math.max(0, Math.min(f.bytes.length, left));
    left -= n;
    const shown = shownScript(f.bytes.subarray(0, n));
    const name = escapeForTerminal(f.name, { oneLine: true });
    out += `──── ${name} (${f.bytes.length} bytes, sha256 ${new Bun.CryptoHasher("sha256").update(f.bytes).digest("hex")}) ────\n${shown}${shown === "" || shown.endsWith("\n") ? "" : "\n"}${n < f.bytes.length ? `… (${f.bytes.length - n} bytes more, not shown here: read ${name} whole before you trust it; read_file reads it)\n` : ""}──── end of ${name} ────\n`;
  }
  return out;
}

/** What the refusal says first when build.sh is not kerncap's own: why, and that every file under src/ is part of what runs. */
export function shownNotStock(runs: WhatRuns): string {
  if (runs.notStock === undefined) return "";
  return `──── NOT kerncap's own build: ${shownScript(Buffer.from(runs.notStock))}. It can run any file of src/: each is listed, part of the digest, and copied privately for the build; those it names or that look like programs are printed whole. Plain --trust is not enough: --trust=DIGEST ────\n`;
}

/** What the refusal says about the interpreter, as each frontend shows it (RunFiles.interpreter.shown: a Triton compile runs it on repro.py). */
export function shownInterpreter(runs: WhatRuns): string {
  const present = new Set(runs.files.map((f) => f.name));
  return runFileSpecs()
    .map((s) => s.interpreter?.shown(present, runs.interpreter) ?? "")
    .join("");
}

/** An interpreter's name as the refusal shows it: escaped, as a script's text is. */
export function shownInterpreterName(interpreter: string): string {
  return shownScript(Buffer.from(interpreter));
}
