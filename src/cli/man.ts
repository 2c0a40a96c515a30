/**
 * The manual page kerncap(1), generated from the verb table (src/cli/verbs.ts: each verb's
 * description and options, with their aliases, values and defaults) and the help's examples
 * (src/cli/help.ts EXAMPLES), so that it says what `--help` says. scripts/make-man.ts writes it to
 * docs/kerncap.1; test/cpu/man.test.ts fails when that file is not what this module makes now.
 * Written in man(7) macros; text is escaped for roff (backslashes, a leading dot or quote, option
 * dashes as \-, and any character past ASCII as \[uXXXX]).
 */
import type { ArgsDef, CommandDef } from "citty";
import { HIDDEN_OPTIONS } from "./args.ts";
import { EXAMPLES } from "./help.ts";

/** Text for a roff line: backslashes doubled as \e, dashes as \- (so they stay ASCII hyphen-minus), a control character at the start neutralised. */
export function roff(s: string): string {
  return s
    .replace(/\\/g, "\\e")
    .replace(/-/g, "\\-")
    .replace(/^([.'])/gm, "\\&$1")
    .replace(/[^\x00-\x7f]/gu, (c) => `\\[u${c.codePointAt(0)!.toString(16).toUpperCase().padStart(4, "0")}]`); // µ, ×, —: groff's named Unicode glyphs, the file stays ASCII
}

const EXIT_STATUS: [string, string][] = [
  ["0", "success; the replay matched the application's result"],
  [
    "1",
    "a mismatch: replay and validate (MISMATCH), check (a capture mismatched or got slower), tune (no row matched, the app's own build included); eval reports a candidate's mismatch in its document and exits 0",
  ],
  [
    "2",
    "an error, with its code and a message saying what to do (under --json also a kerncap.error/1 document on stdout; check, eval and inspect --verify that found damage print their own document instead, validate --watch --json an error event)",
  ],
  ["130, 143", "interrupted by SIGINT or SIGTERM (129, 131 for SIGHUP, SIGQUIT)"],
  ["141", "the reader of stdout went away"],
];

/** The synopsis of the verbs that take several positionals (one positional in their argument table). */
const MANY_POSITIONALS: Record<string, string> = {
  check: "\\fIDIR\\fR...",
  eval: "\\fIDIR\\fR... \\fICANDIDATE\\fR...",
};

/** The page for these verbs (the verb table's commands, loaded). */
export async function manPage(commands: Record<string, () => Promise<CommandDef<any>>>, version: string): Promise<string> {
  const L: string[] = [
    `.TH KERNCAP 1 "" "kerncap ${roff(version)}" "User Commands"`,
    ".SH NAME",
    "kerncap \\- capture one GPU kernel launch from an application; replay, edit and validate it in seconds",
    ".SH SYNOPSIS",
    ".B kerncap",
    ".I verb",
    "[\\fIoptions\\fR] [\\fB\\-\\-\\fR \\fIapp\\fR [\\fIargs\\fR...]]",
    ".SH DESCRIPTION",
    roff(
      "kerncap run injects a small capture library into the application (CUPTI, through CUDA_INJECTION64_PATH), waits for the Nth launch of a kernel whose name matches, and writes a capture: the module image, the kernel parameters, the launch configuration and a snapshot of every live device allocation before and after the launch, at their virtual addresses. kerncap replay maps that memory back at the same addresses, launches the kernel again and judges the result against the application's. The capture is also a reproducer project: edit its source, and kerncap validate rebuilds, replays and judges again.",
    ),
    ".PP",
    roff(
      "Every verb takes --verbose, and every verb but mcp and completion takes --json (one document on stdout, its JSON Schema from kerncap schema VERB; eval and validate --watch print JSON Lines, one record per candidate or build, eval's summary last). kerncap's own options end at --: what follows belongs to the application. An option that takes one value and is given more than once is set by its last use; -f/--force always replaces an output that kerncap wrote.",
    ),
    ".SH VERBS",
  ];
  for (const [name, load] of Object.entries(commands)) {
    const cmd = await load();
    const meta = (typeof cmd.meta === "function" ? await cmd.meta() : await cmd.meta) ?? {};
    const defs = ((typeof cmd.args === "function" ? await cmd.args() : await cmd.args) ?? {}) as ArgsDef;
    const positional = Object.entries(defs).filter(([, d]) => d.type === "positional");
    // check and eval take several folders (and eval its candidates after them), as their --help says
    const pos =
      name in MANY_POSITIONALS
        ? [MANY_POSITIONALS[name]!]
        : positional.map(([n, d]) => ("required" in d && d.required ? `\\fI${roff(n.toUpperCase())}\\fR` : `[\\fI${roff(n.toUpperCase())}\\fR]`));
    const app =
      name === "run" || name === "list"
        ? " \\fB\\-\\-\\fR \\fIAPP\\fR [\\fIARGS\\fR...]"
        : name === "profile"
          ? " [\\fB\\-\\-\\fR \\fINCU OPTIONS\\fR...]"
          : "";
    L.push(".SS " + `\\fB${roff(name)}\\fR ${pos.join(" ")}${app}`.trim());
    L.push(roff(meta.description ?? ""));
    for (const [n, d] of Object.entries(defs)) {
      if (d.type === "positional" || HIDDEN_OPTIONS.has(n)) continue;
      const camel = n.replace(/-([a-z])/g, (_m, c: string) => c.toUpperCase());
      const aliases = [("alias" in d ? d.alias : undefined) ?? []].flat().filter((a) => a !== camel);
      const spell = [`--${n}`, ...aliases.map((a) => (a.length === 1 ? `-${a}` : `--${a}`))];
      const value = d.type === "boolean" ? "" : ` \\fI${roff(("valueHint" in d && d.valueHint) || n.toUpperCase())}\\fR`;
      const neg =
        d.type === "boolean" && (d.default === true || ("negativeDescription" in d && d.negativeDescription)) ? `, \\fB\\-\\-no\\-${roff(n)}\\fR` : "";
      L.push(".TP", `${spell.map((x) => `\\fB${roff(x)}\\fR`).join(", ")}${value}${neg}`);
      const def = d.type !== "boolean" && "default" in d && d.default !== undefined && d.default !== "" ? ` (default ${d.default})` : "";
      L.push(roff(`${d.description ?? ""}${def}`));
    }
    const ex = EXAMPLES[name as keyof typeof EXAMPLES] ?? [];
    if (ex.length) {
      L.push(".PP", "Examples:");
      for (const [c, what] of ex) L.push(".PP", ".RS 4", `\\fB${roff(c)}\\fR`, ".br", roff(what), ".RE");
    }
  }
  L.push(".SH EXIT STATUS");
  for (const [code, what] of EXIT_STATUS) L.push(".TP", `\\fB${roff(code)}\\fR`, roff(what));
  L.push(
    ".SH ENVIRONMENT",
    roff("KERNCAP_VERBOSE=1 is --verbose; every KERNCAP_* variable that kerncap, its libraries and its scripts read is listed in docs/environment.md."),
  );
  L.push(
    ".SH SEE ALSO",
    "\\fBncu\\fR(1), \\fBnsys\\fR(1), \\fBcompute\\-sanitizer\\fR(1); docs/verbs.md, the manual verb by verb (the release tarball's docs/, the wheel's PREFIX/share/doc/kerncap/).",
  );
  return L.join("\n") + "\n";
}
