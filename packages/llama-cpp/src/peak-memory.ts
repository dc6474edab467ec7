function rss(): number {
  return process.memoryUsage.rss();
}

/** The process's resident-set high-water mark (getrusage: one cheap system call). */
function maxRss(): number {
  return process.resourceUsage().maxRSS * 1024;
}

/**
 * The largest resident set of the process during one call. llama.cpp gives no
 * per-call figure: it allocates weights, KV cache and compute buffers up front,
 * but what stays resident moves during a call (compute buffers touched,
 * memory-mapped weights paged in, JavaScript's own allocations). When the
 * process's high-water mark rose during the call, that mark is the call's
 * peak, exactly. Otherwise the call stayed below an earlier peak, and the
 * largest of the samples is used: reading the current RSS is a file read and a
 * parse, so steps take one at most every SAMPLE_INTERVAL_MS; the first and
 * last are always taken.
 */
export class PeakRss {
  private static readonly SAMPLE_INTERVAL_MS = 100;
  private peak = rss();
  private readonly markAtStart = maxRss();
  private lastSample = performance.now();

  sample(): void {
    const now = performance.now();
    if (now - this.lastSample < PeakRss.SAMPLE_INTERVAL_MS) return;
    this.lastSample = now;
    this.peak = Math.max(this.peak, rss());
  }

  final(): number {
    const mark = maxRss();
    this.peak = mark > this.markAtStart ? mark : Math.max(this.peak, rss());
    return this.peak;
  }
}
