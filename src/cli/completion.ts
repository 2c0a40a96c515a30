/**
 * Shell completion scripts generated from the verb table (src/cli/main.ts commands) and each
 * verb's citty args: verbs, their options (--name, aliases, --no-name for booleans), folders for
 * DIR, files for FILE, `bash|zsh|fish` for completion. Nothing is hard-coded per verb.
 */
import type { ArgsDef, CommandDef } from "citty";
import { ELEMENT_BYTES } from "../replay/tolerance.ts";
import { CLIENT_NAMES } from "../mcp/clients.ts";
import { HIDDEN_OPTIONS } from "./args.ts";
import { CHECK_SUMMARIES } from "../check/report.ts";
import { LIST_SUMMARIES } from "./format.ts";

export interface VerbSpec {
  name: string;
  description: string;
  options: { name: string; alias: string[]; boolean: boolean; description: string }[];
  /** What the first positional completes to. */
  positional?: "dir" | "file" | "shell" | "schema" | "none";
}

/** The verb table as completion needs it. */
export async function verbSpecs(commands: Record<string, () => Promise<CommandDef<any>>>): Promise<VerbSpec[]> {
  const out: VerbSpec[] = [];
  for (const [name, load] of Object.entries(commands)) {
    const cmd = await load();
    const meta = (typeof cmd.meta === "function" ? await cmd.meta() : await cmd.meta) ?? {};
    const defs = ((typeof cmd.args === "function" ? await cmd.args() : await cmd.args) ?? {}) as ArgsDef;
    const options: VerbSpec["options"] = [];
    let positional: VerbSpec["positional"] = "none";
    for (const [n, d] of Object.entries(defs)) {
      if (HIDDEN_OPTIONS.has(n)) continue; // check --worker: kerncap's own protocol
      if (d.type === "positional") {
        positional = n === "dir" ? "dir" : n === "file" ? "file" : n === "shell" ? "shell" : n === "name" ? "schema" : "none";
        continue;
      }
      options.push({
        name: n,
        alias: [("alias" in d ? d.alias : undefined) ?? []].flat(),
        boolean: d.type === "boolean",
        description: (d.description ?? "").split(/; |\. | \(/)[0]!.trim(),
      });
    }
    out.push({ name, description: (meta.description ?? "").split(/; |\. | \(/)[0]!.trim(), options, positional });
  }
  return out;
}

const words = (v: VerbSpec) => [
  ...v.options.flatMap((o) => [
    `--${o.name}`,
    ...(o.boolean && o.name !== "json" && o.name !== "verbose" && o.name !== "force" ? [`--no-${o.name}`] : []),
    ...o.alias.map((a) => (a.length === 1 ? `-${a}` : `--${a}`)),
  ]),
  "--help",
];
const sq = (s: string) => `'${s.replace(/'/g, "'\\''")}'`;

/** Options whose value is a path (completed to files and folders); every other valued option's value is not completed, except those of CHOICES. */
const PATH_OPTIONS = new Set([
  "out",
  "source-root",
  "compile-commands",
  "results",
  "baseline",
  "write-baseline",
  "junit",
  "against",
  "module",
  "export",
  "report",
  "csv",
]);
const DTYPES = Object.keys(ELEMENT_BYTES);
/** Options whose value is one of a few words: --dtype's element types, mcp --print-config's clients, list's and check's --print-summary modes, judge's --expect, run's and list's --runtime. */
const CHOICES: Record<string, readonly string[]> = {
  dtype: DTYPES,
  "print-config": CLIENT_NAMES,
  "print-summary": [...new Set([...LIST_SUMMARIES, ...CHECK_SUMMARIES])],
  expect: ["nondeterministic", "deterministic", "any"],
  runtime: ["cuda", "hsa"],
};
/** A CHOICES option whose values differ by verb: list's --print-summary modes are not check's. */
const VERB_CHOICES: Record<string, Record<string, readonly string[]>> = {
  list: { "print-summary": LIST_SUMMARIES },
  check: { "print-summary": CHECK_SUMMARIES },
};
/** The values one verb's option takes (VERB_CHOICES, else CHOICES), or undefined. */
function choicesFor(verb: string, option: string): readonly string[] | undefined {
  return VERB_CHOICES[verb]?.[option] ?? CHOICES[option];
}

/** The spellings of the options that take a value, split into path-valued, one list per CHOICES option, and the rest. */
function valuedSpellings(verbs: VerbSpec[]): { path: string[]; choices: [string[], readonly string[], string][]; other: string[] } {
  const path = new Set<string>();
  const other = new Set<string>();
  const choices = new Map<string, Set<string>>();
  for (const v of verbs) {
    for (const o of v.options) {
      if (o.boolean) continue;
      const spell = [`--${o.name}`, ...o.alias.map((a) => (a.length === 1 ? `-${a}` : `--${a}`))];
      const set = PATH_OPTIONS.has(o.name) ? path : CHOICES[o.name] ? (choices.get(o.name) ?? choices.set(o.name, new Set()).get(o.name)!) : other;
      for (const x of spell) set.add(x);
    }
  }
  // a spelling is a path wherever one verb's option of that spelling takes a path (-o: run's folder, pack's archive, profile's report)
  return {
    path: [...path],
    choices: [...choices].map(([n, s]) => [[...s].filter((x) => !path.has(x)), CHOICES[n]!, n] as [string[], readonly string[], string]),
    other: [...other].filter((x) => !path.has(x)),
  };
}

/** The completion script for one shell. */
export function completionScript(shell: "bash" | "zsh" | "fish", verbs: VerbSpec[], schemaNames: readonly string[]): string {
  if (shell === "bash") return bashScript(verbs, schemaNames);
  if (shell === "zsh") return zshScript(verbs, schemaNames);
  return fishScript(verbs, schemaNames);
}

/** bash's completion of a CHOICES option's value: its values, or per verb where they differ (VERB_CHOICES). */
function bashChoices(verbs: VerbSpec[], option: string, all: readonly string[]): string {
  const own = verbs.filter((v) => VERB_CHOICES[v.name]?.[option]);
  const reply = (w: readonly string[]) => `COMPREPLY=($(compgen -W "${w.join(" ")}" -- "$cur"))`;
  if (!own.length) return reply(all);
  return `case "$verb" in ${own.map((v) => `${v.name}) ${reply(VERB_CHOICES[v.name]![option]!)} ;;`).join(" ")} *) ${reply(all)} ;; esac`;
}

/** bash's: a case per verb, the values of path, CHOICES and other valued options completed by the word before. */
function bashScript(verbs: VerbSpec[], schemaNames: readonly string[]): string {
  const names = verbs.map((v) => v.name).join(" ");
  const vs = valuedSpellings(verbs);
  const cases = verbs
    .map((v) => {
      const pos =
        v.positional === "dir"
          ? `COMPREPLY+=($(compgen -d -- "$cur"))`
          : v.positional === "file"
            ? `COMPREPLY+=($(compgen -f -X '!*.zip' -- "$cur") $(compgen -d -- "$cur"))`
            : v.positional === "shell"
              ? `COMPREPLY+=($(compgen -W "bash zsh fish" -- "$cur"))`
              : v.positional === "schema"
                ? `COMPREPLY+=($(compgen -W "${schemaNames.join(" ")}" -- "$cur"))`
                : ":";
      return `    ${v.name}) if [[ "$cur" == -* ]]; then COMPREPLY=($(compgen -W "${words(v).join(" ")}" -- "$cur")); else ${pos}; fi ;;`;
    })
    .join("\n");
  return `# kerncap bash completion: source it, or put it in ~/.local/share/bash-completion/completions/kerncap
_kerncap() {
  local cur="\${COMP_WORDS[COMP_CWORD]}" verb="" i
  COMPREPLY=()
  for ((i = 1; i < COMP_CWORD; i++)); do
    [[ "\${COMP_WORDS[i]}" == "--" ]] && { COMPREPLY=($(compgen -f -- "$cur")); return; }
    [[ -z "$verb" && "\${COMP_WORDS[i]}" != -* ]] && verb="\${COMP_WORDS[i]}"
  done
  if [[ -z "$verb" ]]; then COMPREPLY=($(compgen -W "${names} --help --version" -- "$cur")); return; fi
  # the value of an option: a path, a --dtype name, or nothing to offer
  case "\${COMP_WORDS[COMP_CWORD-1]}" in
    ${vs.path.join("|")}) COMPREPLY=($(compgen -f -- "$cur")); return ;;
${vs.choices.map(([spell, words, name]) => `    ${spell.join("|")}) ${bashChoices(verbs, name, words)}; return ;;`).join("\n")}
    ${vs.other.join("|")}) return ;;
  esac
  case "$verb" in
${cases}
  esac
}
complete -o filenames -F _kerncap kerncap
`;
}

