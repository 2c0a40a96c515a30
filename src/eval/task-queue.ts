/**
 * The queue between eval's builds and its GPU workers (./eval.ts): each build that ends pushes its
 * candidate's tasks, the workers (src/check/pool.ts drainQueue) take them in that order.
 */
/** A queue the builds push into and the GPU workers take from; take() waits until a task comes or end(). */
export class TaskQueue<T> {
  private items: T[] = [];
  private waiting: ((t: T | undefined) => void)[] = [];
  private ended = false;
  push(t: T): void {
    const w = this.waiting.shift();
    if (w) w(t);
    else this.items.push(t);
  }
  end(): void {
    this.ended = true;
    for (const w of this.waiting.splice(0)) w(undefined);
  }
  take(): Promise<T | undefined> {
    if (this.items.length) {
      const t = this.items.shift();
      this.wakeRoom();
      return Promise.resolve(t);
    }
    if (this.ended) return Promise.resolve(undefined);
    return new Promise((res) => this.waiting.push(res));
  }
  private roomWaiting: (() => void)[] = [];
  private reserved = 0;
  private released = false;
  /**
   * Wait until the tasks waiting to be taken and the places held (by builds under way) are fewer
   * than `n` (or release() was called), then hold a place: give it back with unreserve() once the
   * build's tasks are pushed (or it gave none).
   */
  async reserve(n: number): Promise<void> {
    while (!this.released && this.items.length + this.reserved >= n) await new Promise<void>((res) => this.roomWaiting.push(res));
    this.reserved++;
  }
  unreserve(): void {
    this.reserved--;
    this.wakeRoom();
  }
  /** No more waiting for room: the workers are gone or stopped. */
  release(): void {
    this.released = true;
    this.wakeRoom();
  }
  private wakeRoom(): void {
    for (const w of this.roomWaiting.splice(0)) w();
  }
}
