/**
 * The arguments of the MCP tools whose command lines src/mcp/tools.ts builds (TOOLS[…].argv), as
 * their input schemas there give them (valibot's output types, written out: the argv functions
 * are part of the TOOLS object the schemas live in).
 */
import type { McpCandidate } from "./evaluate.ts";

export type ProfileIn = {
  dir: string;
  name?: string;
  build?: boolean;
  allowVersionMismatch?: boolean;
  force?: boolean;
  metrics?: string[];
  set?: string;
  clockControl?: "base" | "none";
  cacheControl?: "all" | "none";
};
export type TuneIn = {
  dir: string;
  config?: string[];
  define?: string[];
  maxrregcount?: number[];
  nvccFlags?: string[];
  grid?: string;
  iters?: number;
  jobs?: number;
  atol?: number;
  rtol?: number;
  dtype?: string;
  multiset?: string[];
  flushL2?: boolean;
  buildOnly?: boolean;
  allowVersionMismatch?: boolean;
};
export type EvaluateIn = {
  dir: string;
  inputs?: string[];
  candidates: McpCandidate[];
  iters?: number;
  gpus?: string;
  workersPerGpu?: number;
  grid?: string;
  atol?: number;
  rtol?: number;
  dtype?: string;
  multiset?: string[];
  flushL2?: boolean;
  runs?: number;
  noVerify?: boolean;
  allowVersionMismatch?: boolean;
  requireGpu?: boolean;
  buildOnly?: boolean;
  timeout?: number;
  buildTimeout?: number;
};
export type ToleranceIn = { iters?: number; atol?: number; rtol?: number; dtype?: string; multiset?: string[] };
export type RunIn = {
  app: string[];
  kernel?: string;
  dispatch?: number;
  out?: string;
  force?: boolean;
  exitAfterCapture?: boolean;
  sourceRoot?: string;
  compileCommands?: string;
  captureAll?: boolean;
  maxCaptures?: number;
  launchCount?: number;
  countBenchmarks?: boolean;
  rank?: number;
  process?: number;
};
