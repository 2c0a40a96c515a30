/**
 * Every error code kerncap reports: the `code` of a KerncapError (src/errors.ts), of a `--json`
 * error document, of a check or eval record. One row per code: the process exit status the CLI
 * uses for it, what it means (docs/errors.md is generated from this table by
 * scripts/make-errors-doc.ts), and the hint shown when the throw site gives none (a throw site
 * that knows more, a path or the option to change, gives its own).
 *
 * The spellings are stable: scripts and agents match on them, so a code is never renamed. A throw
 * site can only name a code of this table (`ErrorCode`, a type error otherwise), and
 * test/cpu/error-codes.test.ts checks that every code written in src/ is here and documented.
 * A leaf module (no imports): the GPU suite imports errors.ts on a node without node_modules.
 */

/** One row of the table. */
export interface ErrorSpec {
  /** The process exit status (2: an error the user can act on; 130/143: ended by a signal). */
  readonly exit: number;
  /** When kerncap reports it, in a sentence (docs/errors.md). */
  readonly about: string;
  /** What to do about it, shown under the message when the throw site gives no hint of its own. */
  readonly hint: string;
}

const CAPTURE_AGAIN = "Capture the kernel again (`kerncap run`), or ask the sender for a clean copy.";
const REPORT = "Run with --verbose and report the message with the command that gave it.";

