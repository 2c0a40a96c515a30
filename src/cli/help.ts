/**
 * `kerncap [VERB] --help`: citty's usage text, made plain where it is piped (no colours, no
 * trailing padding), with the verbs that run an application naming it in their USAGE line (profile:
 * its ncu/nsys options), those that take several folders saying so (eval: DIR… CANDIDATE…), long aliases (--launch-skip, --kernel-name) written with two dashes, and
 * examples at the end.
 */
import { renderUsage, type ArgsDef, type CommandDef } from "citty";
import type { commands } from "./verbs.ts";
import { HIDDEN_OPTIONS } from "./args.ts";

type Verb = keyof typeof commands;

/** Example command lines of each verb (and of kerncap itself, `main`): the workflow a user types, with what each one does. */
export const EXAMPLES: Record<Verb | "main", [string, string][]> = {
  main: [
    ["kerncap demo cap && kerncap inspect cap", "try it without a GPU: a sample capture"],
    ["kerncap list -- python app.py", "which kernels run, how often"],
    ["kerncap run -k softmax --launch-skip 2 -o cap -- python app.py", "capture the third softmax launch"],
    ["kerncap inspect cap", "kernel, launch, parameters, regions"],
    ["kerncap replay cap --iters 20", "same VAs, launch, bit-exact check, timing"],
    ["$EDITOR cap/src/...; kerncap validate cap", "rebuild the edited kernel, replay, compare"],
  ],
  list: [
    ["kerncap list -- ./app --size 4096", "every kernel the app launches: count, grid, block, module"],
    ["kerncap list --json -- python train.py | jq '.kernels[0]'", "the most launched kernel, as JSON"],
    ["kerncap list --print-summary per-nvtx -- python train.py", "launches per kernel and NVTX ranges open at each (the names --nvtx-include takes)"],
    ["kerncap list --nvtx --nvtx-include 'step/' -- python train.py", "only the launches inside push/pop range step (ncu's syntax)"],
  ],
  run: [
    ["kerncap run -k softmax -o cap -- python app.py", "the first launch whose name matches softmax"],
    ["kerncap run -k 'regex:^gemm' -s 3 -c 4 -o caps -- ./app", "ncu's spellings: launches 3 to 6 of gemm*, one folder each"],
    ["kerncap run --kernel A --kernel B -o caps -- ./app", "the first launch of each of two kernels"],
    ["kerncap run -k attn --rank 0 -o cap -- torchrun --nproc-per-node 8 train.py", "only in the process of rank 0"],
    ["kerncap run --nvtx-include 'fwd/' -k gemm -s 1 -o cap -- python train.py", "the 2nd gemm launch inside NVTX range fwd"],
    ["kerncap run -k scale --source-root ~/src/app -o cap -- ./app", "CUDA: with the reproducer's source found in that tree"],
  ],
  inspect: [
    ["kerncap inspect cap", "the capture in words, and whether its files are intact"],
    ["kerncap inspect cap --verify --json", "every chunk's checksum too, as JSON"],
    ["kerncap inspect cap --region 2 --count 64", "region 2's first 64 elements before and after the launch"],
  ],
  replay: [
    ["kerncap replay cap", "restore at the captured VAs, launch, compare bit for bit, time 10 launches"],
    ["kerncap replay cap --atol 1e-5 --rtol 1e-3 --iters 50", "compare within a tolerance; time 50 launches"],
    ["ncu kerncap replay cap", "profile the one kernel without the application"],
    ["kerncap replay cap --against edited/", "time another capture of the launch against this one, interleaved"],
  ],
  validate: [
    ["kerncap validate cap", "rebuild src/ with build.sh, replay, compare with the app's result"],
    ["kerncap validate cap --watch", "rebuild and replay at each save under cap/src/ (Ctrl-C ends)"],
    ["EXTRA_FLAGS=-maxrregcount=24 kerncap validate cap --build-only", "rebuild with more nvcc flags (build.sh appends EXTRA_FLAGS): registers, spills"],
    ["NVCC=/usr/local/cuda-12.8/bin/nvcc kerncap validate cap --build-only", "rebuild with another toolkit's nvcc"],
  ],
  profile: [
    ["kerncap profile cap", "Nsight Compute on the replayed launch only; report in cap/profile/"],
    ["kerncap profile cap --build", "the same for the reproducer's rebuilt kernel"],
    ["kerncap profile cap --nsys", "an Nsight Systems timeline of the replay instead"],
    ["kerncap profile cap -o softmax -f", "the report at ./softmax.ncu-rep (ncu's -o), replacing one there"],
  ],
  tune: [
    ["kerncap tune cap --config 'BLOCK_M=64,128 num_warps=4,8' --rtol 1e-3", "sweep a Triton kernel's configs on the captured memory"],
    ["kerncap tune cap --define TILE=16,32 --maxrregcount 32,64", "a CUDA kernel's macros and register limit, each built by build.sh"],
    ["kerncap tune cap --config 'BLOCK_M=64,128 num_warps=4,8' --report tune.html", "the configs as a page: a bar chart, a heatmap over the two swept"],
  ],
  check: [
    ["kerncap check corpus/", "every capture under corpus/ replayed, compared, timed against the baseline"],
    ["kerncap check corpus/ --rebuild --junit check.xml", "rebuilt from their reproducers, JUnit XML for CI"],
    ["kerncap check corpus/ --report check.html --csv check.csv", "the time ratios with their intervals as a page, the table as CSV"],
  ],
  judge: [
    ["kerncap judge cap --rtol 1e-3 --multiset 2", "judge every replay of cap within rtol 1e-3, region 2 as a multiset"],
    ["kerncap judge cap --dtype 1=bf16 --expect nondeterministic", "region 1 holds bf16; 8 checked runs from the start"],
    ["kerncap judge cap", "show the capture's judging settings"],
    ["kerncap judge received-cap --accept", "use the settings a received capture came with"],
  ],
  clean: [
    ["kerncap clean cap", "remove cap/build/: rebuilt modules, the pruned TU's cache, eval's candidate copies"],
    ["kerncap clean caps/ --eval --dry-run", "what eval's candidate copies take in each member of a capture set, nothing removed"],
    ["kerncap clean cap --profile", "build/ and profile/'s ncu and nsys reports too"],
  ],
  eval: [
    ["kerncap eval cap edits/v1 edits/v2.patch kernel.cu", "three candidates built in parallel, judged and timed on the GPU, ranked"],
    ["kerncap eval caps/ cand-*/ --gpus 0,1 --jsonl out.jsonl", "every input of a capture set (run -c N); records in out.jsonl (--resume)"],
    ["kerncap eval cap 'BLOCK_M=64 num_warps=4' 'BLOCK_M=128 num_warps=8' --grid 'cdiv(M, BLOCK_M), 1, 1'", "Triton configs as candidates"],
  ],
  pack: [
    ["kerncap pack cap", "cap.zip beside the folder, to share"],
    ["kerncap pack cap -o /tmp/softmax.zip -f", "replace an archive kerncap wrote before"],
    ["kerncap pack 'my cap' --name my-cap", "a folder whose name unpack would refuse, packed under another"],
  ],
  unpack: [
    ["kerncap unpack softmax.zip", "the capture folder back, checksums checked"],
    ["kerncap unpack softmax.zip -o cap -f", "into cap, replacing a previous capture"],
  ],
  export: [
    ["kerncap export cap -o repro && cd repro && make && ./repro", "a C program that replays the launch with the CUDA toolkit alone"],
    ["kerncap export cap -o repro --rtol 1e-3 -f", "judge float elements within a tolerance; replace a previous export"],
  ],
  schema: [
    ["kerncap schema", "the JSON Schema of kerncap.json"],
    ["kerncap schema replay", "the JSON Schema of replay --json's document"],
  ],
  doctor: [
    ["kerncap doctor", "what this machine has for capture, replay and reproducers"],
    ["kerncap doctor --no-capture --json", "the checks without the built-in capture, as JSON"],
  ],
  demo: [
    ["kerncap demo", "write the sample capture into ./kerncap-demo"],
    ["kerncap demo cap && kerncap validate cap", "rebuild its reproducer (the replay needs a GPU)"],
  ],
  mcp: [
    ["kerncap mcp", "serve the tools over stdio (a client starts it)"],
    ["kerncap mcp --print-config claude-code", "the command that registers kerncap with Claude Code"],
  ],
  completion: [
    ["source <(kerncap completion bash)", "complete verbs and options in this bash"],
    ["kerncap completion fish > ~/.config/fish/completions/kerncap.fish", "install it for fish"],
  ],
};

