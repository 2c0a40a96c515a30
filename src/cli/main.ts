#!/usr/bin/env bun
/**
 * kerncap entry point: a lazy registry of verbs (one file each in ./commands) and the one error
 * path: every KerncapError is printed here with its hint and mapped to its exit code
 * (0 ok/match, 1 mismatch, 2 error). Stack traces only with --verbose.
 */
import { defineCommand, runCommand, showUsage, type CommandDef } from "citty";
import { isKerncapError } from "../errors.ts";
import { log, setVerbose } from "../log.ts";
import { TOOL_VERSION } from "../version.ts";

export const commands = {
  list: () => import("./commands/list.ts").then((m) => m.default),
  run: () => import("./commands/run.ts").then((m) => m.default),
  inspect: () => import("./commands/inspect.ts").then((m) => m.default),
  replay: () => import("./commands/replay.ts").then((m) => m.default),
  validate: () => import("./commands/validate.ts").then((m) => m.default),
} satisfies Record<string, () => Promise<CommandDef<any>>>;

export const main = defineCommand({
  meta: { name: "kerncap", version: TOOL_VERSION, description: "Capture one GPU kernel launch from an application; replay, edit and validate it in seconds" },
  subCommands: commands,
});

/** Run the CLI on argv; returns the exit code instead of exiting (used by tests too). */
export async function runCli(argv: string[]): Promise<number> {
  const verbose = argv.includes("--verbose");
  setVerbose(verbose);
  // citty parses options everywhere; keep the app's own argv (after `--`) out of its way.
  const dd = argv.indexOf("--");
  const own = dd < 0 ? argv : argv.slice(0, dd);
  if (own.length === 0 || own.includes("--help") || own.includes("-h")) {
    const sub = own.find((a) => a in commands) as keyof typeof commands | undefined;
    await showUsage(sub ? await commands[sub]() : main, sub ? main : undefined);
    return own.length === 0 ? 2 : 0;
  }
  if (own.includes("--version")) {
    process.stdout.write(TOOL_VERSION + "\n");
    return 0;
  }
  try {
    // Dispatch the verb here rather than through citty's subCommands: runCommand returns only the
    // parent's result, and a verb's result is its exit code (0 match, 1 mismatch).
    const verb = own.find((a) => !a.startsWith("-"));
    if (!verb || !(verb in commands)) {
      log.error(verb ? `unknown command: ${verb}` : "no command given");
      log.info(`Commands: ${Object.keys(commands).join(", ")}. Run \`kerncap --help\`.`);
      return 2;
    }
    const cmd = await commands[verb as keyof typeof commands]();
    const { result } = await runCommand(cmd, { rawArgs: argv.slice(argv.indexOf(verb) + 1) });
    return typeof result === "number" ? result : 0;
  } catch (e) {
    if (isKerncapError(e)) {
      log.error(e.message);
      if (e.hint) log.info(e.hint);
      if (verbose && e.stack) log.debug(e.stack);
      if (argv.includes("--json")) process.stdout.write(JSON.stringify({ error: { code: e.code, message: e.message, hint: e.hint ?? null } }, null, 2) + "\n");
      return e.exitCode;
    }
    const err = e as Error;
    if (/Unknown command|Missing required|Invalid value/i.test(err.message ?? "")) {
      log.error(err.message);
      log.info("Run `kerncap --help` for the verbs and their options.");
      return 2;
    }
    log.error(`internal error: ${err.message}`);
    if (err.stack) log.error(verbose ? err.stack : "(run with --verbose for the stack trace)");
    return 2;
  }
}

if (import.meta.main) {
  process.exitCode = await runCli(process.argv.slice(2));
}
