#!/usr/bin/env bun
/**
 * kerncap entry point: a lazy registry of verbs (one file each in ./commands) and the one error
 * path: every KerncapError is printed here with its hint and mapped to its exit code
 * (0 ok/match, 1 mismatch, 2 error). Stack traces only with --verbose.
 */
import { defineCommand, runCommand, type ArgsDef, type CommandDef } from "citty";
import { existsSync, lstatSync, readFileSync, readlinkSync } from "node:fs";
import { type ErrorCode, isKerncapError, KerncapError, systemError } from "../errors.ts";
import { preferredCacheDir } from "../cache.ts";
import { log, setVerbose } from "../log.ts";
import { endWithParent, PARENT_PID_VAR } from "../process-group.ts";
import { setAclProbe } from "../user-group.ts";
import { hasAccessAcl } from "../native/libc.ts";
import { verboseFromEnv } from "../env.ts";
import { TOOL_VERSION } from "../version.ts";
import { HIDDEN_OPTIONS, printJson, printJsonLine, refuseNotUtf8Arguments } from "./args.ts";
import { commands } from "./verbs.ts";
import { helpText } from "./help.ts";
import { asShown, printable } from "./format.ts";
import { editDistance } from "../util/text.ts";
import { shellPath } from "../util/shell-quote.ts";

export { commands };

export const main = defineCommand({
  meta: { name: "kerncap", version: TOOL_VERSION, description: "Capture one GPU kernel launch from an application; replay, edit and validate it in seconds" },
  subCommands: commands,
});

type Verb = keyof typeof commands;
/** Verbs whose positional takes any number of values (`check DIR…`). */
/** This process's own arguments (runCli checks their bytes: refuseNotUtf8Arguments); a test's runCli(argv) is not checked. */
const processArgs = process.argv.slice(2);
const MANY_POSITIONALS: ReadonlySet<Verb> = new Set(["check", "eval", "clean"]);
const isVerb = (x: string | undefined): x is Verb => x !== undefined && Object.hasOwn(commands, x);

/** The options that may be given more than once (each use adds one value). */
const REPEATABLE = new Set(["kernel", "multiset", "dtype", "config", "define", "nvcc-flag", "nvtx-include", "nvtx-exclude"]);

/**
 * When an argument taken for an option also names a file or folder (relative to the current
 * folder: a folder named `-dash`): how to write it as a path, in parentheses to append; "" otherwise.
 * (`--` ends kerncap's options for `run` and `list` only, where the application follows: `./-dash` works for every verb.)
 */
export function dashPathHint(a: string): string {
  let st;
  try {
    st = lstatSync(a);
  } catch {
    return "";
  }
  return ` (a ${st.isDirectory() ? "folder" : "file"} ${a} is here: to mean it, write ${shellPath(a)})`;
}

/**
 * Old spellings that now mean something else: `-f`/`--force` replaces a verb's output (ncu's
 * `-f`); the toolchain override of validate, profile --build and check --rebuild, which it once
 * also named, is `--allow-version-mismatch`. Said where a verb has no output to replace.
 */
const RENAMED: Record<string, { to: string; why: string }> = {
  f: {
    to: "allow-version-mismatch",
    why: "-f replaces an output (as ncu's -f); building with another Triton version than the capture's is --allow-version-mismatch",
  },
  force: {
    to: "allow-version-mismatch",
    why: "--force replaces an output (as ncu's -f); building with another Triton version than the capture's is --allow-version-mismatch",
  },
};

/**
 * Reject options the verb does not define and stray positionals, before anything runs (a typo such
 * as --dispach must not silently fall back to a default). An option that takes one value and is
 * given more than once is set by its last use (ncu's rule): the earlier uses are left out of the
 * arguments returned, which are what the verb parses.
 * @returns `args` without the earlier uses of options given again
 * @throws KerncapError E_USAGE
 */
