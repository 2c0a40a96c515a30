/**
 * Answers to malformed JSON-RPC messages that name their request (a new user's finding): a
 * `tools/call` whose `params` lack a tool name or whose `arguments` are not an object is
 * -32602 Invalid params with a sentence (the SDK parsed it first and answered -32603 with its
 * validator's dump), and a message the SDK's stdio transport cannot read as JSON-RPC is answered
 * with its own `id` where it has one (a client that matches answers by id waited forever on null).
 */
import type { Server } from "@modelcontextprotocol/sdk/server/index.js";
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js";
import { ErrorCode, McpError } from "@modelcontextprotocol/sdk/types.js";

type Handler = (request: unknown, extra: unknown) => Promise<unknown>;

/**
 * Why the `params` of a tools/call request are not a call of a tool, as a sentence, or undefined.
 * @param tools the tool names, said when the name is missing
 */
export function callParamsProblem(request: unknown, tools: readonly string[]): string | undefined {
  const params = (request as { params?: unknown } | null)?.params;
  if (params === null || typeof params !== "object" || Array.isArray(params))
    return `tools/call needs params {"name": TOOL, "arguments": {…}}; tools: ${tools.join(", ")}`;
  const { name, arguments: args } = params as { name?: unknown; arguments?: unknown };
  if (typeof name !== "string") return `params.name: a tool name is required (a string); tools: ${tools.join(", ")}`;
  if (args !== undefined && (args === null || typeof args !== "object" || Array.isArray(args)))
    return `params.arguments: the tool's arguments are an object ({"dir": …}), not ${Array.isArray(args) ? "an array" : args === null ? "null" : typeof args}`;
  return undefined;
}

/**
 * Put a check of tools/call's params before the SDK's own parse of them (its request map's entry
 * for the method, Protocol._requestHandlers, which parses with the request's schema first): a
 * malformed call gets -32602 and callParamsProblem's sentence. Call after the tools/call handler is
 * set. Where the SDK keeps no such map (another version), nothing changes.
 */
export function answerMalformedCalls(server: Server, tools: readonly string[]): void {
  const handlers = (server as unknown as { _requestHandlers?: Map<string, Handler> })._requestHandlers;
  const inner = handlers?.get("tools/call");
  if (!handlers || !inner) return;
  handlers.set("tools/call", async (request, extra) => {
    const why = callParamsProblem(request, tools);
    if (why) throw new McpError(ErrorCode.InvalidParams, why);
    return inner(request, extra);
  });
}

/** The `id` of a JSON-RPC message's text when it has a usable one (a string or a number), else null. */
export function idOfLine(line: string | undefined): string | number | null {
  if (line === undefined) return null;
  try {
    const m = JSON.parse(line) as { id?: unknown } | null;
    const id = m && typeof m === "object" && !Array.isArray(m) ? m.id : undefined;
    return typeof id === "string" || (typeof id === "number" && Number.isFinite(id)) ? id : null;
  } catch {
    return null;
  }
}

/**
 * Keep the id of the last message the stdio transport could not read as JSON-RPC (its ReadBuffer's
 * line, peeked before the SDK parses it): the answer to it names that request. Where the transport
 * has no such buffer (another transport), the id is null, as JSON-RPC says for an unknown one.
 * @returns the id of the last unreadable message (null: none, or none to name)
 */
export function unreadableIds(transport: Transport): () => string | number | null {
  let last: string | number | null = null;
  const rb = (transport as unknown as { _readBuffer?: { _buffer?: unknown; readMessage?: () => unknown } })._readBuffer;
  const read = rb?.readMessage?.bind(rb);
  if (rb && read)
    rb.readMessage = () => {
      const buf = rb._buffer;
      const nl = Buffer.isBuffer(buf) ? buf.indexOf(10) : -1;
      const line = nl >= 0 ? (buf as Buffer).toString("utf8", 0, nl).replace(/\r$/, "") : undefined;
      try {
        last = null;
        return read();
      } catch (e) {
        last = idOfLine(line);
        throw e;
      }
    };
  return () => last;
}
