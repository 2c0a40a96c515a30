/**
 * `kerncap eval`'s candidates: what each one is, its identity, and its private copy of the
 * capture's reproducer.
 *
 * A candidate is given on the command line as one of:
 * - a folder: an edited source tree, mirroring the reproducer's src/ (it replaces src/ whole);
 * - in a candidate list only (--candidate-list: kerncap mcp's evaluate), an overlay: a folder
 *   holding src/… with only the files that replace or add files of src/ (the others stay as
 *   captured), each held to edit_file's rule (sourcePathProblem); no copy of src/ exists until
 *   its build starts (materialise);
 * - a `.patch` or `.diff` file: a unified diff applied to src/ (`git apply`, which refuses paths
 *   with `..`, absolute paths and writes through links); paths as `diff -ru src edited` or
 *   `git diff` inside src/ write them (one leading component stripped), or as `git diff` from the
 *   capture folder writes them (a/src/… : two);
 * - any other file: a single replacement for the one file of src/ with its name;
 * - text of the form `NAME=VALUE …` that is no file: a Triton config (constexprs and num_warps,
 *   num_stages, maxnreg: src/frontends/tune.ts), compiled from the capture's own sources.
 *
 * `kerncap tune` makes its own (configCandidate, flagsCandidate): a Triton config, or a CUDA
 * config's nvcc words (macros, -maxrregcount, flags: src/frontends/cuda/tune-space.ts) appended to build.sh's
 * nvcc command line, the capture's sources unchanged.
 *
 * Its identity is its file or folder name (or the config) and the SHA-256 of its content:
 * `--resume` and `--shard` key on it, so an edited candidate is a new one. Its label, what the
 * table and the records show, is that name, or, where two candidates share it (a/saxpy.cu,
 * b/saxpy.cu), the shortest end of their paths that tells them apart.
 *
 * A candidate that does not fit the capture's src/ (a patch that does not apply: E_PATCH; a
 * replacement file whose name src/ lacks, a folder without the file the build compiles:
 * E_CANDIDATE) is never built: its verdict is error with that code, as for one kerncap could not
 * judge, and no retry changes it.
 */