export async function checkArgs(verb: Verb, cmd: CommandDef<any>, args: string[]): Promise<string[]> {
  const defs = ((typeof cmd.args === "function" ? await cmd.args() : await cmd.args) ?? {}) as ArgsDef;
  const { known, positionals } = spellingsOf(defs);
  const options = optionList(defs);
  let seen = 0;
  // option → where its last use starts and ends in `args`: an option that takes one value, given
  // again (under any spelling, a switch with its negation too), is set by its last use, as ncu and
  // most command-line tools do (an alias or a script's defaults, then the user's own choice)
  const last = new Map<string, [number, number]>();
  const dropped = new Set<number>();
  for (let i = 0; i < args.length; i++) {
    const a = args[i]!;
    if (a.startsWith("-") && a !== "-") {
      const name = a.replace(/^--?/, "").split("=")[0]!;
      const opt = checkOption(verb, a, name, known, options);
      const start = i;
      const d = defs[opt];
      checkSwitchValue(a, opt, d);
      if (d && d.type !== "boolean" && !a.includes("=")) {
        // the option's value: present, and not the next option (a negative number is a value)
        const v = args[i + 1];
        if (v === undefined || v.startsWith("--")) {
          const long = a.startsWith("--");
          // the option's own placeholder and help (mcp --print-config's names the clients)
          // (else the option's name, as --help shows it: -o OUT, not -o VALUE; a new user's finding)
          const V = typeof d.valueHint === "string" ? d.valueHint : (opt ?? "value").toUpperCase().replace(/-/g, "_");
          throw new KerncapError("E_USAGE", `${a} needs a value${d.description ? ` (${V}: ${d.description})` : ""}`, {
            hint: `For example ${long ? `${a} ${V} or ${a}=${V}` : `${a} ${V}`}; run \`kerncap ${verb} --help\`.`,
          });
        }
        i++;
      }
      // --kernel, --multiset, --dtype (one REGION=T each; a plain T given twice: the last, src/cli/args.ts toleranceOptions), --config,
      // --define, --nvcc-flag and --nvtx-include/--nvtx-exclude add one value each use (REPEATABLE)
      if (opt && !REPEATABLE.has(opt)) {
        const prev = last.get(opt);
        if (prev) for (let k = prev[0]; k <= prev[1]; k++) dropped.add(k);
        last.set(opt, [start, i]);
      }
      continue;
    }
    if (++seen > positionals && !MANY_POSITIONALS.has(verb)) {
      throw new KerncapError("E_USAGE", `unexpected argument ${JSON.stringify(a)} for \`kerncap ${verb}\``, {
        hint:
          verb === "run" || verb === "list"
            ? "Put the application after `--`: kerncap " + verb + " [options] -- APP [ARGS…]"
            : `Run \`kerncap ${verb} --help\`.`,
      });
    }
  }
  return args.filter((_a, k) => !dropped.has(k));
}

/** Every spelling of a verb's options (name, no-name, aliases such as ncu's -k/--kernel-name) → the option it means, and how many positionals it takes. */
function spellingsOf(defs: ArgsDef): { known: Map<string, string>; positionals: number } {
  const known = new Map<string, string>();
  let positionals = 0;
  for (const [name, d] of Object.entries(defs)) {
    if (d.type === "positional") {
      positionals++;
      continue;
    }
    known.set(name, name);
    if (d.type === "boolean") known.set(`no-${name}`, name);
    for (const a of [("alias" in d ? d.alias : undefined) ?? []].flat()) known.set(a, name);
  }
  return { known, positionals };
}

/**
 * Every spelling of each option, as the user may have typed it, for the hints: its aliases (ncu's
 * -k, --launch-skip, -o, -f), and --no-NAME of a switch that is on by default or documents its negation.
 */
