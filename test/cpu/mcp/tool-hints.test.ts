/** src/mcp/tool-hints.ts: a verb's advice in the MCP tools' words (nu89 #2). */
import { expect, test } from "bun:test";
import { NO_GPU_KEEP, RERUN_RESUME } from "../../../src/eval/report.ts";
import { FIX_AND_VALIDATE } from "../../../src/frontends/build.ts";
import { MCP_NO_GPU_HINT, toolText, withToolHint } from "../../../src/mcp/tool-hints.ts";

test("E_NO_GPU from any tool, E_BUILD from build and validate: their hints in the tools' words; other hints as they are", () => {
  const err = (code: string, hint: string) => ({ schema: "kerncap.error/1", error: { code, message: "m", hint } });
  expect((withToolHint(["eval", "cap", "--require-gpu"], err("E_NO_GPU", "give --build-only")) as any).error.hint).toBe(MCP_NO_GPU_HINT);
  expect((withToolHint(["validate", "cap", "--build-only"], err("E_BUILD", FIX_AND_VALIDATE)) as any).error.hint).toContain("call build again");
  expect((withToolHint(["validate", "cap"], err("E_BUILD", FIX_AND_VALIDATE)) as any).error.hint).toContain("call validate again");
  const other = err("E_BUILD", "install nvcc 13");
  expect(withToolHint(["validate", "cap"], other)).toBe(other);
  const ok = { schema: "kerncap.eval/1", candidates: [] };
  expect(withToolHint(["eval"], ok)).toBe(ok);
});

test("eval's last line names no --jsonl or --resume for an agent", () => {
  const t = toolText(
    `2 of 2 candidates could not be judged (error): there is no GPU here for 2 candidates, which built (run it; ${NO_GPU_KEEP}); 1 more: ${RERUN_RESUME}`,
  );
  expect(t).not.toContain("--jsonl");
  expect(t).not.toContain("--resume");
  expect(t).toContain("evaluate's buildOnly: true compiles them without a GPU");
  expect(t).toContain("calling evaluate again tries them again");
});

test("an evaluate candidate with no name is named by its place, never as one the agent named another (adversary 90)", async () => {
  const { checkCandidates } = await import("../../../src/mcp/evaluate.ts");
  const got = checkCandidates([{ patch: "x" }, { name: "c1", patch: "y" }, { patch: "z" }]).map((x) => x.name);
  expect(got).toEqual(["c1_2", "c1", "c3"]);
});
