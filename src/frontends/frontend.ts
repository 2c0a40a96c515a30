/**
 * The frontend interface: what kerncap does differently for kernels from CUDA C++, Triton and HIP.
 * One folder per frontend (src/frontends/<name>/) exports one `Frontend` object; the registry
 * (./index.ts) is the only place that lists them, and every caller looks its frontend up there
 * (`frontendOf(manifest)`) or asks the registry for what all of them add (`kerncap run`'s
 * options, the capture environment, the enrichment) instead of switching on the name. Adding a
 * frontend: a new folder and one line in the registry (test/frontends/toy/ is one, registered by
 * test/cpu/frontends.test.ts).
 */
import type { EnvVarDoc } from "../env.ts";
import type { KerncapError } from "../errors.ts";
import type { Manifest } from "../format/manifest.ts";
import type { RunFiles } from "../format/run-files.ts";
import type { ElementType } from "../replay/tolerance.ts";
import type { TemplateFile } from "./templates.ts";
import type { TuneDriver } from "./tune.ts";

/**
 * What a frontend reads of the raw capture (raw.json, docs/raw-capture.md; src/capture/raw.ts
 * `Raw` has these fields and more). `frontend` is the one field a frontend writes: the one that
 * recognises the launch as its own claims it (Triton: a cubin its shim saw compiled).
 */
export interface RawLaunch {
  frontend: string;
  kernel: { name: string; demangled: string; match_index: number; counts_benchmarks?: boolean };
  device: { name: string; arch: string };
  launch: { shared_mem_bytes: number };
  module: { file: string; kind: string } | null;
}

/**
 * What a frontend's enrichment gives finalize (src/capture/finalize.ts FinalizeOptions has the
 * same two fields): what to store under manifest.source, and a hook that renders the reproducer
 * project into the temporary folder `dir` before its rename to `finalDir`.
 */
export interface Enrichment {
  source?: Record<string, unknown>;
  beforeRename?: (dir: string, m: Manifest, finalDir: string) => void | Promise<void>;
}

/** One line of `kerncap doctor` (src/doctor.ts Check): ok / warn / fail / skip, and the fix. */
export interface DoctorCheck {
  id: string;
  status: "ok" | "warn" | "fail" | "skip";
  detail: string;
  fix?: string;
}

/** What a frontend sees of a finished capture before finalize (the raw capture in its temporary folder). */
export interface CaptureContext {
  tmpDir: string;
  raw: RawLaunch;
  /** The --kernel pattern that selected the launch, and the application's command line. */
  pattern: string;
  command: string[];
}

/**
 * One `kerncap run` option of a frontend, in citty's argument shape so that the verb spreads the
 * registry's into its own (library code never imports citty). Its description starts with the
 * frontend's name ("CUDA: …").
 */
export interface CaptureArg {
  type: "string" | "boolean";
  description: string;
  default?: string | boolean;
  negativeDescription?: string;
}

/** The steps of a fast build (ms; a frontend's own names, e.g. CUDA's planMs, compileMs) and flags about them. */
export type FastBuildSteps = Record<string, number | boolean>;

/** One fast build's module and what the rebuilder reports of it. */
export interface FastBuilt {
  module: string;
  /** A hash of the commands the build ran: a check against build.sh's build holds for exactly these. */
  plan: string;
  /** Wall time of the whole build (s), and of its steps. */
  seconds: number;
  steps: FastBuildSteps;
  /** How the frontend cut the compiled source down: its size before and after (lines). */
  prune: { lines(): { before: number; after: number } };
}

/** What a series of fast builds of one reproducer keeps between builds (the analysis, the last preprocessing). */
export interface FastBuildSeries {
  /** Keep it in `work` for the next process (validate runs one per edit). */
  save(work: string): void;
}

/**
 * A rebuild faster than build.sh (CUDA: the pruned TU's device-only build), which the rebuilder
 * (src/rebuild/rebuilder.ts) uses only once it gave the kernel build.sh's machine code.
 */