function optionList(defs: ArgsDef): string {
  return Object.entries(defs)
    .filter(([n, d]) => d.type !== "positional" && !HIDDEN_OPTIONS.has(n))
    .map(([n, d]) => {
      // citty adds the camelCase form of a hyphenated name (launchCount) to a definition it parsed with: not a spelling to offer
      const camel = n.replace(/-([a-z])/g, (_m, c: string) => c.toUpperCase());
      const aliases = [("alias" in d ? d.alias : undefined) ?? []]
        .flat()
        .filter((a) => a !== camel)
        .map((a) => (a.length === 1 ? `-${a}` : `--${a}`));
      const no = d.type === "boolean" && (d.default === true || d.negativeDescription) ? [`--no-${n}`] : [];
      return `--${n}${aliases.length ? ` (${aliases.join(", ")})` : ""}${no.length ? `, ${no.join(", ")}` : ""}`;
    })
    .join(", ");
}

/**
 * The option argument `a` (spelled `name`) names for `verb`, or the error that says why it names none:
 * a long name after one dash, --json of a verb without it, an old spelling (RENAMED), an unknown option.
 * @throws KerncapError E_USAGE
 */
function checkOption(verb: Verb, a: string, name: string, known: Map<string, string>, options: string): string {
  // one dash takes one letter (-o, -k, -f); `-out` would be read as -o "ut", `-force` as -f -o "rce"
  if (!a.startsWith("--") && name.length > 1) {
    const long = known.has(name) ? `--${name}` : undefined;
    throw new KerncapError("E_USAGE", `${a}: an option of one dash is one letter${long ? `; did you mean ${long}?` : ""}${dashPathHint(a)}`, {
      hint: `Long options take two dashes (${long ?? "--name"}); run \`kerncap ${verb} --help\`.`,
    });
  }
  const opt = known.get(name);
  if (opt !== undefined) return opt;
  const takesApp = verb === "run" || verb === "list";
  if (name === "json") {
    // the verbs without --json: their stdout is already a protocol or a script (the error still comes as a JSON document, as --json was asked for)
    throw new KerncapError(
      "E_USAGE",
      `\`kerncap ${verb}\` has no --json: ${verb === "mcp" ? "its stdout carries the MCP session's JSON-RPC messages" : "it prints a shell script"}`,
      {
        hint: `Run it without --json.${verb === "mcp" ? " Each tool returns its verb's JSON document (schema kerncap.<verb>/N)." : ""} Its options: ${options}.`,
      },
    );
  }
  const renamed = RENAMED[name];
  if (renamed && known.has(renamed.to)) {
    throw new KerncapError("E_USAGE", `${a}: \`kerncap ${verb}\` writes no output for it to replace; ${renamed.why}`, { hint: `Write --${renamed.to}.` });
  }
  // the closest long option by edit distance (--iter → --iters, --verfy → --verify), as an unknown verb gets
  const near = [...known.keys()].filter((k) => k.length > 1 && editDistance(name, k) <= 2).sort((x, y) => editDistance(name, x) - editDistance(name, y))[0];
  throw new KerncapError("E_USAGE", `unknown option ${a} for \`kerncap ${verb}\`${near ? `; did you mean --${near}?` : ""}${dashPathHint(a)}`, {
    hint: `Its options: ${options}.${takesApp ? " Put the application's own options after `--`." : ""}`,
  });
}

/**
 * A switch given `=VALUE` takes only true or false (citty takes any value but "false" as true:
 * --force=0 forced); --trust=DIGEST excepted, a switch that also takes the digest a refusal
 * printed (args.ts trustArg checks it).
 * @throws KerncapError E_USAGE
 */
function checkSwitchValue(a: string, opt: string, d: ArgsDef[string] | undefined): void {
  if (!d || d.type !== "boolean" || !a.includes("=") || OPTIONAL_VALUE_SWITCHES.has(opt)) return;
  const val = a.slice(a.indexOf("=") + 1);
  if (val !== "true" && val !== "false") {
    throw new KerncapError("E_USAGE", `${a}: --${opt} is a switch; its value can only be true or false`, {
      hint: `Give --${opt} alone to set it, or leave it out (--no-${opt} where it is on by default).`,
    });
  }
}

