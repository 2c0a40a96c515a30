/**
 * The tool calls a `kerncap mcp` session took and has not answered, counted at the transport
 * (src/mcp/server.ts serve: what it says when the client closes stdin early).
 */
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js";

/**
 * Count the `tools/call` requests that came in on `transport` (its onmessage, wrapped: call after
 * Server.connect set it) and got no result or error back (its send, wrapped). A call that runs no
 * child process (an inspect of a large capture, in the server's own process) counts as one that
 * does.
 * @returns a function giving the number unanswered now
 */
export function unansweredCalls(transport: Transport): () => number {
  const open = new Set<string | number>();
  const isId = (id: unknown): id is string | number => typeof id === "string" || typeof id === "number";
  const inner = transport.onmessage;
  transport.onmessage = (message, extra) => {
    const m = message as { id?: unknown; method?: unknown };
    if (m.method === "tools/call" && isId(m.id)) open.add(m.id);
    inner?.(message, extra);
  };
  const send = transport.send.bind(transport);
  transport.send = (message, options) => {
    const m = message as { id?: unknown; result?: unknown; error?: unknown };
    if (isId(m.id) && ("result" in m || "error" in m)) open.delete(m.id);
    return send(message, options);
  };
  return () => open.size;
}
