/**
 * Names of the files kerncap writes beside a capture's own: a leaf module (no package imports), so
 * the GPU suite, which runs on a node without node_modules, can import them.
 */

/** Left in a folder by `kerncap unpack` (src/format/received.ts): the capture came from someone else. */
export const RECEIVED_MARK = "kerncap-received.json";

/**
 * The seal that makes a capture the user's own, made here (src/format/made-here.ts): an HMAC with
 * the user's results key over the manifest and the folder. pack leaves it out; unpack removes one.
 */
export const MADE_HERE_SEAL = "kerncap-made-here.json";

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

/**
 * Whether a file's own name (no folder part) is an editor's temporary or backup rather than a
 * source: vim's swap files (`.x.cu.swp`, `.swo` … `.swx`, and the `4913` probe it writes), Emacs's
 * backups (`x.cu~`), autosaves (`#x.cu#`) and lock links (`.#x.cu`), Kate's `.kate-swp`,
 * JetBrains' `___jb_tmp___`/`___jb_old___`, sed -i's `sedXXXXXX`, and `.tmp`/`.temp`/`.bak`/`.orig`
 * copies. Shared by the watch (src/rebuild/watch.ts isSourceSave: a save of one is no edit) and by
 * pack and export (isLeftOutOfSources: never shipped).
 */
export function isEditorTemporary(name: string): boolean {
  if (/~$|\.sw[a-px]$|\.tmp$|\.temp$|\.bak$|\.orig$|\.kate-swp$|___jb_(tmp|old)___$/i.test(name)) return true;
  return /^#.*#$/.test(name) || name.startsWith(".#") || name === "4913" || /^sed[A-Za-z0-9]{6}$/.test(name);
}

/**
 * Whether `rel` (a `/`-separated path or one name) is Python's bytecode cache: a `__pycache__`
 * folder or what lies in it, a `.pyc`/`.pyo` file. Python loads such a file in place of the source
 * beside it (an unchecked-hash .pyc is never compared with it: adversary 58), so no capture holds
 * one: pack, export and a build's copy leave it out, unpack and eval's trees refuse it.
 */
export function isPythonBytecode(rel: string): boolean {
  const parts = rel.split("/");
  return parts.includes("__pycache__") || /\.py[co]$/i.test(parts[parts.length - 1]!);
}

/**
 * Whether pack and export leave the capture file `rel` (relative, `/`-separated) out: an editor
 * temporary anywhere (isEditorTemporary), Python's bytecode cache (isPythonBytecode), and under src/ any hidden name (a part starting with `.`:
 * an editor's or a tool's own file, never a source the build reads by kerncap's design). Both name
 * what they left out in one warning line.
 */
export function isLeftOutOfSources(rel: string): boolean {
  const parts = rel.split("/");
  if (isEditorTemporary(parts[parts.length - 1]!) || isPythonBytecode(rel)) return true;
  return parts[0] === "src" && parts.slice(1).some((p) => p.startsWith("."));
}