/**
 * kerncap's own arguments with each short option written `-x=VALUE` split into `-x VALUE`, as
 * for the long spelling `--xx=VALUE` (citty's parser would keep "=VALUE", "=" included, as the
 * value of a short option: `-o=eq.zip` wrote a file named "=eq.zip"). Only a single letter after
 * one dash; everything else unchanged.
 */
export function shortEquals(args: string[]): string[] {
  return args.flatMap((a) => {
    const m = /^-([A-Za-z])=(.*)$/s.exec(a);
    return m ? [`-${m[1]}`, m[2]!] : [a];
  });
}

/** O_CLOEXEC in /proc/self/fdinfo's octal `flags` (asm-generic/fcntl.h). */
const O_CLOEXEC = 0o2000000;

/**
 * Which of stdout and stderr the caller closed (`kerncap … >&-`, `2>&-`). The Bun runtime opens
 * /dev/null on a closed fd 0–2 at startup (with O_CLOEXEC), so output to it is silently lost; a
 * descriptor that a shell or parent passed on never has O_CLOEXEC (it had to survive exec).
 * A descriptor missing from /proc/self/fdinfo is closed too (a runtime that leaves it so).
 * Source: /proc/self/fdinfo/N `flags` and /proc/self/fd/N. Linux only: undefined elsewhere.
 */
export function closedStdio(proc = "/proc/self"): "stdout" | "stderr" | undefined {
  for (const [fd, name] of [
    [1, "stdout"],
    [2, "stderr"],
  ] as const) {
    let info: string;
    try {
      info = readFileSync(`${proc}/fdinfo/${fd}`, "utf8");
    } catch {
      // no such descriptor (a runtime that leaves it closed), unless there is no /proc at all
      if (existsSync(`${proc}/fdinfo`)) return name;
      continue;
    }
    const flags = /^flags:\s*([0-7]+)$/m.exec(info)?.[1];
    if (flags && parseInt(flags, 8) & O_CLOEXEC && readlinkSync(`${proc}/fd/${fd}`) === "/dev/null") return name;
  }
  return undefined;
}

/** Switches that also take a value after `=`: `--trust=DIGEST`, judge's `--accept=DIGEST` (src/cli/args.ts trustArg). */
const OPTIONAL_VALUE_SWITCHES = new Set(["trust", "accept"]);

/** Run the CLI on argv; returns the exit code instead of exiting (used by tests too). */
export async function runCli(argv: string[]): Promise<number> {
  // kerncap's own arguments end at `--`: the application's (even a --json or --verbose of its own) follow
  const dd = argv.indexOf("--");
  const own = dd < 0 ? argv : argv.slice(0, dd);
  // KERNCAP_VERBOSE: as --verbose, for the verb too (its builds' output, the capture library's log)
  const verbose = own.includes("--verbose") || verboseFromEnv();
  // --json=true is --json (a switch takes =true/=false): a failure's document must come then too
  const wantJson = own.includes("--json") || own.includes("--json=true");
  setVerbose(verbose);
  const closed = closedStdioExit(wantJson);
  if (closed !== undefined) return closed;
  const verb = own.find((a) => !a.startsWith("-"));
  // `kerncap help VERB` is `kerncap VERB --help`; the help of a word that is no verb is the unknown-command error below
  const helpOf = verb === "help" ? own.find((a, i) => i > own.indexOf("help") && !a.startsWith("-")) : verb;
  if ((own.length === 0 || own.includes("--help") || own.includes("-h") || verb === "help") && (helpOf === undefined || isVerb(helpOf))) {
    if (own.length === 0) log.error("E_USAGE: no command given: kerncap VERB [options] (the verbs below)");
    const sub = helpOf as Verb | undefined;
    process.stdout.write(await helpText(main, sub, sub ? await commands[sub]() : undefined, process.stdout.isTTY));
    return own.length === 0 ? 2 : 0;
  }
  if (own.includes("--version") || own.includes("-V")) {
    if (wantJson) printJson("version", { version: TOOL_VERSION });
    else process.stdout.write(TOOL_VERSION + "\n");
    return 0;
  }
  const fail = failWith(wantJson, verb === "validate" && own.includes("--watch"), verb === "eval");
  try {
    // Dispatch the verb here rather than through citty's subCommands: runCommand returns only the
    // parent's result, and a verb's result is its exit code (0 match, 1 mismatch).
    if (!isVerb(verb)) return unknownVerb(verb, helpOf, own, fail);
    if (argv === processArgs) refuseNotUtf8Arguments(); // the bytes given are the process's own
    // a relative KERNCAP_CACHE is refused by every verb alike, before any work (nu #2: the builds took it, doctor
    // said they could not); doctor reports it as one of its checks
    if (verb !== "doctor") preferredCacheDir();
    ownFilesUmask(verb);
    return await runVerb(verb, own, argv, verbose, fail);
  } catch (e) {
    return failureOf(e, verb, verbose, fail);
  }
}

