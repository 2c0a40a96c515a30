import { describe, expect, test } from "bun:test";
import { replayBeside, type StartedRebuild } from "../../../src/ops/rebuild-beside.ts";
import type { Rebuilt } from "../../../src/rebuild/rebuilder.ts";

/** A rebuild whose compiler start and end the test decides. */
function fakeRebuild() {
  const compiling = Promise.withResolvers<void>();
  const built = Promise.withResolvers<Rebuilt>();
  built.promise.catch(() => {});
  const released = { n: 0 };
  const rb: StartedRebuild = {
    built: built.promise,
    module: built.promise.then((b) => b.module),
    builtAt: () => 0,
    compiling: compiling.promise,
    release: () => void released.n++,
  };
  rb.module.catch(() => {});
  return { rb, compiling, built, released };
}

describe("replayBeside", () => {
  test("the replay's preparation starts once the rebuild's compiler runs, not before (the build's preprocessing and pruning keep the thread)", async () => {
    const order: string[] = [];
    const f = fakeRebuild();
    const p = replayBeside(f.rb, async () => {
      order.push("replay");
      return 7;
    });
    await Bun.sleep(20);
    expect(order).toEqual([]);
    order.push("compiler started");
    f.compiling.resolve();
    expect(await p).toBe(7);
    expect(order).toEqual(["compiler started", "replay"]);
    // the capture's build lock is let go once the replay is done with the module
    expect(f.released.n).toBe(1);
  });

  test("a replay that fails reports the build's error where the build failed", async () => {
    const f = fakeRebuild();
    f.compiling.resolve();
    f.built.reject(new Error("E_BUILD: the edit does not compile"));
    await expect(
      replayBeside(f.rb, async () => {
        throw new Error("no module");
      }),
    ).rejects.toThrow("the edit does not compile");
  });

  test("without a rebuild the replay runs at once", async () => {
    expect(await replayBeside(undefined, async () => "ran")).toBe("ran");
  });
});