/** A fast build's options. */
export interface FastBuildOptions {
  /** Build even when the toolchain differs from the capture's. */
  force: boolean;
  signal?: AbortSignal;
  /**
   * Called once the build's own work on this thread is done and a compiler runs as a child
   * (CUDA: cicc on the pruned TU): validate starts the replay's preparation then, so that the
   * two do not take turns on one thread (src/ops/rebuild-beside.ts).
   */
  onCompile?: () => void;
  /**
   * Awaited before the compiler starts (the watch: until the burst of file events has been quiet
   * for DEBOUNCE_MS; src/rebuild/watch.ts), so that the build's reading, preprocessing and
   * pruning run during that quiet time. A `signal` aborted meanwhile ends the build with
   * BuildSuperseded (src/frontends/build.ts).
   */
  beforeCompile?: () => Promise<void>;
  /**
   * A confined fast build (kerncap eval's candidates: src/eval/pruned.ts): every step run by
   * `confined.run` (the confined build's sandbox and limits), the preprocessor's dependency list
   * judged by `confined.outside`; no incremental preprocessing. Any step that fails, reads
   * outside or cannot be confined is FastBuildUnavailable: the caller's confined build.sh then
   * gives the verdict and the message.
   */
  confined?: ConfinedSteps;
}

/** How a confined fast build runs its steps and judges what they read (src/frontends/build.ts confinedSteps). */
export interface ConfinedSteps {
  /** Run `argv` in `cwd` under the confined build's limits and sandbox. @throws FastBuildUnavailable (the sandbox could not be made) */
  run(argv: string[], cwd: string, env: Record<string, string | undefined>, signal?: AbortSignal): Promise<{ out: string; err: string; code: number }>;
  /** The files of a dependency list (make syntax) that a confined build may not read; [] when none. */
  outside(depsText: string): string[];
}

export interface FastBuilder<S extends FastBuildSeries = FastBuildSeries> {
  /** A new series, or the one a previous process saved in `work`; `sharing`: a new series that shares that one's analysis (kerncap eval's candidates, one pruner for all). */
  series(work?: string, sharing?: S): S;
  /**
   * One fast build of the reproducer in `dir`, its files in `work`.
   * @throws FastBuildUnavailable (src/frontends/build.ts: build.sh instead, with the reason),
   *   BuildSuperseded (`o.signal` aborted: the series is left as it was before the build),
   *   KerncapError E_INTERRUPTED (a stop signal during a step)
   */
  build(dir: string, work: string, o: FastBuildOptions, series: S): Promise<FastBuilt>;
  /** null when the two modules give `kernel` the same machine code, else what differs (a sentence). */
  differs(full: Uint8Array, fast: Uint8Array, kernel: string): string | null;
  /**
   * build.sh's default output, relative to the capture folder (CUDA: build/kernel.cubin): a fast
   * build's module is written there too (src/rebuild/rebuilder.ts), so that it always holds the
   * last rebuild's module.
   */
  readonly buildShModule: string;
}

