import { abortedError } from "@infer/core";
import { HttpError } from "./errors.js";

interface Waiter {
  /** False for work admitted earlier whose requests are counted in `heldElsewhere` already. */
  counted: boolean;
  grant: (release: () => void) => void;
  reject: (error: unknown) => void;
}

/**
 * One model's admission control: at most `slots` requests run at once, at most
 * `maxQueue` wait behind them; past that a request is refused with 429. A
 * waiting request whose client goes away leaves the queue at once.
 */
export class SlotQueue {
  private running = 0;
  private readonly waiting: Waiter[] = [];

  constructor(
    private readonly slots: number,
    private readonly maxQueue: number,
    /** Seconds a refused client is told to wait (Retry-After). */
    private readonly retryAfterSeconds = 1,
  ) {}

  get active(): number {
    return this.running;
  }

  get depth(): number {
    return this.countedWaiting() + this.heldElsewhere;
  }

  private countedWaiting(): number {
    return this.waiting.filter((w) => w.counted).length;
  }

  /** Requests waiting elsewhere (a batch being gathered) that count against `maxQueue` too. */
  heldElsewhere = 0;

  /** Throws 429 when no request may join the wait. */
  checkRoom(): void {
    const waiting = this.countedWaiting() + this.heldElsewhere;
    if (this.running >= this.slots && waiting >= this.maxQueue) {
      throw new HttpError(
        429,
        `the server is busy: ${this.running} running and ${waiting} queued requests for this model; retry later`,
        "rate_limit_exceeded",
        "queue_full",
        null,
        { "retry-after": String(this.retryAfterSeconds) },
      );
    }
  }

  /**
   * Resolves with a release function once a slot is free. `admitted` skips
   * the room check and the queue depth for work that was admitted earlier
   * (a gathered batch, whose requests `heldElsewhere` counts).
   */
  acquire(signal: AbortSignal, admitted = false): Promise<() => void> {
    if (signal.aborted) return Promise.reject(abortedError(signal.reason));
    if (this.running < this.slots) {
      this.running++;
      return Promise.resolve(this.releaser());
    }
    if (!admitted) {
      try {
        this.checkRoom();
      } catch (error) {
        return Promise.reject(error);
      }
    }
    return new Promise((resolve, reject) => {
      const waiter: Waiter = {
        counted: !admitted,
        grant: (release) => {
          signal.removeEventListener("abort", onAbort);
          resolve(release);
        },
        reject,
      };
      const onAbort = () => {
        const at = this.waiting.indexOf(waiter);
        if (at >= 0) this.waiting.splice(at, 1);
        reject(abortedError(signal.reason));
      };
      signal.addEventListener("abort", onAbort, { once: true });
      this.waiting.push(waiter);
    });
  }

  private releaser(): () => void {
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const next = this.waiting.shift();
      // The slot passes straight to the next waiter; `running` stays the same.
      if (next) next.grant(this.releaser());
      else this.running--;
    };
  }
}