export const ERROR_CODES = {
  // the command line and the user's own files
  E_USAGE: { exit: 2, about: "An option, argument or combination the verb does not accept.", hint: "Run `kerncap VERB --help` for the options." },
  E_EXISTS: {
    exit: 2,
    about: "An output path already exists and the verb does not replace it (or may not: it is not what kerncap wrote).",
    hint: "Choose another output path, or pass --force where the verb takes it.",
  },
  E_IO: {
    exit: 2,
    about: "A file-system operation failed: permission denied, a read-only or full disk, a path through a file, too many open files.",
    hint: "Check the folder's permissions and free space, or choose another --out / -o.",
  },
  E_TMPDIR: {
    exit: 2,
    about: "kerncap cannot make its working folder under TMPDIR, or another user could swap it there (a TMPDIR others can write, not sticky).",
    hint: "Set TMPDIR to a writable folder of your own.",
  },
  E_CACHE: {
    exit: 2,
    about:
      "The cache folder (KERNCAP_CACHE, default $XDG_CACHE_HOME/kerncap or ~/.cache/kerncap, else $TMPDIR/kerncap-cache-<uid>) is not absolute or cannot be written.",
    hint: "Set KERNCAP_CACHE to an absolute folder you can write, or unset it.",
  },
  E_STDERR_CLOSED: {
    exit: 2,
    about: "kerncap was started with stderr closed (`2>&-`): its messages would be lost, so it does nothing.",
    hint: "Send stderr to a file or /dev/null instead (`2>/dev/null`).",
  },
  E_STDOUT_CLOSED: {
    exit: 2,
    about: "kerncap was started with stdout closed (`>&-`): its results and documents would be lost, so it does nothing.",
    hint: "Send stdout to a file, a pipe or /dev/null instead (`>/dev/null` to discard it).",
  },
  E_BUSY: {
    exit: 2,
    about:
      "kerncap mcp already holds as many bytes of tool calls' arguments as it takes (calls running or waiting for a slot); this call was refused before it started.",
    hint: "Send it again once some of your calls have finished.",
  },
  E_INTERRUPTED: {
    exit: 130,
    about:
      "Ctrl-C (SIGINT) or SIGTERM ended the verb; its partial output is removed. The status is 128 + the signal's number: 130 for SIGINT, 143 for SIGTERM (129 SIGHUP, 131 SIGQUIT).",
    hint: "Run the command again.",
  },
  E_INTERNAL: {
    exit: 2,
    about: "An error kerncap did not expect: a bug.",
    hint: "This is a kerncap bug; run with --verbose for the stack trace and report it.",
  },

  // the application under `run` and `list`, and the capture library
  E_APP_NOT_FOUND: { exit: 2, about: "The program after `--` is not on PATH or not at the path given.", hint: "Give the program's path (./app) or fix PATH." },
  E_APP_NOT_EXECUTABLE: {
    exit: 2,
    about: "The program after `--` is a folder or a file without execute permission.",
    hint: "chmod +x it, or run it through its interpreter (python app.py).",
  },
  E_LIB: {
    exit: 2,
    about: "The capture library (embedded, or KERNCAP_CUDA_LIB) is missing.",
    hint: "Build it with `bash scripts/build-c.sh`, then rebuild kerncap; or unset KERNCAP_CUDA_LIB.",
  },
  E_NO_CUPTI: {
    exit: 2,
    about: "No usable libcupti was found for the capture library (KERNCAP_CUPTI_PATH, the CUDA toolkit, the pip wheels).",
    hint: "Install the CUDA toolkit's CUPTI or set KERNCAP_CUPTI_PATH to libcupti.so.",
  },
  E_TOOL: {
    exit: 2,
    about: "Another CUDA tool (compute-sanitizer, ncu, nsys) holds the application's tool injection, which the capture library needs too.",
    hint: "Run the application under kerncap without that tool, then point the tool at the replay: `ncu kerncap replay DIR`.",
  },
  E_NO_KERNELS: {
    exit: 2,
    about: "The application ended without launching a GPU kernel.",
    hint: "Check that the application runs on the GPU (run it alone), or run with --verbose for the capture library's log.",
  },
  E_NO_MATCH: {
    exit: 2,
    about: "No launch matched --kernel / --dispatch (or --rank / --process) before the application ended.",
    hint: "List the kernels and their launch counts with `kerncap list -- APP`, then adjust --kernel or --dispatch.",
  },
  E_GRAPH: {
    exit: 2,
    about: "The chosen launch ran inside a CUDA graph in a way the capture library cannot capture.",
    hint: "Capture an eager launch of the kernel (`kerncap list` shows graph launches), or run the application without CUDA graphs.",
  },
  E_COLLECTIVE: {
    exit: 2,
    about: "The matched launches are collective kernels (NCCL and the like): they wait on peer ranks, so one cannot be replayed alone.",
    hint: "Capture a kernel that does not communicate, or narrow --kernel so it matches no collective.",
  },
  E_CAPTURE_FAILED: {
    exit: 2,
    about: "The capture library saw the launch but wrote no usable capture.",
    hint: "Run with --verbose to see the capture library's log, and report it if it persists.",
  },
  E_RAW: {
    exit: 2,
    about: "The capture library's raw output does not fit the format this kerncap reads (docs/raw-capture.md).",
    hint: "Rebuild kerncap (bash scripts/build.sh), which embeds its own capture library.",
  },
  E_SOURCE_NOT_FOUND: {
    exit: 2,
    about: "The CUDA kernel's source was not found for the reproducer project.",
    hint: "Pass --source-root or --compile-commands (docs/cuda-sources.md).",
  },
  E_COMPILE_COMMANDS: {
    exit: 2,
    about: "The compile database (--compile-commands) cannot be read or turned into the kernel's compile command.",
    hint: "Point --compile-commands at a compile_commands.json (cmake -DCMAKE_EXPORT_COMPILE_COMMANDS=ON writes one) or at its build folder.",
  },
  E_REPRO: {
    exit: 2,
    about: "The reproducer project could not be written (a template, the kernel's source, its dependencies).",
    hint: "Pass --source-root or run kerncap on the machine that built the application.",
  },

  // a capture folder, an archive and the files in them
  E_NOT_CAPTURE: {
    exit: 2,
    about: "The path given as a capture is not a capture folder (missing, a file, an archive), or a folder given to check or clean holds none.",
    hint: "Give the folder that `kerncap run --out DIR` wrote (an archive: `kerncap unpack` it first).",
  },
  E_NESTED_CAPTURE: {
    exit: 2,
    about: "The folder given lies inside another capture (its sources, its build outputs): never a capture of its own.",
    hint: "Give the capture folder itself, or a folder outside every capture.",
  },
  E_MANIFEST: {
    exit: 2,
    about: "kerncap.json (or pinned.json) is not valid JSON or does not fit the manifest's schema (docs/capture-format.md).",
    hint: CAPTURE_AGAIN,
  },
  E_MANIFEST_VERSION: {
    exit: 2,
    about: "The manifest has a version this kerncap does not read.",
    hint: "Use the kerncap that wrote the capture (tool.version in kerncap.json), or capture again with this one.",
  },
  E_CHECKSUM: {
    exit: 2,
    about: "A file of the capture is missing, has the wrong size, or its SHA-256 or a memory chunk's checksum does not match.",
    hint: CAPTURE_AGAIN,
  },
  E_UNSAFE_PATH: {
    exit: 2,
    about:
      "A path from a manifest, an archive or an MCP call is malformed, leaves the folder, or names a link, a hard link, a FIFO or a device; or a file kerncap writes is a symbolic link (docs/security.md).",
    hint: "Nothing was read or written there; ask for a clean copy of the capture, or remove the link.",
  },
  E_ARCHIVE: {
    exit: 2,
    about: "An archive is damaged, malicious, or changed while it was read or written.",
    hint: "Ask for the archive again (or pack it again when nothing writes to the capture); nothing was unpacked.",
  },
  E_PACK_LINK: {
    exit: 2,
    about: "The folder to pack holds a symbolic link or a file with a second hard link.",
    hint: "Replace the link with the file itself (cp -L) or remove it, then pack again.",
  },
  E_PACK_NAME: {
    exit: 2,
    about:
      "The folder to pack holds a file name `kerncap unpack` would refuse (not UTF-8, a backslash, outside letters, digits and `._+-`), or an MCP edit_file or an eval candidate (a tree, an overlay, evaluate's files) names a source that way, or by a path past the source path limits (255 bytes a name, 1024 bytes the path, 32 parts).",
    hint: "Rename the file (or remove it), then pack (or evaluate) again.",
  },
  E_JUDGE: {
    exit: 2,
    about: "kerncap-judge.json (the capture's stored judging settings) cannot be read or is not valid.",
    hint: "Write the settings again with `kerncap judge DIR ...`, or remove the file (`kerncap judge DIR --clear`).",
  },
  E_BASELINE: {
    exit: 2,
    about: "A `check` baseline file is missing (--baseline FILE: nothing there), not valid JSON, or not a kerncap check baseline.",
    hint: "Give the baseline.json a `kerncap check` wrote (--write-baseline), or another --baseline.",
  },
  E_RESULTS: {
    exit: 2,
    about: "A `check` results file or an `eval` records file is not what the verb wrote (or holds no record).",
    hint: "Give the file the verb wrote, or run the verb again.",
  },

  E_RECORD_AUTH: {
    exit: 2,
    about:
      "A `check` or `eval` record read back by --merge or --resume carries no valid authenticator: no kerncap holding this results key wrote it as it is (another machine's or user's key, a record changed after it was written, or one made up), or there is no key to verify it with.",
    hint: "Merge where the shards were written, or give every run the same KERNCAP_RESULTS_KEY (docs/environment.md).",
  },

  // trust and confinement (docs/security.md)
  E_UNTRUSTED: {
    exit: 2,
    about:
      "A received capture's build (build.sh, or a Triton kernel's source) would run before the user trusted it; or plain --trust / judge's plain --accept where another user could change the files between the user's reading and the command (give the digest).",
    hint: "Show the files to the user; if they trust them, run the command again with --trust (or --trust=DIGEST).",
  },
  E_TRUST_CHANGED: {
    exit: 2,
    about:
      "The files a build runs changed since they were shown or trusted (--trust=DIGEST no longer matches), or the judging settings since they were shown (judge --accept=DIGEST).",
    hint: "Nothing was run. Run the command again without --trust to see the files, then trust the digest it shows.",
  },
  E_NOT_RENDERED: {
    exit: 2,
    about: "A confined build (kerncap mcp) found build.sh, pinned.json or repro.py other than kerncap wrote and the user trusted.",
    hint: "Show the file to the user; if they trust it, they run `kerncap validate DIR --trust` once on the command line.",
  },
  E_CONFINED: {
    exit: 2,
    about:
      "A confined build (kerncap eval's CUDA candidates, validate/tune/profile --confine, kerncap mcp) read a file outside the capture, its source root and the toolchain, its sources name one, its build.sh wrote no dependency list though it built, its sandbox could not be made, or it wrote a file past 512 MiB (an eval candidate's verdict is then error).",
    hint: "Keep the edit to the capture's own sources, or validate on the command line without --confine.",
  },
  E_NOT_SOURCE: {
    exit: 2,
    about:
      "An MCP edit_file named a file that is not one of the reproducer's sources or that kerncap generates (CUDA's slice: edit its TU), the capture's own build.sh or kerncap.json included, or an eval candidate writes one (a patch on the command line, an MCP evaluate candidate: that candidate's verdict is error: it was never written nor built).",
    hint: "Edit the kernel's sources under src/; build.sh, kerncap.json and the scripts are the user's to change.",
  },

  // rebuilding a reproducer
  E_SLICE_EDITED: {
    exit: 2,
    about:
      "The CUDA slice (src/*.kerncap-slice.cu, generated from its TU) was edited by hand, and its TU changed since: remaking the slice would lose the edit.",
    hint: "Make the edit in the TU or the kernel's definition file under src/ (the slice is remade from it), or delete the slice to compile the whole TU.",
  },
  E_NO_REPRODUCER: {
    exit: 2,
    about: "The capture has no reproducer project (no build.sh, pinned.json or src/) for the verb to build.",
    hint: "Capture again with the kernel's source available (--source-root, --compile-commands).",
  },
  E_FRONTEND: {
    exit: 2,
    about: "The verb does not handle this capture's frontend (CUDA, Triton, HIP) or vendor.",
    hint: "Rebuild it with its build.sh and replay the module with `kerncap replay DIR --against BUILT`.",
  },
  E_BUILD: {
    exit: 2,
    about:
      "The reproducer does not build (the compiler's diagnostics also in `error.details.diagnostics`; a confined build stopped in the preprocessor says only that), build.sh ran past its time limit (KERNCAP_BUILD_TIMEOUT, a confined build's 600 s: `details.timedOut`), or build.sh's module is not one the replay can load.",
    hint: "Fix the error shown (the compiler's messages are above), then run the verb again.",
  },
  E_NO_NVCC: { exit: 2, about: "nvcc was not found.", hint: "Install the CUDA toolkit or set NVCC to its nvcc." },
  E_PATCH: {
    exit: 2,
    about:
      "An eval candidate's patch does not apply to the capture's src/, or is no patch git apply reads (empty, not a diff, a link, a mode change, a rename), or writes a path outside src/ (the candidate's verdict is error: it was never built; the other candidates are evaluated).",
    hint: "Make the patch against the capture's src/ (diff -ru src edited, git diff inside src/, or diff -u FILE EDITED inside src/: names a/kernel.cu, b/kernel.cu or bare kernel.cu).",
  },
  E_CANDIDATE: {
    exit: 2,
    about:
      "An eval candidate does not fit the capture's src/: a replacement file whose name no file of src/ has (or several have), a folder that lacks a file the build compiles, is empty or holds a link or a FIFO, a candidate that is a link, an overlay or MCP evaluate candidate with a path outside src/, a config that is not one config or is for a capture that is not Triton's (the candidate's verdict is error: it was never built; the other candidates are evaluated).",
    hint: "Give an edited copy of the whole src/ folder, a patch against src/, or a file named as the one file of src/ it replaces.",
  },
  E_KERNEL_NOT_FOUND: {
    exit: 2,
    about: "The rebuilt module does not define the captured kernel.",
    hint: "Keep the kernel's name, template arguments and parameter list.",
  },
  E_PARAM_LAYOUT: {
    exit: 2,
    about: "An edit changed the kernel's parameter layout; the replay passes the captured parameter bytes unchanged, so nothing was launched.",
    hint: "Keep the parameter list (types, order, struct layouts) as captured.",
  },
  E_RDC: {
    exit: 2,
    about: "The rebuilt module calls device functions of other translation units (relocatable device code), which the reproducer does not link.",
    hint: "Move the called device functions into the kernel's TU or a header, or replay the captured module.",
  },

  // module images
  E_MODULE_KIND: {
    exit: 2,
    about: "A module image is none of the kinds kerncap reads (cubin, fatbin, PTX, AMDGPU code object).",
    hint: "Give a cubin or AMDGPU ELF, a fatbin or PTX text.",
  },
  E_ELF: { exit: 2, about: "A module image is a malformed ELF file.", hint: "The code object is truncated or not what it claims to be; capture it again." },
  E_CUBIN: {
    exit: 2,
    about: "A cubin's header does not describe a CUDA device code object kerncap reads.",
    hint: "Give the device code object (cubin), not a host object or an AMDGPU code object.",
  },
  E_FATBIN: { exit: 2, about: "A fatbin is malformed or its compressed data is corrupt.", hint: CAPTURE_AGAIN },
  E_NO_CUBIN: {
    exit: 2,
    about: "A module image holds no machine code for the GPU architecture asked for.",
    hint: "Replay on a GPU of the captured architecture, or rebuild for this one.",
  },
  E_CODEOBJ: {
    exit: 2,
    about: "An AMDGPU code object or offload bundle is malformed, or lacks the kernel.",
    hint: "Give an AMDGPU code object (.hsaco) or a clang offload bundle that holds the kernel.",
  },

  // replay
  E_NO_GPU: {
    exit: 2,
    about: "No GPU or driver to replay on (libcuda or the HSA runtime does not load, or no device).",
    hint: "Replay on a machine with the captured vendor's GPU and driver (`kerncap doctor` checks it).",
  },
  E_ARCH: {
    exit: 2,
    about: "The module cannot run on this GPU's architecture.",
    hint: "Replay on a GPU of the captured architecture, or rebuild the reproducer for this one.",
  },
  E_CUDA: { exit: 2, about: "A CUDA driver call failed (the call and the driver's own error string are in the message).", hint: REPORT },
  E_HSA: { exit: 2, about: "An HSA runtime call failed, or the GPU agent lacks a memory pool the replay needs.", hint: REPORT },
  E_HSA_NOT_FOUND: {
    exit: 2,
    about: "libhsa-runtime64 was not found.",
    hint: "Install ROCm (the HSA runtime) or set KERNCAP_HSA_PATH to libhsa-runtime64.so.1.",
  },
  E_HSA_VMEM: {
    exit: 2,
    about: "The HSA runtime lacks the virtual-memory calls a replay at the captured addresses needs (ROCm before 6.0).",
    hint: "Install ROCm 6.0 or newer on the replay machine.",
  },
  E_VA_TAKEN: {
    exit: 2,
    about: "A captured virtual-address range is not free in the replaying process (kerncap retries once without address-space randomization).",
    hint: "Replay in a fresh process with nothing else on the GPU.",
  },
  E_KERNEL_NOT_IN_MODULE: {
    exit: 2,
    about: "The module given to replay does not export the captured kernel's symbol.",
    hint: 'Check the kernel\'s name (extern "C" and templates change the mangled name).',
  },
  E_GLOBAL: {
    exit: 2,
    about: "A rebuilt module lacks a module-scope variable the capture restores, or has it at another size.",
    hint: "Keep the module-scope variables' names, types and sizes, or capture again after the change.",
  },
  E_AGAINST: {
    exit: 2,
    about: "`replay --against` was given something that is not a module or a capture of the same memory.",
    hint: "Give a module built from this capture's reproducer, or a capture of the same launch.",
  },

  // profile
  E_NO_NCU: {
    exit: 2,
    about: "Nsight Compute (ncu) was not found.",
    hint: "Install Nsight Compute (it ships with the CUDA toolkit), then put it on PATH or set CUDA_HOME.",
  },
  E_NO_NSYS: {
    exit: 2,
    about: "Nsight Systems (nsys) was not found.",
    hint: "Install Nsight Systems (it ships with the CUDA toolkit), then put it on PATH or set CUDA_HOME.",
  },
  E_NCU: {
    exit: 2,
    about: "ncu failed or profiled no launch (including ERR_NVGPUCTRPERM: no access to the performance counters).",
    hint: "Run `kerncap replay DIR` alone first, then --verbose for ncu's whole output.",
  },
  E_NCU_REPORT: {
    exit: 2,
    about: "ncu's report could not be read back, or holds no profiled launch.",
    hint: "Open the report (kept beside the capture) in the Nsight Compute UI, or run with --verbose.",
  },
  E_NSYS: { exit: 2, about: "nsys failed or wrote no report.", hint: "Run `kerncap replay DIR` alone first, then --verbose for nsys's whole output." },

  // check and eval records (a record's code, not an exit)
  E_WORKER: {
    exit: 2,
    about: "A check or eval worker process died; the captures or candidates it held were not judged (a record's code).",
    hint: "Run again (--resume); a kernel that crashes the driver shows it in the worker's stderr above.",
  },
  E_TIMEOUT: {
    exit: 2,
    about: "An eval candidate's launches ran past their time limit and were killed with the worker (a record's code).",
    hint: "The candidate is slower than the limit allows (or hangs); fix it, or raise the watchdog's floor (`kerncap eval --timeout S`).",
  },
} as const satisfies Record<string, ErrorSpec>;

/** A code of the table: the only codes a KerncapError may carry. */
export type ErrorCode = keyof typeof ERROR_CODES;

/** Whether `s` is a code of the table (for codes read back from a document or a child's output). */
export function isErrorCode(s: string): s is ErrorCode {
  return Object.hasOwn(ERROR_CODES, s);
}
