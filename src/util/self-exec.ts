/**
 * Running this same kerncap again, in a child process: the one place that knows how kerncap is
 * started. Compiled (`bun build --compile`), the executable is its own interpreter and its
 * sources live in the embedded `/$bunfs` file system; under `bun src/cli/main.ts` (the CPU
 * tests, development) the interpreter is bun and the script must come too.
 *
 * Its users: check's and eval's worker processes (src/check/pool.ts, `kerncap check|eval
 * --worker`), the MCP server's tool children (src/mcp/children.ts), the replay that profile runs
 * under Nsight (src/profile/profile.ts), doctor's tiny capture and replay (src/doctor.ts), the
 * client registrations of `kerncap mcp --print-config` (src/mcp/clients.ts), the no-ASLR retry
 * (src/replay/aslr.ts) and the compute-sanitizer command a replay fault suggests
 * (src/replay/engine.ts).
 */
import { resolve } from "node:path";

/** Whether this kerncap is the compiled executable (its modules in Bun's embedded file system). */
function compiled(): boolean {
  return import.meta.dir.startsWith("/$bunfs");
}

/** The command line that runs this same kerncap (compiled: the executable; else bun + src/cli/main.ts); a verb and its options follow. */
export function selfCommand(): string[] {
  return compiled() ? [process.execPath] : [process.execPath, resolve(import.meta.dir, "..", "cli", "main.ts")];
}

/**
 * The command line of this very process again (the same verb and options), for a retry in a
 * child (src/replay/aslr.ts): a compiled kerncap is its own interpreter; under `bun
 * src/cli/main.ts` the script comes too (process.argv[1], the script that was run).
 */
export function thisCommandAgain(): string[] {
  const self = process.argv[1]?.startsWith("/$bunfs/") ? [process.execPath] : [process.execPath, process.argv[1]!];
  return [...self, ...process.argv.slice(2)];
}

/** How a person would type this kerncap in a suggested command ("kerncap" under bun, which the user does not run). */
export function selfName(): string {
  return process.execPath.endsWith("/bun") ? "kerncap" : process.execPath;
}

/**
 * The environment for a kerncap child: `env` without BUN_BE_BUN (set, it makes the executable
 * run its arguments as a bun command line, not as kerncap's: the GPU suites run through it).
 */
export function selfEnv(env: Record<string, string | undefined> = process.env): Record<string, string | undefined> {
  const { BUN_BE_BUN: _, ...rest } = env;
  return rest;
}

/** The command line of a worker process of `verb` (check's, eval's: their `--worker` protocol, src/check/worker.ts), with --verbose when `verbose`. */
export function workerArgv(verb: "check" | "eval", verbose: boolean): string[] {
  return [...selfCommand(), verb, "--worker", ...(verbose ? ["--verbose"] : [])];
}
