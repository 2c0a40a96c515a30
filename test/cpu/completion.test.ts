/**
 * Shell completion (src/cli/completion.ts), run in the shells themselves: bash always; fish and
 * zsh where installed (syntax, and fish's own `complete -C`). Found by a trial: `run --out <TAB>`
 * offered nothing, `--dtype <TAB>` offered folders, fish completed nothing after `--`.
 */
import { describe, expect, test } from "bun:test";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { tempDir } from "./fixtures.ts";

const MAIN = resolve(import.meta.dir, "../../src/cli/main.ts");
function script(shell: string): string {
  const p = Bun.spawnSync([process.execPath, MAIN, "completion", shell], { stdout: "pipe", stderr: "pipe" });
  expect(p.exitCode, p.stderr.toString()).toBe(0);
  const f = join(tempDir(), `kerncap.${shell}`);
  writeFileSync(f, p.stdout);
  return f;
}

describe("shell completion", () => {
  test("bash: verbs, an option's path value, --dtype's names, nothing for a number, files after --", () => {
    const f = script("bash");
    const d = tempDir();
    mkdirSync(join(d, "capdir"));
    writeFileSync(join(d, "app.sh"), "");
    const complete = (words: string[]) => {
      const arr = words.map((w) => `'${w}'`).join(" ");
      const p = Bun.spawnSync(["bash", "-c", `source ${f}; COMP_WORDS=(${arr}); COMP_CWORD=${words.length - 1}; _kerncap; printf '%s\\n' "\${COMPREPLY[@]}"`], {
        cwd: d,
        stdout: "pipe",
        stderr: "pipe",
      });
      expect(p.exitCode, p.stderr.toString()).toBe(0);
      return p.stdout.toString().split("\n").filter(Boolean).sort();
    };
    expect(complete(["kerncap", "ins"])).toEqual(["inspect"]);
    expect(complete(["kerncap", "run", "--out", "ca"])).toEqual(["capdir"]);
    expect(complete(["kerncap", "replay", "--dtype", "f"])).toEqual(["fp16", "fp32", "fp64"]);
    expect(complete(["kerncap", "replay", "--iters", ""])).toEqual([]);
    expect(complete(["kerncap", "run", "--", "./ap"])).toEqual(["./app.sh"]);
    expect(complete(["kerncap", "replay", "--no-v"])).toEqual(["--no-verify"]);
    // paths after --against and --module (another capture, a rebuilt module), the clients after mcp --print-config
    expect(complete(["kerncap", "replay", "cap", "--against", "ca"])).toEqual(["capdir"]);
    expect(complete(["kerncap", "replay", "cap", "--module", "ap"])).toEqual(["app.sh"]);
    expect(complete(["kerncap", "check", "x", "--report", "ap"])).toEqual(["app.sh"]);
    expect(complete(["kerncap", "mcp", "--print-config", "c"])).toEqual(["claude-code", "claude-desktop", "codex", "cursor"]);
    // judge's --expect and run's --runtime (found by a new user: nothing was offered)
    expect(complete(["kerncap", "judge", "cap", "--expect", ""])).toEqual(["any", "deterministic", "nondeterministic"]);
    expect(complete(["kerncap", "run", "--runtime", ""])).toEqual(["cuda", "hsa"]);
    // each verb's own --print-summary modes (found by a new user: list offered check's per-capture, check list's per-nvtx)
    expect(complete(["kerncap", "list", "--print-summary", "per-c"])).toEqual([]);
    expect(complete(["kerncap", "check", "x", "--print-summary", "per-c"])).toEqual(["per-capture"]);
    expect(complete(["kerncap", "check", "x", "--print-summary", "per-n"])).toEqual([]);
    expect(complete(["kerncap", "list", "--print-summary", "per-n"])).toEqual(["per-nvtx"]);
    // check's internal --worker is not offered
    expect(complete(["kerncap", "check", "--w"])).toEqual(["--write-baseline"]);
    // the timing and judging options the verbs that replay or judge share (a new user's trial: validate, check and eval had no --flush-l2, tune no --dtype)
    for (const verb of ["replay", "validate", "tune", "check", "eval"]) expect(complete(["kerncap", verb, "cap", "--fl"]), verb).toEqual(["--flush-l2"]);
    expect(complete(["kerncap", "validate", "cap", "--r"])).toEqual(["--rtol", "--runs"]);
    expect(complete(["kerncap", "validate", "cap", "--no-v"])).toEqual(["--no-verify"]);
    expect(complete(["kerncap", "tune", "cap", "--dtype", "b"])).toEqual(["bf16"]);
    expect(complete(["kerncap", "tune", "cap", "--m"])).toEqual(["--maxrregcount", "--multiset"]);
    expect(complete(["kerncap", "tune", "cap", "--allow"])).toEqual(["--allow-version-mismatch"]);
  });

  test("--worker (check's protocol) is in no completion script, no --help and no usage error's list of options, and still works", async () => {
    for (const shell of ["bash", "zsh", "fish"]) expect(readFileSync(script(shell), "utf8"), shell).not.toMatch(/--worker\b|-l worker\b/); // eval's --workers-per-gpu is an option for people
    const help = Bun.spawnSync([process.execPath, MAIN, "check", "--help"], { stdout: "pipe" }).stdout.toString();
    expect(help).toContain("--junit");
    expect(help).not.toContain("--worker");
    const bad = Bun.spawnSync([process.execPath, MAIN, "check", "--bogus", "--json"], { stdout: "pipe", stderr: "pipe" });
    expect(JSON.parse(bad.stdout.toString()).error.hint).not.toContain("--worker");
    const { checkArgs } = await import("../../src/cli/main.ts");
    const { commands } = await import("../../src/cli/verbs.ts");
    expect(await checkArgs("check", await commands.check(), ["--worker"])).toEqual(["--worker"]);
  });

  test.skipIf(!Bun.which("fish"))("fish: files after --, the verb is kerncap's first word (not the application's), ncu spellings and --no-NAME", () => {
    const f = script("fish");
    const d = tempDir();
    writeFileSync(join(d, "app.sh"), "");
    const complete = (line: string) => {
      const p = Bun.spawnSync(["fish", "--no-config", "-c", `source ${f}; complete -C '${line}'`], { cwd: d, stdout: "pipe", stderr: "pipe" });
      expect(p.exitCode, p.stderr.toString()).toBe(0);
      return p.stdout
        .toString()
        .split("\n")
        .filter(Boolean)
        .map((l) => l.split("\t")[0]!);
    };
    expect(complete("kerncap run -- ./ap")).toEqual(["./app.sh"]);
    expect(complete("kerncap run --launch")).toEqual(["--launch-skip"]);
    expect(complete("kerncap inspect --no-v")).toEqual(["--no-verify"]);
    expect(complete("kerncap list -- python3 list --js")).toEqual([]); // after --: the application's words, never kerncap's options
  });

  test.skipIf(!Bun.which("zsh"))("zsh: the script parses", () => {
    const p = Bun.spawnSync(["zsh", "-n", script("zsh")], { stderr: "pipe" });
    expect(p.exitCode, p.stderr.toString()).toBe(0);
  });
});