/** Verbs that start the user's application (run, list) or its server (mcp, whose run tool does): the application keeps the user's umask. */
const KEEPS_UMASK: ReadonlySet<string> = new Set(["run", "list", "mcp"]);

/**
 * What kerncap writes (captures, exports, build outputs, eval's copies, reports) has no group or
 * other write bit whatever the umask (a trial: under umask 002 an export in a team folder was the
 * team's to change, its GNUmakefile run at the user's `make`; a build/ file made the user's own
 * capture count as received): every verb but those that start the user's application runs with
 * the umask's group and other write bits set. Its children (build.sh, nvcc) inherit it.
 */
function ownFilesUmask(verb: string): void {
  if (!KEEPS_UMASK.has(verb)) process.umask(process.umask() | 0o022);
}

/** How runCli ends with an error: it is logged (escaped), and with --json printed as the error document; returns the exit status. */
type Fail = (code: ErrorCode, message: string, hint?: string, exitCode?: number, details?: Record<string, unknown>) => number;

/**
 * The exit status when stdout or stderr is closed (`>&-`, `2>&-`), said on the one channel left
 * (with --json, as an error document on stdout); undefined when both are open.
 */
function closedStdioExit(wantJson: boolean): number | undefined {
  const closed = closedStdio();
  if (closed === "stdout") {
    const code: ErrorCode = "E_STDOUT_CLOSED";
    log.error(`${code}: stdout is closed (\`>&-\`): kerncap's results and documents would be lost`);
    log.info("Send it to a file, a pipe or /dev/null instead (`>/dev/null` to discard it).");
    return 2;
  }
  if (closed === "stderr") {
    // the one channel left says it, so that a script sees why kerncap did nothing
    if (wantJson)
      printJson("error", {
        error: { code: "E_STDERR_CLOSED", message: "stderr is closed (`2>&-`)", hint: "Send it to a file or /dev/null instead (`2>/dev/null`)." },
      });
    else
      process.stdout.write(
        "kerncap: stderr is closed (`2>&-`): its messages and errors would be lost; send it to a file or /dev/null instead (`2>/dev/null`)\n",
      );
    return 2;
  }
  return undefined;
}

/**
 * The one error path of runCli: `watchStream` when the verb is validate --watch (--json: a JSON
 * Lines stream, the error one of its events); `lines` when the verb's --json is JSON Lines of
 * documents (eval: its records, then its report), where the error document is one line too (nu7
 * #1: a reader taking it line by line failed on the indented document).
 */
function failWith(wantJson: boolean, watchStream: boolean, lines = false): Fail {
  return (code, message, hint, exitCode = 2, details) => {
    // a message may carry an application's command line or a shared capture's names: no terminal escapes;
    // its code first, the one docs/errors.md and --json name (nu9 #14: the text showed none)
    log.error(`${code}: ${printable(message)}`);
    if (hint) log.info(printable(hint));
    // validate --watch --json is a JSON Lines stream (src/rebuild/watch.ts): an error that ends it, at startup too, is one record of it
    // the document's text is the log's (consola drops the marks of `code`)
    const [m, h] = [asShown(message), hint === undefined ? null : asShown(hint)];
    if (wantJson && watchStream) {
      printJsonLine("validate-watch", {
        event: "error",
        trigger: "start",
        files: [],
        at: new Date().toISOString(),
        code,
        message: m,
        hint: h,
        buildSeconds: null,
        saveToVerdictSeconds: 0,
      });
    } else if (wantJson) (lines ? printJsonLine : printJson)("error", { error: { code, message: m, hint: h, ...(details ? { details } : {}) } });
    return exitCode;
  };
}

