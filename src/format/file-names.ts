/**
 * Names of the files kerncap writes beside a capture's own: a leaf module (no package imports), so
 * the GPU suite, which runs on a node without node_modules, can import them.
 */

/** Left in a folder by `kerncap unpack` (src/format/received.ts): the capture came from someone else. */
export const RECEIVED_MARK = "kerncap-received.json";

/**
 * Names kerncap (or what a rebuild runs) reads as configuration or runs as a script, wherever they
 * lie: the manifest and the received mark (every other kerncap*.json is refused too: the capture
 * set's index), the reproducer's build.sh, Triton's pinned.json (it names the interpreter) and
 * repro.py, and the files Python itself runs at start-up from a folder on its path. kerncap mcp's
 * edit_file never writes one, at any depth under src/ (src/frontends/index.ts notAnEditableSource).
 */
export const KERNCAP_CONFIG_NAMES: readonly string[] = [
  "kerncap.json",
  RECEIVED_MARK,
  "build.sh",
  "pinned.json",
  "repro.py",
  "sitecustomize.py",
  "usercustomize.py",
];

/** The marker of an export folder (`kerncap export`, src/export/export.ts), whose data/ is a copy of the capture. */
export const EXPORT_FILE = "kerncap-export.json";

/** A capture's judging settings (`kerncap judge`: tolerance, element types, multiset regions; src/replay/judge-settings.ts), with its own checksum. */
export const JUDGE_FILE = "kerncap-judge.json";