/** zsh's: the verbs described, an _arguments line per verb. */
function zshScript(verbs: VerbSpec[], schemaNames: readonly string[]): string {
  const verbList = verbs.map((v) => `    ${sq(`${v.name}:${v.description.replace(/:/g, "\\:")}`)}`).join("\n");
  const cases = verbs
    .map((v) => {
      const opts = v.options.map((o) => {
        const desc = o.description.replace(/[\[\]:']/g, " ");
        const flags = [`--${o.name}`, ...o.alias.map((a) => (a.length === 1 ? `-${a}` : `--${a}`))];
        const arg = o.boolean
          ? ""
          : `:${o.name}:${PATH_OPTIONS.has(o.name) ? "_files" : choicesFor(v.name, o.name) ? `(${choicesFor(v.name, o.name)!.join(" ")})` : " "}`;
        return flags.length > 1 ? `'(${flags.join(" ")})'{${flags.join(",")}}'[${desc}]${arg}'` : `'${flags[0]}[${desc}]${arg}'`;
      });
      const pos =
        v.positional === "dir"
          ? `'1:capture folder:_files -/'`
          : v.positional === "file"
            ? `'1:archive:_files -g "*.zip"'`
            : v.positional === "shell"
              ? `'1:shell:(bash zsh fish)'`
              : v.positional === "schema"
                ? `'1:schema:(${schemaNames.join(" ")})'`
                : "";
      return `    ${v.name}) _arguments -s ${[...opts, pos, ...(v.name === "run" || v.name === "list" ? [`'*::application:_normal'`] : [])].filter(Boolean).join(" ")} ;;`;
    })
    .join("\n");
  return `#compdef kerncap
# kerncap zsh completion: put it on $fpath as _kerncap, or: source <(kerncap completion zsh)
_kerncap() {
  local -a verbs
  verbs=(
${verbList}
  )
  # the verb is the first word that is not an option (kerncap --verbose inspect …)
  local verb="" i
  for (( i = 2; i < CURRENT; i++ )); do [[ \${words[i]} != -* ]] && { verb=\${words[i]}; break; }; done
  if [[ -z $verb ]]; then _describe 'kerncap command' verbs; return; fi
  words=("\${(@)words[i,-1]}"); (( CURRENT = CURRENT - i + 1 ))
  case $verb in
${cases}
  esac
}
if [[ $zsh_eval_context[-1] == loadautofunc ]]; then _kerncap "$@"; else compdef _kerncap kerncap; fi
`;
}

/** fish's: a `complete` line per verb, option and spelling, none after `--` (the application's). */
function fishScript(verbs: VerbSpec[], schemaNames: readonly string[]): string {
  const L = [
    `# kerncap fish completion: kerncap completion fish > ~/.config/fish/completions/kerncap.fish`,
    // after \`--\`: the application and its arguments (files); before it kerncap's own words only
    `function __kerncap_after_dd; contains -- -- (commandline -opc); end`,
    // the verb: the first word after kerncap that is not an option (not any later word, which may be the application's)
    `function __kerncap_verb; set -l w (commandline -opc); for x in $w[2..-1]; if test "$x" = "--"; return 1; end; if not string match -q -- '-*' $x; test "$x" = "$argv[1]"; return $status; end; end; return 1; end`,
    `complete -c kerncap -n 'not __kerncap_after_dd' -f`,
    `complete -c kerncap -n '__kerncap_after_dd' -F`,
  ];
  for (const v of verbs) L.push(`complete -c kerncap -n '__fish_use_subcommand' -a ${v.name} -d ${sq(v.description)}`);
  for (const v of verbs) {
    const cond = `'__kerncap_verb ${v.name}; and not __kerncap_after_dd'`;
    for (const o of v.options) {
      const short = o.alias.find((a) => a.length === 1);
      L.push(
        `complete -c kerncap -n ${cond} -l ${o.name}${short ? ` -s ${short}` : ""}${o.boolean ? "" : " -r"}${PATH_OPTIONS.has(o.name) ? " -F" : choicesFor(v.name, o.name) ? ` -a ${sq(choicesFor(v.name, o.name)!.join(" "))}` : ""} -d ${sq(o.description)}`,
      );
      // the other spellings (ncu's --kernel-name, --launch-skip) and --no-NAME of a switch
      for (const a of o.alias.filter((x) => x.length > 1)) L.push(`complete -c kerncap -n ${cond} -l ${a}${o.boolean ? "" : " -r"} -d ${sq(o.description)}`);
      if (o.boolean && o.name !== "json" && o.name !== "verbose" && o.name !== "force")
        L.push(`complete -c kerncap -n ${cond} -l no-${o.name} -d ${sq(`not: ${o.description}`)}`);
    }
    if (v.positional === "dir") L.push(`complete -c kerncap -n ${cond} -a '(__fish_complete_directories)'`);
    if (v.positional === "file") L.push(`complete -c kerncap -n ${cond} -F`);
    if (v.positional === "shell") L.push(`complete -c kerncap -n ${cond} -a 'bash zsh fish'`);
    if (v.positional === "schema") L.push(`complete -c kerncap -n ${cond} -a ${sq(schemaNames.join(" "))}`);
  }
  return L.join("\n") + "\n";
}