export interface Frontend<Options = unknown> {
  /** manifest.kernel.frontend */
  readonly name: string;
  /** Its name in messages ("CUDA", "Triton"); default `name`. */
  readonly label?: string;
  /**
   * Its `KERNCAP_*` variables (Triton: ./triton/env.ts, the shim's switches and the reproducer's
   * Python), read only through getters in its own env.ts; listed with the core's (src/env.ts) by
   * ./index.ts envVars() and in docs/environment.md.
   */
  readonly env?: Readonly<Record<`KERNCAP_${string}`, EnvVarDoc>>;
  /** Its `kerncap doctor` checks of this machine (Triton: python3, triton, torch), in the environment `env`; never throws. */
  doctor?(env: Record<string, string | undefined>): DoctorCheck[];
  /**
   * Files and folders its capture-time code writes into the capture library's output folder beside
   * the captures (Triton: the shim's triton.jsonl and triton-src/), which every capture of a run
   * reads at its enrichment: copied into each capture's own folder first, and gone from a capture
   * set's root after (src/capture/session.ts); a folder among them its enrichment removes.
   */
  readonly captureFiles?: readonly string[];
  /**
   * The files its rebuild runs or reads commands from besides build.sh (Triton: ./triton/runs.ts,
   * pinned.json, repro.py, the kernel file and interpreter pinned.json names): what the trust gate
   * shows, hashes and stages for every capture, whatever frontend its manifest names
   * (src/format/run-files.ts), and what a confined build holds to their rendered bytes.
   */
  readonly runFiles?: RunFiles;
  /** `kerncap validate` (rebuild + replay) is supported for its captures. */
  readonly validates: boolean;
  /**
   * Its build.sh builds for another GPU architecture than the captured one when asked
   * (BuildOptions.targetArch; CUDA: `-arch=` appended to EXTRA_FLAGS, src/env.ts
   * reproducerBuildEnv): `kerncap check --rebuild` on such a GPU. Without it, the reproducer
   * compiles for its pinned target only (Triton).
   */
  readonly retargets?: boolean;
  /**
   * Its build runs the edited source as code (Triton: repro.py imports the kernel's module), so a
   * confined build (validate --confine: src/frontends/confine.ts) cannot bound what it reads: run
   * only with --trust.
   */
  readonly buildRunsSource?: boolean;
  /** The frontend's `kerncap run` options, by option name (CUDA: --source-root, --compile-commands, --slice, --overlay). */
  readonly captureArgs?: Readonly<Record<string, CaptureArg>>;
  /**
   * Its options parsed from the verb's values of captureArgs (paths made absolute), checked
   * before the application runs; given to enrich.
   * @throws KerncapError E_USAGE
   */
  captureOptions?(args: Readonly<Record<string, unknown>>): Options;
  /** Its reproducer templates (templates/<name>/), embedded in the executable. */
  readonly templates?: readonly TemplateFile[];
  /**
   * Environment the capture adds to the application's (Triton: its shim first on PYTHONPATH).
   * Every frontend's is added: which frontend a launch belongs to is known only after it.
   */
  captureEnv?(): Promise<Record<string, string>>;
  /**
   * Enrichment at capture: claim the raw capture (Triton recognises the cubins it compiled and
   * sets raw.frontend) and return what finalize stores (manifest.source) and the hook that
   * renders the reproducer project into the folder before its rename. {} when the capture is not
   * this frontend's. Never throws for a missing source: the reason is logged or recorded.
   */
  enrich?(ctx: CaptureContext, options: Options): Enrichment;
  /**
   * Before the reproducer's build.sh runs (CUDA: remake a slice whose TU was edited). `confined`: a
   * build for an agent (validate --confine, kerncap mcp), which compiles what confinedCompilesOtherwise
   * says in a private copy: the capture's own build.sh is left to compile the same (CUDA: no prefix
   * slice in place until the user's own validate makes one). `defer`: a part that only checks
   * sources which did not change (CUDA: that a slice stamped with its TU's hash is kerncap's) may be
   * returned instead, to run while a fast build compiles; it returns whether it changed a source
   * (then the builds begun before it are not used). Run before build.sh starts.
   */
  beforeBuild?(dir: string, m: Manifest, o?: { confined?: boolean; defer?: boolean }): void | (() => boolean);
  /** The error a failed build.sh means, from its stderr, when more than a compile error (CUDA: an -rdc link, E_RDC); undefined for a plain one. */
  explainBuildFailure?(stderr: string): KerncapError | undefined;
  /** Check a rebuilt module before anything launches (CUDA: cubin, kernel present, parameter layout). @throws KerncapError (exit 2) */
  checkRebuiltModule?(modulePath: string, m: Manifest): void;
  /** The compiler a build of the capture in `dir` runs, as validate --build-only names it (CUDA: the nvcc its build.sh runs); undefined where none is named. */
  buildCompiler?(dir: string): string | undefined;
  /**
   * The block and dynamic shared memory a rebuilt module's kernel needs, where they differ from
   * the captured launch (Triton: the compiled kernel's num_warps × 32 threads and its shared
   * memory, from the metadata repro.py writes beside the cubin); undefined: the captured launch.
   * The replay engine takes it as RunOptions.launchOf.
   */
  rebuiltLaunch?(modulePath: string, m: Manifest): { block: [number, number, number]; sharedMemBytes: number } | undefined;
  /** A rebuild faster than build.sh, once checked against it. */
  readonly fastBuild?: FastBuilder;
  /**
   * The file-name endings of the reproducer's sources under src/ (CUDA: ".cu", ".cuh", ".h", …;
   * Triton: ".py"): the only files an MCP agent may write (kerncap mcp's edit_file; the names of
   * kerncap's own files are refused at any depth whatever their ending: ./index.ts
   * notAnEditableSource). None: its captures have no source an agent may edit.
   */
  readonly sourceSuffixes?: readonly string[];
  /** Files under the reproducer's src/ that kerncap writes itself (CUDA: the slice), relative to src/: not a save of the user's. */
  generatedSources?(m: Manifest): string[];
  /** The file under src/ (relative to src/) that kerncap makes the generated source `rel` (one of generatedSources, relative to src/) from: the one to edit instead (CUDA: the slice's TU). */
  generatedFrom?(m: Manifest, rel: string): string | undefined;
  /**
   * Whether a confined build of this capture compiles other sources than the user's own build
   * (CUDA: the whole TU where the user's validate compiles a prefix slice), so that a record of
   * the user's builds says nothing of a confined one's (eval's pruned-build check).
   */
  confinedCompilesOtherwise?(m: Manifest): boolean;
  /**
   * Make the files of generatedSources anew in `dir` (a confined build's private copy:
   * src/frontends/build.ts) from the sources there, whatever those files hold: a build of sources
   * kerncap does not trust compiles only what kerncap makes of them (CUDA: the slice from its TU;
   * its first-line stamps have no key, so whoever writes the slice can make its text pass for the
   * TU's).
   * @returns the starts of build.sh's notes ("kerncap: …" stderr lines) this made expected, which the
   *   build then logs at debug level only (CUDA: "no usable slice", where a confined build compiles
   *   the whole TU on purpose)
   * @throws KerncapError E_MANIFEST, E_UNSAFE_PATH
   */
  remakeGenerated?(dir: string, m: Manifest): string[];
  /**
   * Why a file of generatedSources under `dir`'s src/ (an eval candidate's private copy) is not
   * one kerncap made from the sources there, as a phrase naming it (CUDA: a slice edited, or
   * stamped as its TU's but not made from it); undefined when it is (a slice made from another
   * text of the TU included: the build makes it again).
   */
  generatedProblem?(dir: string, m: Manifest): string | undefined;
  /**
   * The state of the generated files under `dir`'s src/ as the user's own build finds them: "made"
   * (kerncap's, or none), "edited" (edited by hand and compiled as it is, CUDA: a slice whose text is
   * not the one its first line's body= names: inspect, pack and export list it as an edited source),
   * or "not-made" (CUDA: the "not made" slice, so build.sh compiles the whole TU; `reason` why).
   */
  generatedState?(dir: string, m: Manifest): { state: "made" | "edited" | "not-made"; reason?: string };
  /** The notes its build.sh writes for capture `m` ("kerncap: …" stderr lines), each a pattern of the whole line (names as the build's messages give them: `src/x.cu`, or a path ending so); any other such line is no note (src/frontends/build-notes.ts knownNote). */
  buildNotes?(m: Manifest): RegExp[];
  /**
   * The files of src/ its build compiles or imports whatever the edit (relative to src/; CUDA: the
   * TU and the kernel's definition file, Triton: pinned.json's kernel file), read from the capture
   * folder `dir`; [] where unknown. A candidate folder that replaces src/ whole must hold them
   * (src/eval/candidates.ts materialise says which it lacks before any build).
   */
  builtSources?(dir: string, m: Manifest): string[];
  /** Its `kerncap tune` (Triton: ./triton/tune.ts, constexprs and compile options compiled by repro.py; CUDA: ./cuda/tune.ts, macros and nvcc flags through build.sh). None: tune refuses its captures. */
  readonly tune?: TuneDriver;
  /**
   * Element types of the captured regions this frontend knows (Triton: the signature's pointer
   * types, through the parameter buffer); undefined entries fall back to --dtype / fp32.
   * `written(region, offset)`: whether the app changed the 64 bytes at offset.
   */
  regionTypes?(m: Manifest, params: Uint8Array, written?: (ri: number, offset: number) => boolean): (ElementType | undefined)[];
  /**
   * The element types the kernel's declaration gives its regions, with where each comes from
   * (CUDA: a pointer parameter's `float*` pointing into the region), for checking a type the user
   * names (kerncap judge --dtype REGION=T), never for judging; absent: regionTypes' alone.
   */
  declaredRegionTypes?(m: Manifest, params: Uint8Array): ({ type: ElementType; why: string } | undefined)[];
}
