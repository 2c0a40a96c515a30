/**
 * `kerncap mcp`: a Model Context Protocol server (official TypeScript SDK, low-level `Server`)
 * whose tools are the verbs. Each tool runs this same kerncap in a child process with --json
 * (src/doctor.ts selfCommand): every capture, replay and validate gets a fresh process (its own
 * CUDA context and VA space, as on the command line) and the tool returns the verb's JSON
 * document (`schema: "kerncap.<verb>/N"`) as structured content and as text. A verb that exits
 * 2 returns its error document with isError; a mismatch (exit 1) is a result, not an error.
 *
 * Tool inputs are valibot schemas; their JSON Schemas (from @valibot/to-json-schema) are what
 * tools/list announces, and each call's arguments are checked against the same schema.
 * edit_file and read_file touch only files under a capture folder (edit_file: only under src/).
 */
import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js";
import { CallToolRequestSchema, ListToolsRequestSchema, type CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { toJsonSchema } from "@valibot/to-json-schema";
import { existsSync, mkdirSync, readFileSync, realpathSync, statSync, writeFileSync } from "node:fs";
import { dirname, isAbsolute, join, relative, resolve, sep } from "node:path";
import * as v from "valibot";
import { jsonDocument } from "../cli/args.ts";
import { selfCommand } from "../doctor.ts";
import { isKerncapError, KerncapError } from "../errors.ts";
import { readManifest } from "../format/capture-dir.ts";
import { TOOL_VERSION } from "../version.ts";

const Dir = v.pipe(v.string(), v.minLength(1), v.description("Capture folder (written by kerncap run)"));
const Tol = {
  iters: v.optional(v.pipe(v.number(), v.integer(), v.minValue(0), v.description("Timed launches after the checked one"))),
  atol: v.optional(v.pipe(v.number(), v.description("Absolute tolerance per element"))),
  rtol: v.optional(v.pipe(v.number(), v.description("Relative tolerance per element"))),
  dtype: v.optional(v.pipe(v.string(), v.description("Element type where the signature gives none (fp32, fp16, bf16, …)"))),
};
const App = v.pipe(v.array(v.string()), v.minLength(1), v.description("The application command line: program and its arguments"));

/** Tool name → description, input schema, and the kerncap arguments it runs (or a local action). */
const TOOLS = {
  list: {
    description: "Run an application with the capture library in count-only mode; returns every kernel it launched (name, count, grid, block, module). Document kerncap.list/1.",
    input: v.object({ app: App, cwd: v.optional(v.string()) }),
    argv: (a: { app: string[] }) => ["list", "--json", "--", ...a.app],
  },
  run: {
    description: "Run an application and capture the Nth launch of a kernel (POSIX ERE on the mangled or demangled name) into a capture folder with a reproducer project. Document kerncap.run/1.",
    input: v.object({
      app: App,
      kernel: v.optional(v.pipe(v.string(), v.description("POSIX extended regex for the kernel name"))),
      dispatch: v.optional(v.pipe(v.number(), v.integer(), v.minValue(0), v.description("0-based index among the matching launches"))),
      out: v.optional(v.pipe(v.string(), v.description("Capture folder to write (default kerncap-capture)"))),
      force: v.optional(v.pipe(v.boolean(), v.description("Replace a previous capture at out"))),
      exitAfterCapture: v.optional(v.boolean()),
      sourceRoot: v.optional(v.pipe(v.string(), v.description("CUDA: the app's source tree"))),
      compileCommands: v.optional(v.pipe(v.string(), v.description("CUDA: compile_commands.json or its folder"))),
      cwd: v.optional(v.string()),
    }),
    argv: (a: { app: string[]; kernel?: string; dispatch?: number; out?: string; force?: boolean; exitAfterCapture?: boolean; sourceRoot?: string; compileCommands?: string }) => [
      "run",
      "--json",
      ...(a.kernel !== undefined ? ["--kernel", a.kernel] : []),
      ...(a.dispatch !== undefined ? ["--dispatch", String(a.dispatch)] : []),
      ...(a.out !== undefined ? ["--out", a.out] : []),
      ...(a.force ? ["--force"] : []),
      ...(a.exitAfterCapture ? ["--exit-after-capture"] : []),
      ...(a.sourceRoot !== undefined ? ["--source-root", a.sourceRoot] : []),
      ...(a.compileCommands !== undefined ? ["--compile-commands", a.compileCommands] : []),
      "--",
      ...a.app,
    ],
  },
  inspect: {
    description: "Read a capture: the manifest (kernel, launch, parameters, regions, device) and the integrity verdict (verify: every region's SHA-256 too). Document kerncap.inspect/1.",
    input: v.object({ dir: Dir, verify: v.optional(v.boolean()) }),
    argv: (a: { dir: string; verify?: boolean }) => ["inspect", a.dir, "--json", ...(a.verify ? ["--verify"] : [])],
  },
  replay: {
    description: "Replay the captured kernel at its captured VAs in a fresh process; compares every region with the app's after state (verdict match/mismatch) and times it. Document kerncap.replay/1.",
    input: v.object({ dir: Dir, ...Tol }),
    argv: (a: { dir: string } & ToleranceIn) => ["replay", a.dir, "--json", ...tolArgv(a)],
  },
  validate: {
    description: "Rebuild the (edited) reproducer with the capture's build.sh, replay the rebuilt kernel on the captured memory, compare with the app's after state. A compile error comes back as the error document with the compiler's message. Document kerncap.validate/1.",
    input: v.object({ dir: Dir, ...Tol, force: v.optional(v.pipe(v.boolean(), v.description("Rebuild even when the toolchain differs from the capture's"))) }),
    argv: (a: { dir: string; force?: boolean } & ToleranceIn) => ["validate", a.dir, "--json", ...tolArgv(a), ...(a.force ? ["--force"] : [])],
  },
  read_file: {
    description: "Read a text file of a capture folder (e.g. src/<kernel source>, build.sh, README.md). Document kerncap.file/1 with the content.",
    input: v.object({ dir: Dir, path: v.pipe(v.string(), v.minLength(1), v.description("Path relative to the capture folder")) }),
  },
  edit_file: {
    description: "Edit a file of the reproducer under the capture's src/ folder: either replace the one occurrence of oldText with newText, or write content as the whole file. Nothing outside src/ can be written. Then call validate. Document kerncap.edit/1.",
    input: v.object({
      dir: Dir,
      path: v.pipe(v.string(), v.minLength(1), v.description("Path relative to the capture's src/ folder (a leading src/ is accepted)")),
      oldText: v.optional(v.pipe(v.string(), v.minLength(1), v.description("Exact text to replace; must occur exactly once"))),
      newText: v.optional(v.string()),
      content: v.optional(v.pipe(v.string(), v.description("The whole new file (instead of oldText/newText)"))),
    }),
  },
} as const;
type ToolName = keyof typeof TOOLS;
type ToleranceIn = { iters?: number; atol?: number; rtol?: number; dtype?: string };

function tolArgv(a: ToleranceIn): string[] {
  return [...(a.iters !== undefined ? ["--iters", String(a.iters)] : []), ...(a.atol !== undefined ? ["--atol", String(a.atol)] : []), ...(a.rtol !== undefined ? ["--rtol", String(a.rtol)] : []), ...(a.dtype !== undefined ? ["--dtype", a.dtype] : [])];
}

function result(doc: Record<string, unknown>, isError = false, extra?: string): CallToolResult {
  return { content: [{ type: "text", text: JSON.stringify(doc, null, 2) }, ...(extra ? [{ type: "text" as const, text: extra }] : [])], structuredContent: doc, isError };
}

function errorResult(e: unknown): CallToolResult {
  const k = isKerncapError(e) ? e : new KerncapError("E_INTERNAL", `internal error: ${(e as Error).message}`);
  return result(jsonDocument("error", { error: { code: k.code, message: k.message, hint: k.hint ?? null } }), true);
}

/** Run `kerncap ARGV` (a child process) and return its JSON document; stderr's tail goes along on failure. */
async function runVerb(argv: string[], cwd: string | undefined): Promise<CallToolResult> {
  const { BUN_BE_BUN: _, ...env } = process.env;
  const p = Bun.spawn([...selfCommand(), ...argv], { cwd: cwd ?? process.cwd(), env, stdin: "ignore", stdout: "pipe", stderr: "pipe" });
  const [out, err, code] = await Promise.all([new Response(p.stdout).text(), new Response(p.stderr).text(), p.exited]);
  let doc: Record<string, unknown>;
  try {
    doc = JSON.parse(out);
  } catch {
    return errorResult(new KerncapError("E_INTERNAL", `kerncap ${argv[0]} printed no JSON document (exit ${code}): ${err.trim().split("\n").slice(-5).join(" | ")}`));
  }
  const tail = err.trim() ? `stderr (last lines):\n${err.trim().split("\n").slice(-40).join("\n")}` : undefined;
  return result(doc, code === 2 || code > 2, code >= 2 ? tail : undefined);
}

/** A capture folder and a path inside it, resolved through symbolic links; under `sub` when given. @throws KerncapError E_USAGE */
function capturePath(dirArg: string, rel: string, sub?: string): { dir: string; path: string; shown: string } {
  const dir = resolve(dirArg);
  readManifest(dir); // a capture folder, or the reader's own error
  const base = realpathSync(sub ? join(dir, sub) : dir);
  const r = sub && rel.startsWith(`${sub}/`) ? rel.slice(sub.length + 1) : rel;
  if (isAbsolute(r) || r.split(/[\\/]/).includes("..")) throw new KerncapError("E_USAGE", `${rel} is not a path inside ${sub ? `${dir}/${sub}` : dir}`, { hint: `Give a path relative to the capture's ${sub ?? "folder"}${sub ? "/" : ""}.` });
  const p = resolve(base, r);
  // the deepest existing ancestor must stay inside (a symbolic link in src/ must not lead out)
  let q = p;
  while (!existsSync(q)) q = dirname(q);
  const real = realpathSync(q);
  if (real !== base && !real.startsWith(base + sep)) throw new KerncapError("E_USAGE", `${rel} leads outside ${base}`, { hint: `Only files under the capture's ${sub ?? "folder"} can be ${sub ? "edited" : "read"}.` });
  if (p === base) throw new KerncapError("E_USAGE", `${rel} names the folder itself`, { hint: "Give a file." });
  return { dir, path: p, shown: relative(dir, p) };
}

function readFileTool(a: { dir: string; path: string }): CallToolResult {
  const { dir, path, shown } = capturePath(a.dir, a.path);
  if (!existsSync(path) || !statSync(path).isFile()) throw new KerncapError("E_USAGE", `${shown} is not a file in ${dir}`, { hint: "List the reproducer's files with inspect (manifest source) or read README.md." });
  const size = statSync(path).size;
  if (size > 4 << 20) throw new KerncapError("E_USAGE", `${shown} has ${size} bytes; read_file returns text files up to 4 MiB`, { hint: "Memory images are not text: use inspect and replay." });
  const b = readFileSync(path);
  if (b.includes(0)) throw new KerncapError("E_USAGE", `${shown} is a binary file`, { hint: "read_file returns text files (sources, build.sh, README.md)." });
  return result(jsonDocument("file", { dir, path: shown, bytes: size, content: b.toString("utf8") }));
}

function editFileTool(a: { dir: string; path: string; oldText?: string; newText?: string; content?: string }): CallToolResult {
  const { dir, path, shown } = capturePath(a.dir, a.path, "src");
  let text: string;
  if (a.content !== undefined) {
    if (a.oldText !== undefined) throw new KerncapError("E_USAGE", "give content, or oldText and newText, not both", { hint: "content replaces the whole file; oldText/newText one passage." });
    text = a.content;
  } else {
    if (a.oldText === undefined || a.newText === undefined) throw new KerncapError("E_USAGE", "give oldText and newText (or content)", { hint: "oldText must occur exactly once in the file." });
    if (!existsSync(path)) throw new KerncapError("E_USAGE", `${shown} does not exist`, { hint: "Create it with content, or check the path with read_file." });
    const old = readFileSync(path, "utf8");
    const n = old.split(a.oldText).length - 1;
    if (n !== 1) throw new KerncapError("E_USAGE", `oldText occurs ${n} times in ${shown}; it must occur exactly once`, { hint: n ? "Include more surrounding lines to make it unique." : "Read the file again (read_file); the text differs." });
    text = old.replace(a.oldText, () => a.newText!);
  }
  mkdirSync(dirname(path), { recursive: true });
  writeFileSync(path, text);
  return result(jsonDocument("edit", { dir, path: shown, bytes: Buffer.byteLength(text) }));
}

/** The MCP server with kerncap's tools; connect it to a transport (stdio, or in-memory in tests). */
export function createMcpServer(): Server {
  const server = new Server({ name: "kerncap", version: TOOL_VERSION }, { capabilities: { tools: {} }, instructions: "Capture a GPU kernel from an application (run), inspect and replay it, edit its reproducer under src/ (edit_file) and check the edit with validate. Every tool returns a JSON document with a schema id." });
  server.setRequestHandler(ListToolsRequestSchema, async () => ({
    tools: Object.entries(TOOLS).map(([name, t]) => {
      const { $schema: _, ...inputSchema } = toJsonSchema(t.input, { errorMode: "ignore" }) as Record<string, unknown>;
      return { name, description: t.description, inputSchema: inputSchema as { type: "object" } };
    }),
  }));
  server.setRequestHandler(CallToolRequestSchema, async (req): Promise<CallToolResult> => {
    const name = req.params.name;
    if (!Object.hasOwn(TOOLS, name)) return errorResult(new KerncapError("E_USAGE", `no tool named ${JSON.stringify(name)}`, { hint: `Tools: ${Object.keys(TOOLS).join(", ")}.` }));
    const t = TOOLS[name as ToolName];
    const parsed = v.safeParse(t.input, req.params.arguments ?? {});
    if (!parsed.success) {
      const issues = parsed.issues.slice(0, 5).map((i) => `${v.getDotPath(i) ?? "(arguments)"}: ${i.message}`).join("; ");
      return errorResult(new KerncapError("E_USAGE", `bad arguments for ${name}: ${issues}`, { hint: "See the tool's inputSchema (tools/list)." }));
    }
    const a = parsed.output as Record<string, unknown>;
    try {
      if (name === "edit_file") return editFileTool(a as Parameters<typeof editFileTool>[0]);
      if (name === "read_file") return readFileTool(a as Parameters<typeof readFileTool>[0]);
      const argv = (t as { argv: (x: unknown) => string[] }).argv(a);
      return await runVerb(argv, a.cwd as string | undefined);
    } catch (e) {
      return errorResult(e);
    }
  });
  return server;
}

/** Serve until the transport closes. */
export async function serve(transport: Transport): Promise<void> {
  const server = createMcpServer();
  const closed = new Promise<void>((res) => (server.onclose = () => res()));
  await server.connect(transport);
  await closed;
}