import { JSON_MAX_DEPTH, jsonDepth } from "../format/json-position.ts";
import { shellPath } from "../util/shell-quote.ts";
import * as v from "valibot";
import { existsSync, lstatSync, mkdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { basename, dirname, join, resolve } from "node:path";
import { KerncapError } from "../errors.ts";
import { escapedForMessage } from "../format/archive-common.ts";
import { escapeForTerminal, illFormedStringAt } from "../escape.ts";

/** A candidate's path or spec as a message shows it: one line, escaped (a candidate list's text is its author's: adversary 79 #17). */
const shown = (text: string | undefined) => escapeForTerminal(String(text), { oneLine: true });
import { CANDIDATE_MAX_BYTES, digestOf, readCandidateFile, readGiven, readTree, treeFiles } from "./candidate-files.ts";
import { log } from "../log.ts";
import { refusePlantedLinks } from "../util/write-file.ts";
import { readManifest } from "../format/capture-dir.ts";
import { CAPTURE_SET_FILE } from "../format/capture-set.ts";
import { MANIFEST_FILE } from "../format/manifest.ts";
import { readInputFile } from "../format/paths.ts";
import { frontendOf } from "../frontends/index.ts";
import { applyPatch, patchModeProblem } from "./patch-apply.ts";
import { copyReproducer } from "./reproducer-copy.ts";

export { GIT_ALONE, patchModeProblem, sourcePathProblem } from "./patch-apply.ts";
import { overlayPaths, writeOverlay } from "./overlay.ts";
import { MAX_CONFIGS, parseConfigSpace, type TuneConfig } from "../frontends/tune.ts";

export type CandidateKind = "tree" | "overlay" | "patch" | "file" | "config" | "flags";

export interface Candidate {
  /** label@first 12 hex digits of the content's SHA-256. */
  id: string;
  /** What the user gave, shortened: the file or folder name (two of one name: the shortest ends of their paths that differ, parseCandidates), or the config text. */
  label: string;
  kind: CandidateKind;
  /** The file or folder (absolute), for tree, overlay, patch and file. */
  path?: string;
  /** The SHA-256 (hex) of the content read when the candidate was given (tree, overlay, patch, file): materialise builds only those bytes, read again and checked against it. */
  digest?: string;
  /** The config, for config. */
  config?: TuneConfig;
  /** The words appended to build.sh's nvcc command line (EXTRA_FLAGS), for flags. */
  flags?: string[];
  /**
   * A candidate refused before eval (kerncap mcp's evaluate: a path no candidate may write, a
   * config for a capture that is not Triton's): never materialised nor built, its one record an
   * error with this code (one of CANDIDATE_FAULT_CODES) and this reason.
   */
  refused?: { code: string; reason: string };
}

export { CANDIDATE_FAULT_CODES, CandidateList, LISTED_KINDS } from "../format/candidate-list.ts";
import { CANDIDATE_FAULT_CODES, CandidateList, LIST_FORMS, LISTED_KINDS } from "../format/candidate-list.ts";

/**
 * What is wrong with a candidate list that CandidateList refuses, naming the field (nu7 #4: a
 * union's "Expected Object but received Object" named none): an entry is read as the form its
 * key names (spec, overlay, config, refused), and that form's first problem is said with its path
 * (`candidates.6.refused.kind: Invalid type: Expected ("tree" | …)`).
 */
function listProblem(parsed: unknown, first: v.BaseIssue<unknown>): string {
  const at = (path: string, issue: v.BaseIssue<unknown>) => `${shown(path)}: ${shown(issue.message)}`;
  const entries = (parsed as { candidates?: unknown })?.candidates;
  if (Array.isArray(entries))
    for (const [i, e] of entries.entries()) {
      if (e === null || typeof e !== "object") continue;
      const form = (Object.keys(LIST_FORMS) as (keyof typeof LIST_FORMS)[]).find((k) => k in e);
      if (!form) return `candidates.${i}: has none of spec, overlay, config, refused`;
      const r = v.safeParse(LIST_FORMS[form], e, { abortEarly: true });
      if (!r.success) return at(`candidates.${i}.${v.getDotPath(r.issues[0]) ?? ""}`.replace(/\.$/, ""), r.issues[0]);
    }
  return at(v.getDotPath(first) ?? "(top)", first);
}

/**
 * The candidates of a candidate list, each labelled as the list says (its identity: that label and
 * its content's digest), a refused one carrying its refusal (Candidate.refused).
 * A listed candidate that does not fit (parseCandidate's E_PATCH, E_CANDIDATE) is kept as its
 * refusal, as on the command line (parseCandidates).
 * @throws KerncapError E_USAGE (not a list: its problem; two of one label; a spec or overlay that does not exist)
 */
export function listedCandidates(file: string): Candidate[] {
  let parsed: unknown;
  // a regular file of at most 64 MiB, no link followed, never blocking (adversary 29: a FIFO hung the eval, a link to
  // /dev/zero grew to 10 GB): readInputFile's rules, as for a results file
  const text = readInputFile(file, "--candidate-list file", "E_USAGE");
  const depth = jsonDepth(text);
  if (depth > JSON_MAX_DEPTH)
    throw new KerncapError("E_USAGE", `--candidate-list ${file} nests ${depth} levels deep (a candidate list nests at most 4)`, {
      hint: 'Give a JSON file {"candidates": [{"label": "v1", "spec": "v1.patch"}, …]}.',
    });
  try {
    parsed = JSON.parse(text);
  } catch (e) {
    throw new KerncapError("E_USAGE", `--candidate-list ${file}: ${(e as Error).message}`, {
      hint: 'Give a JSON file {"candidates": [{"label": "v1", "spec": "v1.patch"}, …]}.',
    });
  }
  const bad = illFormedStringAt(parsed);
  if (bad !== undefined)
    throw new KerncapError(
      "E_USAGE",
      `--candidate-list ${file}: ${bad || "the document"} holds a lone UTF-16 surrogate (a \\uD800–\\uDFFF escape without its pair), which names no file`,
      {
        hint: "Write each path as it is (UTF-8), not through \\u escapes of bytes.",
      },
    );
  const r = v.safeParse(CandidateList, parsed, { abortEarly: true });
  if (!r.success)
    throw new KerncapError("E_USAGE", `--candidate-list ${file} is not a candidate list: ${listProblem(parsed, r.issues[0])}`, {
      hint: `Each candidate: {"label": NAME, "spec": FOLDER | FILE.patch | FILE}, {"label": NAME, "overlay": FOLDER (holding src/…)}, {"label": NAME, "config": "BLOCK_M=64 num_warps=4"}, or {"label": NAME, "refused": {"kind": ${LISTED_KINDS.join("|")}, "code": ${CANDIDATE_FAULT_CODES.join("|")}, "reason": TEXT}}; NAME: letters, digits, . _ - (at most 64).`,
    });
  const labels = new Set<string>();
  for (const x of r.output.candidates) {
    if (labels.has(x.label))
      throw new KerncapError("E_USAGE", `--candidate-list ${file}: two candidates are labelled ${x.label}`, { hint: "Give each candidate its own label." });
    labels.add(x.label);
  }
  return r.output.candidates.map((x) => {
    if ("refused" in x) {
      const { kind, code, reason } = x.refused;
      return { id: `${x.label}@${digestOf(kind, [code, reason]).slice(0, 12)}`, label: x.label, kind, refused: { code, reason } };
    }
    const c =
      "config" in x
        ? candidateOrRefusal(x.config, configSpecCandidate, "config")
        : "overlay" in x
          ? candidateOrRefusal(x.overlay, overlayCandidate, "overlay")
          : candidateOrRefusal(x.spec, parseCandidate);
    return { ...c, id: `${x.label}${c.id.slice(c.id.lastIndexOf("@"))}`, label: x.label };
  });
}

/**
 * A candidate from its command-line text (see the file's comment).
 * @throws KerncapError E_USAGE: no such file or folder, and not a config (the command line is
 *   wrong: nothing is evaluated); the candidate's own faults, which parseCandidates makes its
 *   record (candidateOrRefusal): E_PATCH (a patch git apply would not read: empty, not a diff, a
 *   link, a mode change), E_CANDIDATE (a link, an empty folder, a tree holding a link or a FIFO,
 *   an oversized file, a config that is not one config)
 */
export function parseCandidate(spec: string): Candidate {
  // NAME=VALUE with no slash is a config, whatever the working folder holds (a file or folder of that
  // name, another user's in /tmp, is never taken for it: trial 19); a file so named is given as ./NAME=VALUE
  if (/^[A-Za-z_]\w*=/.test(spec.trim()) && !spec.includes("/")) return configSpecCandidate(spec);
  const path = resolve(spec);
  // a folder on the way that is another user's link (in /tmp, or a folder of theirs): they would choose which file of yours
  // is compiled and quoted in the records (adversary 79 #04), as outputs through such a link are refused
  refusePlantedLinks(
    dirname(path),
    "the candidate",
    "Give the candidate by a path through folders of your own (the folder the link names, if it is yours, by its own path).",
    true,
  );
  const lst = lstatSync(path, { throwIfNoEntry: false });
  if (lst?.isSymbolicLink())
    throw new KerncapError("E_CANDIDATE", `candidate ${shown(path)} is a symbolic link`, {
      hint: "A candidate is read with no link followed: give the file or folder it points to, or a copy of it.",
    });
  if (lst) {
    const st = lst;
    const label = pathLabel(path);
    if (st.isDirectory()) {
      // a capture folder (a copy of the capture, built or not): its manifest, not its build/ lock's name, says what is wrong (nu89 #1)
      const manifest = [MANIFEST_FILE, CAPTURE_SET_FILE].find((f) => lstatSync(join(path, f), { throwIfNoEntry: false })?.isFile());
      if (manifest)
        throw new KerncapError(
          "E_CANDIDATE",
          `candidate ${shown(path)} is a capture folder (it holds ${manifest}): a candidate folder is an edited copy of src/ itself${manifest === MANIFEST_FILE ? ` (give ${shown(join(path, "src"))})` : ""}, and captures of the same kernel (inputs) come before the first candidate`,
          {
            hint: `kerncap eval CAP [MORE_CAPTURES…] CANDIDATE…: the captures first, then the candidates (${shellPath(join(path, "src"))}, a patch, or an edited file).`,
          },
        );
      const { files, bytes } = readTree(path);
      if (!files.length)
        throw new KerncapError("E_CANDIDATE", `candidate ${shown(path)} is an empty folder`, {
          hint: "A tree candidate mirrors src/: the reproducer's sources with the edit.",
        });
      const digest = digestOf(
        "tree",
        files.flatMap((f, i) => [f, bytes[i]!]),
      );
      return { id: `${label}@${digest.slice(0, 12)}`, label, kind: "tree", path, digest };
    }
    if (!st.isFile())
      throw new KerncapError("E_CANDIDATE", `candidate ${shown(path)} is neither a folder nor a file`, {
        hint: "Give an edited src/ folder, a .patch/.diff, a replacement file or a Triton config.",
      });
    if (st.size > CANDIDATE_MAX_BYTES)
      throw new KerncapError("E_CANDIDATE", `candidate ${shown(path)} has ${st.size} bytes; at most 64 MiB`, { hint: "Give a source file or a patch." });
    const kind: CandidateKind = /\.(patch|diff)$/i.test(label) ? "patch" : "file";
    const bytes = readCandidateFile(path, "", st);
    if (kind === "patch") {
      const why = patchModeProblem(bytes.toString("latin1"));
      if (why)
        throw new KerncapError("E_PATCH", `candidate ${shown(path)}: ${why}`, {
          hint: "A candidate patch edits the text of regular files of src/ (their content, new files of mode 100644); make it with diff -ru or git diff, without links or mode changes.",
        });
    }
    const digest = digestOf(kind, [kind === "file" ? label : "", bytes]);
    return { id: `${label}@${digest.slice(0, 12)}`, label, kind, path, digest };
  }
  if (/^[A-Za-z_]\w*=/.test(spec.trim())) return configSpecCandidate(spec);
  throw new KerncapError("E_USAGE", `candidate ${shown(spec)}: no such file or folder, and not a Triton config (NAME=VALUE …)`, {
    hint: "Give edited src/ folders, .patch/.diff files, replacement files, or Triton configs such as 'BLOCK_M=64 num_warps=4'.",
  });
}

/** The candidate-fault codes (CANDIDATE_FAULT_CODES) as a set. */
const FAULTS: ReadonlySet<string> = new Set(CANDIDATE_FAULT_CODES);

/**
 * `parse(spec)`, or, where it throws the candidate's own fault (a code of CANDIDATE_FAULT_CODES:
 * an empty or malformed patch, a tree holding a link, a config that is not one), the candidate
 * as its refusal (Candidate.refused: never built, its one record an error with that code and
 * message; a file of it that cannot be read, E_IO, is its E_CANDIDATE), labelled by its name (a path's last component, a config's words) and identified by
 * that name and the refusal. `kind`: the refused candidate's, where the caller knows it (a
 * listed overlay or config); else read from the spec as parseCandidate reads it.
 * @throws KerncapError any other error of parse (E_USAGE: no such file or folder)
 */
export function candidateOrRefusal(spec: string, parse: (spec: string) => Candidate, kind?: CandidateKind): Candidate {
  try {
    return parse(spec);
  } catch (caught) {
    // a file of the candidate that cannot be read (another user's 0600 file in a shared candidate folder) is that candidate's fault, not the eval's (trial 26)
    const e =
      caught instanceof KerncapError && caught.code === "E_IO"
        ? new KerncapError("E_CANDIDATE", `candidate ${shown(spec)}: ${caught.message}`, { hint: caught.hint ?? "Make its files readable, or leave it out." })
        : caught;
    if (!(e instanceof KerncapError) || !FAULTS.has(e.code)) throw e;
    const path = resolve(spec);
    const st = lstatSync(path, { throwIfNoEntry: false });
    const config = kind === "config" || (kind === undefined && /^[A-Za-z_]\w*=/.test(spec.trim()) && (!spec.includes("/") || !st));
    const label = config ? spec.trim().replace(/\s+/g, " ") : pathLabel(path);
    const k: CandidateKind =
      kind ?? (config ? "config" : /\.(patch|diff)$/i.test(label) ? "patch" : st?.isDirectory() || (st?.isSymbolicLink() && statIsDir(path)) ? "tree" : "file");
    const digest = digestOf(k, [label, e.code, e.message]);
    return { id: `${label}@${digest.slice(0, 12)}`, label, kind: k, ...(config ? {} : { path }), refused: { code: e.code, reason: e.message } };
  }
}

/** Whether `path` is a folder, its link followed (only to name a refused link's kind). */
function statIsDir(path: string): boolean {
  try {
    return statSync(path).isDirectory();
  } catch {
    return false;
  }
}

/**
 * A Triton config given as text (`BLOCK_M=64 num_warps=4`) as a candidate, labelled by its words.
 * @throws KerncapError E_CANDIDATE: not one config (parseConfigSpace's, or several values of a name)
 */
function configSpecCandidate(spec: string): Candidate {
  let space: TuneConfig[];
  try {
    space = parseConfigSpace([spec]);
  } catch (e) {
    if (e instanceof KerncapError && e.code === "E_USAGE")
      throw new KerncapError("E_CANDIDATE", `candidate ${escapedForMessage(spec)}: ${e.message}`, { hint: e.hint });
    throw e;
  }
  if (space.length !== 1)
    throw new KerncapError("E_CANDIDATE", `candidate ${JSON.stringify(spec)} is ${space.length} configs; a candidate is one`, {
      hint: "Give one value per name (BLOCK_M=64 num_warps=4); kerncap tune sweeps a space.",
    });
  const label = spec.trim().replace(/\s+/g, " ");
  const digest = digestOf("config", [label]);
  return { id: `${label}@${digest.slice(0, 12)}`, label, kind: "config", config: space[0]! };
}

/**
 * An overlay candidate (a candidate list's `overlay`, what kerncap mcp's evaluate writes for a
 * `files` candidate): the folder `path` holds src/… with only the files that replace or add files
 * of the capture's src/, read as a tree is (readTree: no link, regular files, each read once,
 * 64 MiB in all), labelled by its folder's name until the list relabels it. Its private copy (the
 * capture's src/ with these files written over it) is made only when its build starts
 * (materialise), where each path is held to edit_file's rule (sourcePathProblem).
 * @throws KerncapError E_USAGE: missing; E_CANDIDATE: a link, not a folder, no files, a file not under src/, readTree's
 */
export function overlayCandidate(spec: string): Candidate {
  const path = resolve(spec);
  const st = lstatSync(path, { throwIfNoEntry: false });
  if (!st?.isDirectory())
    throw new KerncapError(
      st ? "E_CANDIDATE" : "E_USAGE",
      `overlay candidate ${shown(path)} is ${st?.isSymbolicLink() ? "a symbolic link" : st ? "not a folder" : "missing"}`,
      {
        hint: "An overlay is a folder holding src/… with the files that replace or add files of src/ (read with no link followed).",
      },
    );
  const { files, bytes } = readTree(path);
  const outside = files.find((f) => !f.startsWith("src/"));
  if (!files.length || outside !== undefined)
    throw new KerncapError(
      "E_CANDIDATE",
      `overlay candidate ${shown(path)} ${outside !== undefined ? `holds ${escapedForMessage(outside)}, which is not under src/` : "holds no files"}`,
      { hint: "An overlay holds src/… only: the files that replace or add files of the capture's src/, at their paths from the capture folder." },
    );
  const digest = digestOf(
    "overlay",
    files.flatMap((f, i) => [f, bytes[i]!]),
  );
  const label = basename(path);
  return { id: `${label}@${digest.slice(0, 12)}`, label, kind: "overlay", path, digest };
}

/** A Triton config as a candidate (kerncap tune's): labelled as `label` (default: its words, kwargs first). */
export function configCandidate(
  config: TuneConfig,
  label = [...Object.entries(config.kwargs), ...Object.entries(config.options)].map(([k, v]) => `${k}=${v}`).join(" "),
): Candidate {
  const digest = digestOf("config", [JSON.stringify([Object.entries(config.kwargs).sort(), Object.entries(config.options).sort()])]);
  return { id: `${label}@${digest.slice(0, 12)}`, label, kind: "config", config };
}

/** A CUDA build's extra nvcc words as a candidate (kerncap tune's): the capture's sources, build.sh with `flags` appended. */
export function flagsCandidate(label: string, flags: string[]): Candidate {
  const digest = digestOf("flags", flags);
  return { id: `${label}@${digest.slice(0, 12)}`, label, kind: "flags", flags };
}

/**
 * The candidates of the command line (text, parsed by parseCandidate) or made by a producer
 * (kerncap tune), each once (the same content given twice is evaluated once).
 * A candidate that does not fit (parseCandidate's E_PATCH, E_CANDIDATE) is kept as its refusal
 * (candidateOrRefusal): its record says why, the others are evaluated.
 * @throws KerncapError E_USAGE (a path that does not exist and is no config: parseCandidate); none
 *   given, or more than MAX_CONFIGS (src/frontends/tune.ts)
 */
export function parseCandidates(specs: (string | Candidate)[]): Candidate[] {
  if (!specs.length)
    throw new KerncapError("E_USAGE", "no candidates given", {
      hint: "kerncap eval DIR CANDIDATE… (edited src/ folders, patches, replacement files, Triton configs).",
    });
  if (specs.length > MAX_CONFIGS)
    throw new KerncapError("E_USAGE", `${specs.length} candidates given; kerncap eval judges at most ${MAX_CONFIGS} at once`, {
      hint: "Split the list and run kerncap eval on each part (each with its own --jsonl FILE).",
    });
  const parsed = specs.map((s) => ({ s, c: typeof s === "string" ? candidateOrRefusal(s, parseCandidate) : s }));
  // labels told apart over every path given, one of a name and content at another path included (nu7 #18: dd/a/saxpy.cu and
  // dd/b/saxpy.cu of one content were evaluated once as "saxpy.cu", which a script mapping its paths to labels found for neither)
  // a path given on the command line is one candidate however often it is given; a listed candidate (an object: a
  // --candidate-list entry) is its label's, whatever path it names (nu5 #1: two labels of one spec lost the second label)
  const keyOf = (s: string | Candidate, c: Candidate) => (typeof s === "string" ? (c.path ?? c.id) : c.id);
  const once = new Map<string, Candidate>();
  for (const { s, c } of parsed) if (!once.has(keyOf(s, c))) once.set(keyOf(s, c), c);
  const keys = [...once.keys()];
  const labelled = new Map(distinctLabels([...once.values()]).map((c, i) => [keys[i]!, c]));
  const seen = new Map<string, Candidate>();
  for (const { s, c } of parsed) {
    const mine = labelled.get(keyOf(s, c))!;
    const first = seen.get(c.id);
    if (!first) seen.set(c.id, mine);
    else if (typeof s === "string") {
      // the same content under the same name given twice (fix.patch fix.patch, a glob that matched it twice): evaluated once, said so
      if (c.path === undefined || c.path === first.path) log.info(`candidate ${escapedForMessage(s)} is given more than once: evaluated once`);
      // at another path (one name, one content: one identity): said naming the one evaluated, whose records stand for both
      else
        log.info(
          `candidate ${escapedForMessage(s)} has the name and content of ${escapedForMessage(first.path ?? first.label)}: evaluated once, its records labelled ${escapedForMessage(first.label)}`,
        );
    }
  }
  return [...seen.values()];
}

/**
 * A file or folder candidate's label: its name, or for a folder named src (a mirror of the
 * capture's src/, as every tree candidate is) its parent's name too (`e1/src`: nu15, one candidate
 * labelled "src" said nothing of which it was).
 */
function pathLabel(path: string): string {
  const name = basename(path);
  return name === "src" && dirname(path) !== "/" ? `${basename(dirname(path))}/src` : name;
}

/**
 * The candidates with labels that tell them apart: the files and folders that share a name each
 * labelled by the shortest end of its path (as many of its last components as it takes) that
 * ends no other of them (cands/a/saxpy.cu, cands/b/saxpy.cu: a/saxpy.cu, b/saxpy.cu;
 * x/src, y/src: x/src, y/src). Their identities stay as they are (the name and the content).
 */
export function distinctLabels(cs: Candidate[]): Candidate[] {
  const byLabel = new Map<string, Candidate[]>();
  for (const c of cs) if (c.path) byLabel.set(c.label, [...(byLabel.get(c.label) ?? []), c]);
  const label = new Map<Candidate, string>();
  for (const group of byLabel.values()) {
    if (group.length < 2) continue;
    const parts = group.map((c) => c.path!.split("/").filter(Boolean));
    group.forEach((c, i) => {
      const p = parts[i]!;
      const end = (q: string[], k: number) => q.slice(-k).join("/");
      let k = 2;
      while (k < p.length && parts.some((q, j) => j !== i && end(q, k) === end(p, k))) k++;
      label.set(c, k < p.length ? end(p, k) : c.path!);
    });
  }
  return cs.map((c) => (label.has(c) ? { ...c, label: label.get(c)! } : c));
}

/**
 * Make `dest` a private copy of the capture's reproducer (./reproducer-copy.ts copyReproducer:
 * every file of the capture folder but memory/, build/, profile/ and its seal, bounded; links are
 * not copied) with the candidate applied. The capture
 * folder itself is only read.
 * @throws KerncapError E_CANDIDATE (a replacement file that names no file of src/, or several; a
 *   folder that lacks a file the build compiles), E_PATCH (a patch that does not apply), a refused
 *   candidate's code (Candidate.refused): the candidate's own fault, its record's error (src/eval/build.ts)
 */
export async function materialise(capture: string, c: Candidate, dest: string): Promise<void> {
  // a refused candidate is never written (src/eval/eval.ts gives it its record before any build): said again here, whoever calls
  if (c.refused) throw new KerncapError(c.refused.code as (typeof CANDIDATE_FAULT_CODES)[number], c.refused.reason);
  // the candidate's bytes read once more, with no link followed, and held to the digest it was given with
  const given = c.kind === "tree" || c.kind === "overlay" || c.kind === "file" || c.kind === "patch" ? readGiven(c) : undefined;
  // an overlay's paths held to edit_file's rule before anything is copied: a refused one costs no copy of src/
  const overlay = c.kind === "overlay" ? overlayPaths(capture, c, given!.files) : undefined;
  // dest's parent is the caller's, made with no link followed (src/eval/eval.ts); a link at dest itself is removed, not followed
  copyReproducer(capture, dest);
  const src = join(dest, "src");
  if (c.kind === "overlay") {
    try {
      writeOverlay(src, c, overlay!, given!.bytes);
    } catch (e) {
      rmSync(dest, { recursive: true, force: true });
      throw e;
    }
  } else if (c.kind === "tree") {
    const { files, bytes } = given!;
    refuseIncompleteTree(capture, c, files);
    rmSync(src, { recursive: true, force: true });
    mkdirSync(src);
    files.forEach((f, i) => {
      mkdirSync(join(src, f, ".."), { recursive: true });
      writeFileSync(join(src, f), bytes[i]!);
    });
  } else if (c.kind === "file") {
    const name = basename(c.path!);
    const hits = existsSync(src) ? treeFiles(src).filter((f) => basename(f) === name) : [];
    if (hits.length !== 1) {
      throw new KerncapError(
        "E_CANDIDATE",
        `candidate ${shown(c.path)}: ${hits.length ? `${hits.length} files of src/ are named ${name} (${hits.join(", ")})` : `src/ has no file named ${name}`}`,
        {
          hint: "A replacement file takes the name of the one file of src/ it replaces; otherwise give a tree (an edited copy of src/) or a patch.",
        },
      );
    }
    writeFileSync(join(src, hits[0]!), given!.bytes[0]!);
  } else if (c.kind === "patch") {
    try {
      await applyPatch(src, c.label, given!.bytes[0]!, dest, readManifest(capture));
    } catch (e) {
      rmSync(dest, { recursive: true, force: true }); // nothing of a refused patch stays in the capture's build/
      throw e;
    }
  }
  refuseForeignGenerated(capture, c, dest);
}

/**
 * Refuse a candidate whose private copy `dest` holds a file the frontend generates that kerncap did
 * not make from the sources there (Frontend.generatedProblem: CUDA's slice edited by hand, or
 * stamped as its TU's but not made from it), before any build: the build compiles what kerncap
 * makes from the TU (src/frontends/build.ts, confined), never the candidate's slice, so the edit it
 * holds would not be what is evaluated (and its unkeyed stamps let a broken TU pass as the original
 * kernel: a trial). A slice kerncap made from another text of the TU (a copy of src/ whose TU was
 * edited since) is made again, as validate does.
 * @throws KerncapError E_CANDIDATE naming the file, `dest` removed
 */
function refuseForeignGenerated(capture: string, c: Candidate, dest: string): void {
  const m = readManifest(capture);
  const problem = frontendOf(m).generatedProblem?.(dest, m);
  if (!problem) return;
  rmSync(dest, { recursive: true, force: true });
  throw new KerncapError(
    "E_CANDIDATE",
    `candidate ${shown(c.kind === "overlay" ? c.label : (c.path ?? c.label))}: ${problem}; a candidate's build compiles only what kerncap generates from its sources`,
    {
      hint: "Make the edit in the TU (or the file the kernel is defined in), the file the generated one is made from, and leave the generated file out of the candidate or as kerncap wrote it: kerncap makes it again from the TU.",
    },
  );
}

/**
 * Refuse a candidate folder (it replaces src/ whole) that lacks a file the capture's build compiles
 * (Frontend.builtSources: CUDA's TU and the kernel's definition file, Triton's kernel file), before
 * any build: the build would fail on a missing file, and a confined one without saying which.
 * @throws KerncapError E_CANDIDATE naming each missing file
 */
function refuseIncompleteTree(capture: string, c: Candidate, files: string[]): void {
  const m = readManifest(capture);
  const have = new Set(files);
  const missing = (frontendOf(m).builtSources?.(capture, m) ?? []).filter((f) => !have.has(f) && existsSync(join(capture, "src", f)));
  if (!missing.length) return;
  // the names as they are: the record keeps them, and whatever shows them escapes them (./report.ts, src/cli/main.ts)
  if (missing.every((f) => have.has(`src/${f}`))) {
    // a folder holding an edited src/ (edits/a/src), not an edited src/ itself
    const where = c.path ?? c.label;
    // the fix in the message itself: a record's reason is what eval's table and an agent read, not the hint (nu16 #11)
    throw new KerncapError(
      "E_CANDIDATE",
      `candidate ${shown(where)} holds a src/ folder: a candidate folder is an edited copy of src/ itself (give ${shown(join(where, "src"))})`,
      {
        hint: `Give ${join(where, "src")} as the candidate (kerncap eval CAP edits/*/src for several).`,
      },
    );
  }
  throw new KerncapError(
    "E_CANDIDATE",
    `candidate ${shown(c.path)} is a folder, so it replaces src/ whole, and it lacks ${missing.map((f) => `src/${f}`).join(", ")}, which the build compiles (it holds ${files.length > 3 ? `${files.length} files` : files.join(", ")})`,
    {
      hint: `Give a copy of the whole src/ with the edit (cp -r ${shellPath(join(capture, "src"))} edited, then edit it), a patch against src/, or the edited file alone (a replacement file named as the file of src/ it replaces).`,
    },
  );
}