/** The EXAMPLES section of `verb`'s help (kerncap's own with "main"). */
export function examplesSection(verb: Verb | "main"): string {
  const ex = EXAMPLES[verb];
  const w = Math.max(...ex.map(([c]) => c.length));
  return `EXAMPLES\n\n${ex.map(([c, what]) => `  ${c.padEnd(w)}   # ${what}`).join("\n")}\n`;
}

/** The command with its hidden options (HIDDEN_OPTIONS: check --worker) taken out, for its usage. */
async function withoutHidden(cmd: CommandDef<any>): Promise<CommandDef<any>> {
  const defs = ((typeof cmd.args === "function" ? await cmd.args() : await cmd.args) ?? {}) as ArgsDef;
  return { ...cmd, args: Object.fromEntries(Object.entries(defs).filter(([n]) => !HIDDEN_OPTIONS.has(n))) };
}

/** citty's usage writes every alias with one dash: long ones (--kernel-name, --launch-skip) get two. */
async function longAliases(usage: string, cmd: CommandDef<any>): Promise<string> {
  const defs = ((typeof cmd.args === "function" ? await cmd.args() : await cmd.args) ?? {}) as ArgsDef;
  let out = usage;
  for (const d of Object.values(defs)) {
    for (const a of [("alias" in d ? d.alias : undefined) ?? []].flat()) {
      // one more dash, one less space of the line's padding: the columns stay aligned
      if (a.length > 1) out = out.replace(new RegExp(`^( ?)(.*?[\\s,])-${a}(?=[,\\s=])`, "gm"), (_m, _sp: string, pre: string) => `${pre}--${a}`);
    }
  }
  return out;
}