/** Words that are no verb but name one's work (kerncap mcp's tools, other tools' verbs): the command that does it. */
const VERB_ALIASES: Record<string, string> = {
  evaluate: "eval",
  build: "validate --build-only",
  rebuild: "validate --build-only",
  capture: "run",
  record: "run",
  compare: "replay --against",
  benchmark: "replay",
  bench: "replay",
  verify: "inspect --verify",
  archive: "pack",
  extract: "unpack",
};

/** A word that is no verb (`kerncap nosuchverb`, `kerncap help nosuchverb`), or options and no verb: E_USAGE with the nearest verb. */
function unknownVerb(verb: string | undefined, helpOf: string | undefined, own: string[], fail: Fail): number {
  const globalOptions = new Set(["--help", "-h", "--version", "-V", "--json", "--verbose"]);
  const word = verb === "help" ? helpOf : verb; // `kerncap help nosuchverb`: the word asked about
  const stray = word ? undefined : own.find((a) => !globalOptions.has(a));
  // the MCP tools' and other tools' names for a verb (agent-skill.md says evaluate, build): the verb that does it
  const alias = word && Object.hasOwn(VERB_ALIASES, word.toLowerCase()) ? VERB_ALIASES[word.toLowerCase()] : undefined;
  const near = alias
    ? alias
    : word
      ? Object.keys(commands)
          .filter((c) => editDistance(word, c) <= 2)
          .sort((a, b) => editDistance(word, a) - editDistance(word, b))[0]
      : undefined;
  return fail(
    "E_USAGE",
    word
      ? `unknown command: ${word}${near ? `; did you mean ${near}?` : ""}`
      : stray
        ? `unknown option ${stray} (no command given)${dashPathHint(stray)}`
        : "no command given",
    `Commands: ${Object.keys(commands).join(", ")}. Run \`kerncap --help\`.`,
  );
}

/** Run `verb` on its arguments (checked by checkArgs; those after `--` only for the verbs that run an application): its result is the exit status. */
async function runVerb(verb: Verb, own: string[], argv: string[], verbose: boolean, fail: Fail): Promise<number> {
  const cmd = await commands[verb]();
  // before the verb only --json and --verbose (given to the verb); anything else there would be lost
  const before = own.slice(0, own.indexOf(verb));
  const strayBefore = before.find((a) => a !== "--json" && a !== "--verbose");
  if (strayBefore)
    return fail(
      "E_USAGE",
      `${strayBefore} before the command: kerncap's options follow it`,
      `Write \`kerncap ${verb} ${strayBefore} …\` (run \`kerncap ${verb} --help\`).`,
    );
  const rest = [...before, ...argv.slice(argv.indexOf(verb) + 1)];
  const restDd = rest.indexOf("--");
  // profile passes what follows `--` to ncu (or nsys)
  if (restDd >= 0 && verb !== "run" && verb !== "list" && verb !== "profile" && rest.length > restDd + 1) {
    return fail(
      "E_USAGE",
      `\`kerncap ${verb}\` runs no application: unexpected ${JSON.stringify(rest.slice(restDd + 1).join(" "))} after --`,
      `Run \`kerncap ${verb} --help\`.`,
    );
  }
  // `-o=x.zip` means `-o x.zip` (citty would take "=x.zip" as the value of a short option)
  const ownRest = await checkArgs(verb, cmd, shortEquals(restDd < 0 ? rest : rest.slice(0, restDd)));
  const ownArgs = verbose && !ownRest.includes("--verbose") ? [...ownRest, "--verbose"] : ownRest;
  const rawArgs = restDd < 0 ? ownArgs : [...ownArgs, ...rest.slice(restDd)];
  const { result } = await runCommand(cmd, { rawArgs });
  return typeof result === "number" ? result : 0;
}

