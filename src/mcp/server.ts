/**
 * `kerncap mcp`: a Model Context Protocol server (official TypeScript SDK, low-level `Server`)
 * whose tools are the verbs (./tools.ts). Each tool runs this same kerncap in a child process
 * with --json (./children.ts): the verb's command calls its workflow in src/ops/, so an agent's
 * validate, replay, profile, tune and evaluate pass the same gates as the command line's, and the
 * server adds the options every agent's build gets (./tools.ts gatedArgv: --confine; --trust only
 * with --trust-builds). read_file, list_files and edit_file are local (./files.ts). Every folder a
 * tool is given must be a capture of its own under the server's roots, never one nested inside
 * another capture (./roots.ts).
 *
 * Each tool child runs in its own process group. It is ended when its call is cancelled
 * (notifications/cancelled), when the transport closes (stdin EOF: nobody is left to answer) and
 * at kerncap mcp's own SIGINT/SIGTERM (its group gets that signal), after which `serve` returns
 * (EOF) or throws E_INTERRUPTED (exit 130/143) once every child has exited.
 */
import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js";
import { CallToolRequestSchema, ErrorCode, ListToolsRequestSchema, McpError, type CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { rmSync } from "node:fs";
import { availableParallelism } from "node:os";
import { resolve } from "node:path";
import * as v from "valibot";
import { KerncapError } from "../errors.ts";
import { assertNotNested, readManifest } from "../format/capture-dir.ts";
import { log } from "../log.ts";
import { signalExitCode, StopSignals } from "../process-group.ts";
import { TOOL_VERSION } from "../version.ts";
import { errorResult, runVerb, ToolChildren } from "./children.ts";
import { checkCandidates, writeCandidates } from "./evaluate.ts";
import { editFileTool, listFilesTool, readFileTool } from "./files.ts";
import { progressSender, ToolProgress } from "./progress.ts";
import { confineCwd, confineOut, confineRunInputs, confineToolDir } from "./roots.ts";
import { argumentProblems, gatedArgv, judgingArguments, toolInput, toolSchema, TOOLS, type EvaluateIn, type ToolName } from "./tools.ts";
import { outputSchema } from "./output-schema.ts";
import { illFormedStringAt, stringWhere } from "../escape.ts";
import { answerMalformedCalls, unreadableIds } from "./malformed.ts";
import { unansweredCalls } from "./unanswered.ts";
import { driverLikelyPresent } from "../native/libcuda-search.ts";

export { ToolChildren } from "./children.ts";
export { confineToolDir } from "./roots.ts";
export { TOOL_NAMES } from "./tools.ts";

/** How far `kerncap mcp` trusts what its agent asks for (docs/security.md). */
export interface McpTrust {
  /** `--trust-builds`: validate, tune and profile's build may run the build.sh of a received capture (--trust). */
  trustBuilds?: boolean;
  /** `--root DIR` (default: the working folder of `kerncap mcp`): every tool's `dir` (and evaluate's `inputs`, and run's `out`) must lie under one of them (./roots.ts). Undefined: any folder (a library caller's own choice). */
  roots?: string[];
  /** `--agent-judging`: the tools take atol, rtol, dtype and multiset from the agent (JUDGING_ARGUMENTS); without it the capture's judging settings, which the user sets with `kerncap judge`, judge every call. */
  agentJudging?: boolean;
}

/**
 * The longest string argument (UTF-16 units) but a file's text and an application's argument: four
 * times PATH_MAX (4096), so that a path a little past PATH_MAX still gets its own check's message
 * (E_PACK_NAME naming the limit), while no answer echoes a megabyte.
 */
export const ARGUMENT_TEXT_MAX = 16_384;

/**
 * The first string argument longer than ARGUMENT_TEXT_MAX that is not a file's text (edit_file's
 * content, oldText and newText; an evaluate candidate's files' contents and patch) nor an
 * application's argument (run's and list's app, bounded as a command line's), as its dot
 * path; undefined when none. A trial's 1 MB `dir` came back in its error six times over (escaped),
 * and 400 unread such answers took the server to 2 GB.
 */
export function longArgument(x: unknown, at = "", text = false): string | undefined {
  if (typeof x === "string") return !text && x.length > ARGUMENT_TEXT_MAX ? at || "(arguments)" : undefined;
  if (Array.isArray(x)) {
    for (let i = 0; i < x.length; i++) {
      const r = longArgument(x[i], `${at}[${i}]`, text);
      if (r) return r;
    }
  } else if (x && typeof x === "object") {
    const files = /(^|\.)files$/.test(at);
    for (const [k, y] of Object.entries(x)) {
      const p = at ? `${at}.${k}` : k;
      if (k.length > ARGUMENT_TEXT_MAX) return p;
      // an application's own arguments are the command line's (bounded there: MAX_ARG_STRLEN, said as too long for a command line)
      const r = longArgument(y, p, files || ["content", "oldText", "newText", "patch", "app"].includes(k));
      if (r) return r;
    }
  }
  return undefined;
}

/**
 * The builds one tool call may run at once: the CPU count shared by the calls that may run at once
 * (kerncap mcp --jobs), at least 1; each confined build may take CONFINED_DATA_KIB
 * (src/frontends/build.ts: at most the memory over the CPU count), so all of them together stay
 * within the machine's memory (a trial: 2 calls × 2 builds × 8 GiB on a 23 GB machine).
 */
export function buildsPerCall(children: Pick<ToolChildren, "jobs">): number {
  return Math.max(1, Math.floor(availableParallelism() / children.jobs));
}

/**
 * The evaluate tool: the candidates checked at once and written, once the call holds its slot,
 * into a private temporary folder (./evaluate.ts), each labelled by its name, a candidate that does
 * not fit the capture written as its refusal only (its record an error with the code, nothing of
 * it built), `kerncap eval --confine` run on them
 * (its builds confined; a received capture's, or a Triton capture's, only with --trust-builds),
 * the folder removed after (or at the server's exit).
 */
async function evaluateTool(a: EvaluateIn, children: ToolChildren, trust: McpTrust, signal?: AbortSignal, progress?: ToolProgress): Promise<CallToolResult> {
  const dir = resolve(a.dir);
  readManifest(dir); // a capture folder, or the reader's own error: nothing is copied from elsewhere
  checkCandidates(a.candidates); // a call that cannot run is refused at once, not after its wait in line
  progress?.expectTotal(a.candidates.length); // eval's count lines say candidates finished; a record may come before the first
  // written once the call holds its slot (runVerb's prepare): a call in line holds no files
  let folder: string | undefined;
  // the server may end (stdin closed, a signal) before this call's finally runs: its candidates go at the exit too
  const remove = () => {
    if (folder) rmSync(folder, { recursive: true, force: true });
  };
  process.on("exit", remove);
  try {
    const jobs = ["--jobs", String(buildsPerCall(children))];
    const write = () => {
      const w = writeCandidates(dir, a.candidates);
      folder = w.folder;
      return w.args;
    };
    // eval exits 2 when a candidate could not be judged: isError as for every tool (exit 2), the evaluation still its document (its candidates say which)
    return await runVerb([...TOOLS.evaluate.argv(a), ...jobs, ...(trust.trustBuilds ? ["--trust"] : [])], undefined, children, signal, progress, write);
  } finally {
    remove();
    process.off("exit", remove);
  }
}

/** How the server stops and restarts reading the client's messages (stdio: process.stdin.pause/resume). */
export interface Reading {
  pause(): void;
  resume(): void;
}

/**
 * The most bytes of tool-call arguments (their strings, argumentBytes) the server holds for calls
 * running or waiting, 192 MiB: a call past it, while others are held, is refused at once (E_BUSY);
 * a call alone is always taken. A parsed request costs several times its bytes (adversary 30: 50
 * queued evaluate calls of 60 MiB each, every one within the message and file bounds, held 10.5 GiB).
 */
export const MCP_INFLIGHT_MAX = 192 << 20;

/** The bytes a call's arguments hold: every string's and key's length, walked (UTF-16 units: what the parsed request costs, about). */
export function argumentBytes(x: unknown, depth = 0): number {
  if (typeof x === "string") return x.length;
  if (depth > 64 || x === null || typeof x !== "object") return 8;
  let n = 0;
  for (const [k, y] of Object.entries(x)) n += k.length + argumentBytes(y, depth + 1);
  return n;
}

/** What kerncap mcp's instructions add on a machine with no NVIDIA driver (driverLikelyPresent): an agent learns it before its first call, not from each GPU tool's E_NO_GPU (a new user's finding). */
export const NO_DRIVER_NOTE =
  " This machine shows no NVIDIA driver (no libcuda.so.1): run, list, replay and profile, and the replays of validate, tune and evaluate, answer E_NO_GPU here; build, evaluate and tune with buildOnly, inspect and the file tools (read_file, list_files, edit_file) work.";

/**
 * The MCP server with kerncap's tools; connect it to a transport (stdio, or in-memory in tests).
 * `children`: where the tool children are tracked (a call's child is ended when the call is
 * cancelled or the transport closes). Every build runs confined (validate, tune and profile with
 * build get --confine: a build that reads files outside the capture, its source root and the
 * toolchain is refused, and compiler messages keep only diagnostics of the capture's own files), and
 * a received capture's build.sh (or a Triton capture's compile, which imports src/) runs only with
 * `trust.trustBuilds` (--trust). `o.inflightMax`: the bound on the arguments held (MCP_INFLIGHT_MAX);
 * `o.reading`: what is paused while the calls held reach half of it.
 */
export function createMcpServer(
  children = new ToolChildren(),
  trust: McpTrust = {},
  o: { progressMs?: number; outputRoom?: () => Promise<void>; inflightMax?: number; reading?: Reading } = {},
): Server {
  let held = 0; // the argument bytes of the calls being handled (MCP_INFLIGHT_MAX)
  let calls = 0;
  const inflightMax = o.inflightMax ?? MCP_INFLIGHT_MAX;
  // the client's next messages stay in the pipe while the calls held reach half the bound (reading.pause): a parsed
  // request costs several times its bytes, before any handler could refuse it (adversary 30: 30 calls, 5.5 GiB)
  // (on the turns only: reading is resumed only where this paused it, never after the transport paused it to close)
  let paused = false;
  const pace = () => {
    if (held >= inflightMax / 2 === paused) return;
    paused = !paused;
    if (paused) o.reading?.pause();
    else o.reading?.resume();
  };
  const server = new Server(
    { name: "kerncap", version: TOOL_VERSION },
    {
      capabilities: { tools: {} },
      instructions:
        "Capture a GPU kernel from an application (run), inspect and replay it, edit its reproducer under src/ (edit_file) and check the edit with validate (build: whether it compiles, without a GPU); profile it with Nsight Compute (profile) and sweep its configs, macros or nvcc flags (tune); judge many candidate versions of the kernel in one call (evaluate). Every tool returns a JSON document with a schema id." +
        (driverLikelyPresent() ? "" : NO_DRIVER_NOTE),
    },
  );
  server.setRequestHandler(ListToolsRequestSchema, async () => ({
    tools: Object.entries(TOOLS).map(([name, t]) => ({
      name,
      title: t.title,
      description: t.description,
      inputSchema: toolSchema(toolInput(name as ToolName, Boolean(trust.agentJudging))) as { type: "object" },
      outputSchema: outputSchema(t.output),
      annotations: { title: t.title, ...t.annotations },
    })),
  }));
  const fileTools = answersInTurn(o.outputRoom ?? (() => Promise.resolve()));
  server.setRequestHandler(CallToolRequestSchema, async (req, extra): Promise<CallToolResult> => {
    const bytes = argumentBytes(req.params.arguments ?? {});
    if (calls > 0 && held + bytes > inflightMax)
      return errorResult(
        new KerncapError(
          "E_BUSY",
          `${req.params.name}: the server holds ${(held / 2 ** 20).toFixed(0)} MiB of arguments of ${calls} call${calls > 1 ? "s" : ""} running or waiting; this one's ${(bytes / 2 ** 20).toFixed(1)} MiB would pass ${inflightMax >> 20} MiB`,
          { hint: "Send it again once some of your calls have finished." },
        ),
      );
    held += bytes;
    calls++;
    pace();
    try {
      return await handleCall(req, extra, { children, trust, fileTools, progressMs: o.progressMs });
    } finally {
      held -= bytes;
      calls--;
      pace();
    }
  });
  answerMalformedCalls(server, Object.keys(TOOLS)); // -32602 with a sentence, before the SDK's parse of params answers -32603
  return server;
}

/** `run`'s and `list`'s paths held to the roots before the child starts (any machine says it, GPU or not): the application's working folder, and run's capture folder and what it reads and copies into src/ (adversary 83 #02). @throws KerncapError E_UNSAFE_PATH */
function confineApplication(name: "run" | "list", a: Record<string, unknown>, roots: string[] | undefined): void {
  confineCwd(a.cwd as string | undefined, roots);
  if (name !== "run") return;
  confineOut(a.out as string | undefined, a.cwd as string | undefined, roots);
  confineRunInputs(a, roots);
}

/** A tools/call request as the handler reads it. */
type CallRequest = { params: { name: string; arguments?: Record<string, unknown>; _meta?: { progressToken?: string | number } } };
/** What the handler's `extra` gives a call: its cancellation and its notifications. */
type CallExtra = { signal: AbortSignal; sendNotification: Parameters<typeof progressSender>[1] };

/** One tools/call, past the server's bound on held arguments (createMcpServer): the checks of its arguments, then the tool. */
async function handleCall(
  req: CallRequest,
  extra: CallExtra,
  ctx: { children: ToolChildren; trust: McpTrust; fileTools: ReturnType<typeof answersInTurn>; progressMs?: number | undefined },
): Promise<CallToolResult> {
  const { children, trust, fileTools } = ctx;
  await fileTools(() => undefined); // every call starts only while fewer than UNSENT_ANSWERS_MAX answers wait unread, after the file answers before it
  const name = req.params.name;
  // an unknown tool is a protocol error, as the MCP specification has it (-32602, "Unknown tool": nu83 #9), not a tool's result
  if (!Object.hasOwn(TOOLS, name))
    throw new McpError(ErrorCode.InvalidParams, `Unknown tool: ${JSON.stringify(name)}; the tools are ${Object.keys(TOOLS).join(", ")}`);
  const t = TOOLS[name as ToolName];
  const input = toolInput(name as ToolName, Boolean(trust.agentJudging));
  const judging = trust.agentJudging ? [] : judgingArguments(req.params.arguments ?? {}).filter((k) => Object.hasOwn(t.input.entries, k));
  if (judging.length)
    return errorResult(
      new KerncapError("E_USAGE", `${name}: ${judging.join(", ")} would change how your edits are judged, which is the user's to set, not the agent's`, {
        hint: "Leave them out: the capture's judging settings apply (the user sets them with `kerncap judge DIR --rtol …`, or starts the server with `kerncap mcp --agent-judging` to let the agent choose them). Tell the user if the kernel needs a tolerance.",
      }),
    );
  // a key the schema does not hold as its own (`__proto__`: a strict object's check asks `in`, which finds Object's) is unknown
  const entries = (input as unknown as { entries: Record<string, unknown> }).entries;
  const stray = Object.keys(req.params.arguments ?? {}).find((k) => !Object.hasOwn(entries, k) && k in entries);
  if (stray !== undefined)
    return errorResult(
      new KerncapError(
        "E_USAGE",
        `bad arguments for ${name}: unknown argument ${JSON.stringify(stray)}; the tool takes: ${Object.keys(entries)
          .filter((k) => !DEPRECATED_ARGUMENTS.has(k))
          .join(", ")}`,
        {
          hint: "See the tool's inputSchema (tools/list).",
        },
      ),
    );
  const parsed = v.safeParse(input, req.params.arguments ?? {}, { abortEarly: true });
  if (!parsed.success) {
    return errorResult(
      new KerncapError("E_USAGE", `bad arguments for ${name}: ${argumentProblems(name as ToolName, parsed.issues, input)}`, {
        hint: "See the tool's inputSchema (tools/list).",
      }),
    );
  }
  const a = parsed.output as Record<string, unknown>;
  const long = longArgument(req.params.arguments);
  if (long)
    return errorResult(
      new KerncapError("E_USAGE", `bad arguments for ${name}: ${long} is longer than ${ARGUMENT_TEXT_MAX} characters (no path, pattern or option is)`, {
        hint: "Give a shorter value; a file's text goes in edit_file's content or an evaluate candidate's files.",
      }),
    );
  const nul = stringWhere(req.params.arguments ?? {}, (x) => x.includes("\0")); // no path, pattern or argv word holds one
  if (nul !== undefined)
    return errorResult(
      new KerncapError("E_USAGE", `bad arguments for ${name}: ${nul || "(arguments)"} holds a NUL byte, which no path, pattern or command-line word can hold`, {
        hint: "Give the argument without the NUL byte.",
      }),
    );
  // a lone surrogate ("\udcff") has no UTF-8 form: a path holding one names the file with U+FFFD in its place (adversary 69)
  const lone = illFormedStringAt(req.params.arguments ?? {});
  if (lone !== undefined)
    return errorResult(
      new KerncapError(
        "E_USAGE",
        `bad arguments for ${name}: ${lone || "(arguments)"} holds a lone UTF-16 surrogate, which has no UTF-8 form (a path would name another file)`,
        {
          hint: "Give the text as it is, with no \\uD800–\\uDFFF escape without its pair.",
        },
      ),
    );
  try {
    if (typeof a.dir === "string") {
      for (const d of new Set([a.dir, ...((a.inputs as string[] | undefined) ?? [])]))
        confineToolDir(d, trust.roots, typeof a.cwd === "string" ? a.cwd : undefined);
      // the folders by their absolute paths from here on: a command the child's answer offers (a trust refusal's
      // `kerncap validate DIR --trust=…`) then names them wherever the user pastes it (nu16 #15: relative to the server's folder)
      const from = typeof a.cwd === "string" ? a.cwd : process.cwd();
      a.dir = resolve(from, a.dir);
      if (Array.isArray(a.inputs)) a.inputs = (a.inputs as string[]).map((d) => resolve(from, d));
    }
    if (name === "run" || name === "list") confineApplication(name, a, trust.roots);
    // the file tools' answers are large (read_file: up to 4 MiB twice): made one at a time, each once the
    // answers before it are written but UNSENT_ANSWERS_MAX (a client that reads none gets no more made)
    if (name === "edit_file") return await fileTools(() => editFileTool(a as Parameters<typeof editFileTool>[0]));
    if (name === "read_file") return await fileTools(() => readFileTool(a as Parameters<typeof readFileTool>[0]));
    if (name === "list_files") return await fileTools(() => listFilesTool(a as Parameters<typeof listFilesTool>[0]));
    // a capture folder given to a verb is a capture of its own, never a folder inside one (said here, before any child starts; the verb says it again)
    if (typeof a.dir === "string") assertNotNested(resolve(a.dir));
    const send = progressSender(req.params._meta, extra.sendNotification);
    const progress = send ? new ToolProgress(send, `kerncap ${name}`, ctx.progressMs) : undefined;
    if (name === "evaluate") return await evaluateTool(a as EvaluateIn, children, trust, extra.signal, progress);
    // every build an agent asks for is confined, and a received capture's (or a Triton capture's, whose build imports src/) runs only with --trust-builds
    // tune's builds: the agent's jobs, at most this call's share of the CPUs (buildsPerCall)
    if (name === "tune") a.jobs = Math.min((a.jobs as number | undefined) ?? Number.MAX_SAFE_INTEGER, buildsPerCall(children));
    const argv = gatedArgv(name as ToolName, a, (t as { argv: (x: unknown) => string[] }).argv(a), Boolean(trust.trustBuilds));
    return await runVerb(argv, a.cwd as string | undefined, children, extra.signal, progress);
  } catch (e) {
    return errorResult(e);
  }
}

/** Arguments kept for old clients that the list of what a tool takes leaves out (validate's, build's and profile's `force`: allowVersionMismatch). */
const DEPRECATED_ARGUMENTS = new Set(["force"]);

/**
 * JSON-RPC 2.0 §5.1: a line that is not JSON gets a -32700 Parse error reply (id null), a JSON
 * value that is not a JSON-RPC message a -32600 Invalid Request. The SDK's stdio transport
 * (shared/stdio.js ReadBuffer) only passes either to transport.onerror (SyntaxError from
 * JSON.parse, ZodError from the message schema) and drops the line; this wraps that hook (set by
 * Server.connect) so the client hears about it too. Call after connect.
 */
/** Transports whose session the SDK ended because a message passed its stdio bound (answerUnreadable). */
/**
 * How many answers may wait unwritten (the client not reading them) before the server makes
 * another file tool's answer: each read_file answer holds up to 4 MiB of text twice (content and
 * structuredContent), JSON-escaped; a client that sent 400 read_file calls at once and read none
 * took the server to 23.7 GB (a trial).
 */
export const UNSENT_ANSWERS_MAX = 4;

/**
 * The transport's answers not yet written (its send resolves once stdout took the message: the
 * SDK's stdio transport waits for 'drain'), and a wait for fewer than `max` of them. Bun's stdout
 * reports no writableLength (0 whatever waits), so the sends are counted here.
 */
export function unsentAnswers(transport: Transport, max = UNSENT_ANSWERS_MAX): () => Promise<void> {
  let unsent = 0;
  let waiters: (() => void)[] = [];
  const send = transport.send.bind(transport);
  transport.send = async (...args: Parameters<Transport["send"]>) => {
    unsent++;
    try {
      await send(...args);
    } finally {
      unsent--;
      if (unsent < max) for (const w of waiters.splice(0)) w();
    }
  };
  return () => (unsent < max ? Promise.resolve() : new Promise<void>((res) => waiters.push(res)));
}

/**
 * Calls made one at a time, each once `room` says the answers before it are written (unsentAnswers):
 * the next starts a macrotask after the last one returned, when the SDK has handed its answer to
 * the transport (its send follows the handler's promise in a microtask), so the backlog it left is
 * seen. Without the turn, every call of a burst passed the check before any answer was written.
 */
export function answersInTurn(room: () => Promise<void>): <T>(f: () => T | Promise<T>) => Promise<T> {
  let turn: Promise<void> = Promise.resolve();
  return async <T>(f: () => T | Promise<T>): Promise<T> => {
    const before = turn;
    let done!: () => void;
    turn = new Promise<void>((res) => (done = res));
    await before;
    try {
      await room();
      return await f();
    } finally {
      setImmediate(done);
    }
  };
}

const overflowed = new WeakSet<Transport>();

/** The largest JSON-RPC message `kerncap mcp` reads (bytes): edit_file's 4 MiB of content, JSON-escaped at worst 6 bytes a byte, and room. */
export const MCP_MESSAGE_MAX = 64 << 20;

/** Whether the SDK ended this transport's session because a message passed MCP_MESSAGE_MAX. */
export function endedByOversizedMessage(transport: Transport): boolean {
  return overflowed.has(transport);
}

export function answerUnreadable(transport: Transport): void {
  const inner = transport.onerror;
  const unreadableId = unreadableIds(transport); // a message that is JSON with an id but no JSON-RPC request: answered under that id
  transport.onerror = (e: Error) => {
    inner?.(e);
    const parse = e instanceof SyntaxError;
    const invalid = !parse && e?.name === "ZodError";
    // the SDK's stdio ReadBuffer drops a message past its bound (maxBufferSize) and says so only to onerror, then closes the transport
    const tooLarge = !parse && !invalid && /ReadBuffer exceeded maximum size/.test(String(e?.message));
    if (tooLarge) {
      overflowed.add(transport);
      log.error(`an MCP message was larger than the stdio transport's bound (${e.message}): dropped, and the SDK's transport ends the session`);
    }
    if (!parse && !invalid && !tooLarge) return;
    const error = tooLarge
      ? {
          code: -32600,
          message: `Invalid Request: a message past ${MCP_MESSAGE_MAX >> 20} MiB was dropped (${e.message}) and the session ends; send smaller messages (file contents go through read_file/edit_file, at most 4 MiB)`,
        }
      : parse
        ? { code: -32700, message: `Parse error: ${e.message}` }
        : { code: -32600, message: "Invalid Request: not a JSON-RPC 2.0 message" };
    void transport.send({ jsonrpc: "2.0", id: invalid ? unreadableId() : null, error } as unknown as Parameters<Transport["send"]>[0]).catch(() => {});
  };
}

/**
 * Serve until the transport closes (the client closed stdin) or SIGINT/SIGTERM: either ends the
 * running tool children's groups (the signal, or SIGTERM at a close; SIGKILL after
 * TOOL_GRACE_MS or at a second signal) and returns once they have exited.
 * @throws KerncapError E_INTERRUPTED (exit 130 SIGINT, 143 SIGTERM) after a signal
 */
export async function serve(transport: Transport, trust: McpTrust = {}, jobs?: number, reading?: Reading): Promise<void> {
  const children = new ToolChildren(jobs);
  const server = createMcpServer(children, trust, { outputRoom: unsentAnswers(transport), ...(reading ? { reading } : {}) });
  const stops = new StopSignals().install();
  const closed = new Promise<void>((res) => (server.onclose = () => res()));
  stops.onStop = (sig) => {
    children.stop(sig);
    void server.close();
  };
  stops.onKill = () => children.kill();
  let running = 0;
  try {
    await server.connect(transport);
    answerUnreadable(transport);
    const unanswered = unansweredCalls(transport);
    await closed;
    running = Math.max(children.size, unanswered()); // a call with no child yet (or none at all) goes unanswered too
    children.stop("SIGTERM"); // nobody is left to answer: a call's child must not outlive the session
    // a client that closed stdin before its answers came (a one-shot `printf … | kerncap mcp`) is told why none came
    if (running && !stops.signal)
      log.warn(
        `stdin closed while ${running} tool call${running > 1 ? "s were" : " was"} running: ${running > 1 ? "they were" : "it was"} stopped, unanswered (an MCP client closes stdin to end the session; keep it open until the answers come)`,
      );
    await children.settled();
  } finally {
    stops.dispose();
  }
  if (stops.signal)
    throw new KerncapError(
      "E_INTERRUPTED",
      `kerncap mcp ended by ${stops.signal}${running ? `; the processes of ${running} running tool call${running > 1 ? "s" : ""} were ended` : ""}`,
      { exitCode: signalExitCode(stops.signal) },
    );
}