/** The USAGE line's positionals of the verbs that take several (citty would write `[DIR]`). */
const MANY_SHOWN: Partial<Record<Verb, string>> = {
  eval: "DIR… CANDIDATE… (--merge: FILE…)",
  check: "DIR… (--merge: FILE…)",
  clean: "DIR…",
};

/**
 * The help text of `verb` (its command `cmd`), or of kerncap itself when verb is undefined
 * (`main`: the root command). `tty`: stdout is a terminal (citty's colours kept).
 */
export async function helpText(main: CommandDef<any>, verb?: Verb, cmd?: CommandDef<any>, tty = false): Promise<string> {
  const shown = cmd ? await withoutHidden(cmd) : main;
  const text = await renderUsage(shown, cmd ? main : undefined);
  let out = tty ? text : text.replace(/\x1b\[[0-9;]*m/g, "");
  out = out.replace(/[ \t]+$/gm, "");
  if (verb === "run" || verb === "list") out = out.replace(/^(.*USAGE.*)$/m, "$1 -- APP [ARGS…]");
  if (verb === "profile") out = out.replace(/^(.*USAGE.*)$/m, "$1 [-- NCU/NSYS OPTIONS…]");
  // citty writes a positional as [NAME] (one value): the verbs that take several say what they take
  const many = verb === undefined ? undefined : MANY_SHOWN[verb];
  if (many) out = out.replace(/^(.*USAGE.*?)\[DIR\]/m, `$1${many}`);
  if (cmd) out = await longAliases(out, cmd);
  return `${out.replace(/\n+$/, "")}\n\n${examplesSection(verb ?? "main")}`;
}