/**
 * What a thrown error ends runCli with: a KerncapError its code, hint and exit status; EPIPE 141
 * (the reader of stdout went away); an expected file-system failure its systemError; citty's
 * parse errors E_USAGE; anything else E_INTERNAL (a kerncap bug).
 */
function failureOf(e: unknown, verb: string | undefined, verbose: boolean, fail: Fail): number {
  if (isKerncapError(e)) {
    if (verbose && e.stack) log.debug(e.stack);
    return fail(e.code, e.message, e.hint, e.exitCode, e.details);
  }
  const err = e as NodeJS.ErrnoException;
  // the reader of stdout went away (`kerncap inspect DIR --json | head`): nothing more to say
  if (err.code === "EPIPE") return 141;
  // an expected file-system failure (read-only folder, dangling symbolic link as -o, disk full…) is the user's to fix, not a bug
  const sys = systemError(err);
  if (sys) {
    if (verbose && err.stack) log.debug(err.stack);
    return fail(sys.code, sys.message, sys.hint, sys.exitCode);
  }
  if (/Unknown command|Missing required|Invalid value/i.test(err.message ?? "")) {
    // a capture folder's verb run inside that folder: the folder is `.` (never taken without being said)
    const here = /Missing required positional argument: DIR/i.test(err.message ?? "") && existsSync("kerncap.json");
    // citty's words in kerncap's style (a new user's finding: the only capitalised message)
    const missing = /^Missing required positional argument: (\S+)$/i.exec(err.message ?? "")?.[1];
    return fail(
      "E_USAGE",
      missing ? `${verb} needs ${missing} (none given)` : err.message,
      here ? `This folder is a capture: name it, \`kerncap ${verb} .\`.` : `Run \`kerncap ${isVerb(verb) ? verb + " " : ""}--help\` for the options.`,
    );
  }
  if (verbose && err.stack) log.error(err.stack);
  return fail(
    "E_INTERNAL",
    `internal error: ${err.message}`,
    verbose ? undefined : "This is a kerncap bug; run with --verbose for the stack trace and report it.",
  );
}

// the folders checks of src/user-group.ts see POSIX ACLs through libc (this base module loads no library itself)
setAclProbe(hasAccessAcl);

if (import.meta.main) {
  // a closed stdout (EPIPE) is the reader's choice, not a kerncap failure: exit as a piped tool does
  process.stdout.on("error", (e: NodeJS.ErrnoException) => {
    if (e.code === "EPIPE") process.exit(141);
    process.stderr.write(`[kerncap] cannot write the output: ${e.message} (the output is full or failing; write elsewhere)\n`);
    process.exit(2);
  });
  // stderr full or failing (`2>/dev/full`): its messages are lost, so the exit code must say so
  let stderrFailure: NodeJS.ErrnoException | undefined;
  process.stderr.on("error", (e: NodeJS.ErrnoException) => {
    if (e.code === "EPIPE") process.exit(141);
    stderrFailure ??= e;
  });
  // a tool child of kerncap mcp: ended with its server (the variable is not passed on to this process's own children)
  const parent = process.env[PARENT_PID_VAR];
  delete process.env[PARENT_PID_VAR];
  if (parent !== undefined) endWithParent(Number(parent));
  const argv = processArgs;
  const code = await runCli(argv);
  await new Promise((r) => setImmediate(r)); // a failed write's error event comes a turn later
  if (stderrFailure) {
    const own = argv.includes("--") ? argv.slice(0, argv.indexOf("--")) : argv;
    // stdout carries a JSON document under --json: the exit code alone tells it there
    if (!own.includes("--json")) process.stdout.write(`kerncap: cannot write its messages to stderr (${stderrFailure.message}); they were lost\n`);
    process.exitCode = 2;
  } else process.exitCode = code;
}
